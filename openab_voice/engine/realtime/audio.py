"""Audio for the realtime engine: the accepted speaker's turn in, the provider's speech out.

:class:`TurnAudio` keeps the last seconds of each speaker's *processed* capture (after echo
cancellation, noise suppression and gain control: what our own STT heard) so that, once our turn
policy accepted a turn, exactly that speaker's span of audio can be sent to the provider, resampled
to its rate. Nobody else's audio, and nothing outside an accepted turn, ever leaves.

:class:`SpeechAudio` turns the provider's audio deltas (24 kHz mono s16le, base64) into 48 kHz stereo
in whole 20 ms frames for playback, so the frames playback counts are exactly the provider's audio:
``played frames x 20 ms`` is the ``audio_end_ms`` a truncation needs (plus the resampler's few
samples of delay, flushed at the end of each item).
"""

from __future__ import annotations

import base64
import collections

import numpy as np
import numpy.typing as npt
import soxr

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, AudioFrame
from openab_voice.audio.resample import downmix

__all__ = ["TurnAudio", "SpeechAudio"]

Samples = npt.NDArray[np.int16]


class TurnAudio:
    """Per-speaker rings of recent processed capture, read back as one turn's audio.

    Args:
        window_s: how much of each speaker's audio is kept (a turn longer than this is cut to its end).
    """

    def __init__(self, *, window_s: float = 30.0) -> None:
        self._window_s = window_s
        self._frames: dict[str, collections.deque[AudioFrame]] = {}

    def push(self, frame: AudioFrame) -> None:
        """Keep one processed capture frame (mono, the internal rate); the oldest falls out."""
        if frame.speaker_id is None:
            return
        ring = self._frames.setdefault(frame.speaker_id, collections.deque())
        ring.append(frame)
        while ring and frame.timestamp - ring[0].timestamp > self._window_s:
            ring.popleft()

    def forget(self, speaker_id: str) -> None:
        self._frames.pop(speaker_id, None)

    def span(self, speaker_id: str, start: float, end: float, *, rate: int) -> bytes:
        """``speaker_id``'s audio from ``start`` to ``end`` (capture times) as s16le mono at ``rate``.

        Frames that overlap the span are taken whole (at most one frame of margin each side).
        """
        ring = self._frames.get(speaker_id, ())
        picked = [f for f in ring if f.timestamp < end and f.timestamp + _duration(f) > start]
        if not picked:
            return b""
        in_rate = picked[0].sample_rate
        mono = np.concatenate([downmix(f) for f in picked if f.sample_rate == in_rate])
        if in_rate != rate:
            mono = soxr.resample(mono, in_rate, rate).astype(np.int16)
        return mono.astype("<i2").tobytes()


def _duration(frame: AudioFrame) -> float:
    return len(frame.pcm) / (2 * frame.channels * frame.sample_rate)


class SpeechAudio:
    """One provider audio item: base64 deltas in, whole 48 kHz stereo frames out.

    Args:
        in_rate: the provider's rate (24 kHz).
    """

    def __init__(self, *, in_rate: int) -> None:
        self._stream = soxr.ResampleStream(in_rate, 48_000, 1, dtype="int16")
        self._pending = b""
        self._odd = b""  # half a sample left over from the last delta
        self.in_ms = 0.0
        self._in_rate = in_rate

    def push(self, delta_b64: str) -> bytes:
        """Decode and resample one delta; returns the whole frames now complete (maybe none)."""
        data = self._odd + base64.b64decode(delta_b64)
        whole = len(data) - len(data) % 2
        self._odd = data[whole:]
        samples = np.frombuffer(data[:whole], dtype="<i2")
        self.in_ms += samples.size * 1000.0 / self._in_rate
        return self._frames(self._stream.resample_chunk(samples))

    def flush(self) -> bytes:
        """The item's audio ended: the resampler's tail and the last, padded frame."""
        tail = self._stream.resample_chunk(np.zeros(0, dtype=np.int16), last=True)
        out = self._frames(tail)
        if self._pending:
            out += self._pending.ljust(DISCORD_FRAME_BYTES, b"\0")
            self._pending = b""
        return out

    def _frames(self, mono: Samples) -> bytes:
        stereo = np.repeat(mono.astype("<i2"), 2).tobytes()
        data = self._pending + stereo
        whole = len(data) - len(data) % DISCORD_FRAME_BYTES
        self._pending = data[whole:]
        return data[:whole]
