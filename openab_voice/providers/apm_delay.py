"""Render-to-capture delay estimation for echo cancellers that need a delay hint (AEC2).

AEC2 cancels only echo near the delay hint it is given, and the ``webrtc-audio-processing`` binding
does not expose its delay-agnostic mode, so :class:`DelayEstimator` does that job: it keeps the last
0.5 s of capture and 1 s of render and, every 250 ms while both carry signal, finds the lag at which
they correlate best (normalised cross-correlation over 0-500 ms, by FFT on a 4 kHz decimation). Two
agreeing, clearly correlated estimates in a row make the estimate; a later disagreeing pair replaces it.
Measurements: docs/adr/0003-webrtc-apm-provider.md.
"""

from __future__ import annotations

import collections
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["DelayEstimator"]

_DECIMATE: Final = 4
_MIN_NCC: Final = 0.3  # an echo path scores 0.5-0.93 (ADR 0005); unrelated speech rarely 0.3
_AGREE_MS: Final = 4.0
_ACTIVE_RMS: Final = 32768.0 * 10.0 ** (-55.0 / 20.0)  # below -55 dBFS there is nothing to correlate


class DelayEstimator:
    """Estimates how far the capture lags the render reference, from 10 ms frame pairs.

    Args:
        sample_rate: Hz of both streams.
        max_delay_ms: longest delay searched.
        window_ms: capture span correlated per estimate.
        every_ms: how often an estimate is attempted.
    """

    def __init__(
        self, sample_rate: int, *, max_delay_ms: int = 500, window_ms: int = 500, every_ms: int = 250
    ) -> None:
        self._rate = sample_rate
        self._frame = sample_rate // 100
        self._window_frames = window_ms // 10
        self._lag_frames = max_delay_ms // 10
        self._every = max(1, every_ms // 10)
        self._render: collections.deque[npt.NDArray[np.int16]] = collections.deque(
            maxlen=self._window_frames + self._lag_frames
        )
        self._capture: collections.deque[npt.NDArray[np.int16]] = collections.deque(
            maxlen=self._window_frames
        )
        self._frames = 0
        self._candidate: float | None = None
        self.delay_ms: float | None = None
        """The current estimate, or None until one is established."""
        self.estimates = 0
        """How many estimates were attempted (for tests and diagnostics)."""

    def push(self, render: bytes, capture: bytes) -> float | None:
        """Add one 10 ms pair (render first: what played while ``capture`` was heard).

        Returns:
            The new estimate when this frame established or changed it, otherwise None.
        """
        self._render.append(np.frombuffer(render, dtype=np.int16))
        self._capture.append(np.frombuffer(capture, dtype=np.int16))
        self._frames += 1
        if self._frames % self._every or len(self._capture) < self._window_frames:
            return None
        if len(self._render) < self._window_frames + self._lag_frames:
            return None
        found = self._estimate()
        if found is None:
            return None
        agreed = self._candidate is not None and abs(found - self._candidate) <= _AGREE_MS
        self._candidate = found
        if not agreed:
            return None
        if self.delay_ms is not None and abs(found - self.delay_ms) <= _AGREE_MS:
            return None
        self.delay_ms = found
        return found

    def _estimate(self) -> float | None:
        """Best lag in ms, or None when either stream is quiet or nothing correlates clearly."""
        self.estimates += 1
        x = _decimate(np.concatenate(self._capture))
        y = _decimate(np.concatenate(self._render))
        if _rms(x) < _ACTIVE_RMS or _rms(y) < _ACTIVE_RMS:
            return None
        x = x - x.mean()
        y = y - y.mean()
        size = 1 << int(np.ceil(np.log2(x.size + y.size)))
        # corr[k] = sum_n x[n] * y[n + k]: capture against render shifted by k samples.
        corr = np.fft.irfft(np.conj(np.fft.rfft(x, size)) * np.fft.rfft(y, size), size)[: y.size - x.size + 1]
        energy = np.concatenate(([0.0], np.cumsum(y * y)))
        segment = np.sqrt(np.maximum(energy[x.size :] - energy[: y.size - x.size + 1], 1e-9))
        ncc = corr / (np.sqrt(float(np.dot(x, x))) * segment)
        k = int(np.argmax(ncc))
        if ncc[k] < _MIN_NCC:
            return None
        # The capture window ends where the render window ends; the render starts max-lag earlier.
        lag = (y.size - x.size) - k
        return round(float(lag * _DECIMATE * 1000.0 / self._rate), 1)


def _decimate(samples: npt.NDArray[np.int16]) -> npt.NDArray[np.float64]:
    """Block means of ``_DECIMATE`` samples: a crude low-pass, enough for speech envelopes."""
    usable = samples.size // _DECIMATE * _DECIMATE
    out: npt.NDArray[np.float64] = samples[:usable].astype(np.float64).reshape(-1, _DECIMATE).mean(axis=1)
    return out


def _rms(x: npt.NDArray[np.float64]) -> float:
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0
