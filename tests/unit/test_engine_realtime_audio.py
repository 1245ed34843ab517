"""The realtime engine's audio: the accepted speaker's span in, whole 48 kHz stereo frames out."""

from __future__ import annotations

import base64

import numpy as np

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, AudioFrame
from openab_voice.engine.realtime.audio import SpeechAudio, TurnAudio


def _frame(speaker: str, at: float, value: int, *, i: int = 0) -> AudioFrame:
    pcm = np.full(320, value, dtype="<i2").tobytes()  # 20 ms of 16 kHz mono
    return AudioFrame(pcm=pcm, sample_rate=16_000, channels=1, timestamp=at, frame_id=i, speaker_id=speaker)


def test_a_turn_is_only_its_speakers_audio_within_its_span() -> None:
    audio = TurnAudio(window_s=10.0)
    for i in range(100):  # 2 s each, interleaved
        audio.push(_frame("alice", i * 0.02, 1000, i=i))
        audio.push(_frame("bob", i * 0.02, -1000, i=i))
    pcm = audio.span("alice", 0.5, 1.0, rate=16_000)
    samples = np.frombuffer(pcm, dtype="<i2")
    assert samples.size == 25 * 320  # the frames that start in [0.5, 1.0)
    assert (samples == 1000).all()  # never Bob's
    resampled = np.frombuffer(audio.span("alice", 0.5, 1.0, rate=24_000), dtype="<i2")
    assert abs(resampled.size - 25 * 480) <= 2
    assert audio.span("carol", 0.0, 1.0, rate=24_000) == b""


def test_the_window_forgets_old_audio() -> None:
    audio = TurnAudio(window_s=1.0)
    for i in range(150):
        audio.push(_frame("alice", i * 0.02, 7, i=i))
    assert audio.span("alice", 0.0, 1.0, rate=16_000) == b""
    assert audio.span("alice", 2.0, 3.0, rate=16_000)


def test_deltas_become_whole_frames_and_the_flush_pads_the_last() -> None:
    speech = SpeechAudio(in_rate=24_000)
    tone = (8000 * np.sin(np.arange(24_000 * 0.25) / 24_000 * 2 * np.pi * 440)).astype("<i2").tobytes()
    out = b""
    for at in range(0, len(tone), 999):  # odd-sized deltas split samples in two
        out += speech.push(base64.b64encode(tone[at : at + 999]).decode())
        assert len(out) % DISCORD_FRAME_BYTES == 0
    out += speech.flush()
    assert len(out) % DISCORD_FRAME_BYTES == 0
    assert abs(speech.in_ms - 250.0) < 0.1
    frames = len(out) // DISCORD_FRAME_BYTES
    assert frames in (13, 14)  # 250 ms: 12.5 frames, the last padded (plus the resampler's tail)
    stereo = np.frombuffer(out, dtype="<i2")
    assert (stereo[0::2] == stereo[1::2]).all()  # both channels carry the voice
