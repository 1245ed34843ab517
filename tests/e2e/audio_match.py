"""Comparing what the bot heard with what a speaker sent: 20 ms RMS envelopes and their correlation."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

RATE = 48_000
HOP = RATE // 50  # 20 ms


def envelope(pcm: npt.NDArray[np.int16] | bytes) -> npt.NDArray[np.float64]:
    """20 ms RMS envelope of 48 kHz audio (mono mix of stereo)."""
    arr = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2) if isinstance(pcm, (bytes, bytearray)) else pcm
    mono = arr.astype(np.float64).mean(axis=1) if arr.ndim == 2 else arr.astype(np.float64)
    n = len(mono) // HOP
    frames = mono[: n * HOP].reshape(n, HOP)
    return np.sqrt((frames**2).mean(axis=1))


def best_correlation(
    heard: npt.NDArray[np.float64], sent: npt.NDArray[np.float64], expected_at: int, search: int = 25
) -> tuple[float, int]:
    """Max Pearson correlation of ``sent`` against ``heard`` at offsets ``expected_at ± search`` (in 20 ms frames)."""
    best, best_off = -1.0, expected_at
    for off in range(max(0, expected_at - search), expected_at + search + 1):
        seg = heard[off : off + len(sent)]
        if len(seg) < len(sent) * 0.9:
            continue
        ref = sent[: len(seg)]
        if seg.std() == 0 or ref.std() == 0:
            continue
        c = float(np.corrcoef(seg, ref)[0, 1])
        if c > best:
            best, best_off = c, off
    return best, best_off


def energy(env: npt.NDArray[np.float64], start: int, end: int) -> float:
    seg = env[max(0, start) : max(0, end)]
    return float(seg.mean()) if len(seg) else 0.0
