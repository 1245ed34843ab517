"""Acoustic scenes built from the shipped Piper clips, for the self-test, the benchmark and tests.

The clips (``openab_voice/testing/assets/*.wav``, 16 kHz mono, made by ``scripts/make_assets.py``;
the Chinese ones in ``zh/`` by ``scripts/make_zh_assets.py``, their texts in ``zh/clips.json``)
are real synthesized speech, so VAD and AEC see speech-like spectra and envelopes rather than tones.
:func:`echo_path` models what a listener's microphone hears of the bot: a delayed, attenuated,
reverberated copy of what was played (the render reference).
"""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import soxr

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_FRAME_SAMPLES, DISCORD_RATE, AudioFrame
from openab_voice.audio.resample import Samples

ASSETS_DIR = Path(__file__).resolve().parent.parent / "testing" / "assets"
CLIP_RATE = 16_000


def load_clip(name: str) -> Samples:
    """A shipped clip (``"alice"``, ``"bob"``, ``"far_end"``, ``"greeting"``) as 16 kHz mono int16."""
    path = ASSETS_DIR / (name if name.endswith(".wav") else f"{name}.wav")
    with wave.open(str(path), "rb") as wav:
        if wav.getframerate() != CLIP_RATE or wav.getnchannels() != 1 or wav.getsampwidth() != 2:
            raise ValueError(f"{path.name} is not 16 kHz mono 16-bit")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.int16)


def chinese_clips(said_by: Literal["people", "bot"]) -> dict[str, str]:
    """The shipped Chinese clips said by people (questions, a task, "记住…") or as the bot's answers:
    ``{"zh/question": "法国的首都是什么？", ...}``, each name ready for :func:`load_clip`."""
    manifest = json.loads((ASSETS_DIR / "zh" / "clips.json").read_text(encoding="utf-8"))
    return {f"zh/{name}": text for name, text in manifest[said_by].items()}


def silence(seconds: float, rate: int = CLIP_RATE) -> Samples:
    """Digital silence."""
    return np.zeros(round(seconds * rate), dtype=np.int16)


def noise(seconds: float, level_dbfs: float, *, seed: int = 0, rate: int = CLIP_RATE) -> Samples:
    """White noise at ``level_dbfs`` RMS."""
    rng = np.random.default_rng(seed)
    scale = 32768.0 * 10.0 ** (level_dbfs / 20.0)
    return _to_int16(rng.standard_normal(round(seconds * rate)) * scale)


def echo_path(
    far: Samples,
    *,
    delay_ms: float = 120.0,
    gain_db: float = -10.0,
    rt60_ms: float = 150.0,
    seed: int = 1,
    rate: int = CLIP_RATE,
) -> Samples:
    """What a microphone picks up of ``far`` played in a room: delayed, attenuated, reverberated.

    The room impulse response is a direct path plus an exponentially decaying noise tail that falls
    60 dB in ``rt60_ms``. The result has the same length as ``far``.
    """
    rng = np.random.default_rng(seed)
    length = max(1, round(rt60_ms / 1000.0 * rate))
    decay = np.exp(-6.91 * np.arange(length) / length)  # ln(1000) = 6.91: -60 dB at the end
    impulse = rng.standard_normal(length) * decay * 0.25
    impulse[0] = 1.0
    wet = np.convolve(far.astype(np.float64), impulse)[: far.size]
    wet *= 10.0 ** (gain_db / 20.0)
    shift = round(delay_ms / 1000.0 * rate)
    delayed = np.concatenate((np.zeros(shift), wet))[: far.size]
    return _to_int16(delayed)


def mix(*signals: Samples) -> Samples:
    """Sum of signals, zero-padded to the longest, clipped to int16."""
    length = max(s.size for s in signals)
    total = np.zeros(length)
    for s in signals:
        total[: s.size] += s
    return _to_int16(total)


def place(signal: Samples, *, at_s: float, total_s: float, rate: int = CLIP_RATE) -> Samples:
    """``signal`` starting ``at_s`` into ``total_s`` of silence (truncated at the end)."""
    out = np.zeros(round(total_s * rate), dtype=np.int16)
    start = round(at_s * rate)
    part = signal[: max(0, out.size - start)]
    out[start : start + part.size] = part
    return out


def active_span(
    samples: Samples, *, threshold_dbfs: float = -45.0, rate: int = CLIP_RATE
) -> tuple[float, float]:
    """Start and end (seconds) of the part of a clip louder than ``threshold_dbfs`` per 10 ms.

    The ground truth for VAD checks: Piper clips carry some leading and trailing silence.
    """
    step = rate // 100
    frames = samples[: samples.size // step * step].astype(np.float64).reshape(-1, step)
    level = 10.0 * np.log10(np.maximum((frames * frames).mean(axis=1) / 32768.0**2, 1e-10))
    active = np.flatnonzero(level > threshold_dbfs)
    if active.size == 0:
        return (0.0, 0.0)
    return (active[0] * step / rate, (active[-1] + 1) * step / rate)


def discord_frames(
    samples: Samples,
    *,
    speaker_id: str | None,
    start_time: float,
    first_frame_id: int = 0,
    rate: int = CLIP_RATE,
) -> list[AudioFrame]:
    """Cut ``samples`` into what the receiver (or playback) produces: 48 kHz stereo 20 ms frames."""
    up = soxr.resample(samples.astype(np.float32), rate, DISCORD_RATE)
    up = _to_int16(up)
    whole = up.size // DISCORD_FRAME_SAMPLES
    stereo = np.repeat(up[: whole * DISCORD_FRAME_SAMPLES, None], DISCORD_CHANNELS, axis=1)
    step = DISCORD_FRAME_SAMPLES / DISCORD_RATE
    return [
        AudioFrame(
            pcm=stereo[i * DISCORD_FRAME_SAMPLES : (i + 1) * DISCORD_FRAME_SAMPLES].tobytes(),
            sample_rate=DISCORD_RATE,
            channels=DISCORD_CHANNELS,
            timestamp=start_time + i * step,
            frame_id=first_frame_id + i,
            speaker_id=speaker_id,
        )
        for i in range(whole)
    ]


def _to_int16(x: npt.NDArray[np.floating] | npt.NDArray[np.integer]) -> Samples:
    out: Samples = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    return out
