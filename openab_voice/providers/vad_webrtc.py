"""The optional VAD: WebRTC's GMM detector (``webrtcvad-wheels``, the ``webrtcvad`` extra).

About 5 us per 20 ms frame but coarse: in mode 3 it marked ~58 % of loud keyboard-click frames as
speech where Silero marked none (``shared/notes/dependencies.md``). Its score is a hard 0/1.

A fresh detector reports speech for its first 80-90 ms whatever the input, and digital silence does
not advance it, so each instance is primed with 100 ms of faint seeded noise before use.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import webrtcvad

from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.vad import VadCapabilities, VadConfig

FRAME_MS = 20
_PRIME_FRAMES = 5
_PRIME_LEVEL = 30.0  # int16 units, about -61 dBFS: below any speech, above digital silence


class WebRtcVad:
    """:class:`~openab_voice.providers.vad.VoiceActivityDetector` backed by ``webrtcvad``."""

    def __init__(self, config: VadConfig) -> None:
        if config.sample_rate not in (8000, 16000, 32000, 48000):
            raise ProviderUnavailable(
                f"webrtcvad does not support {config.sample_rate} Hz",
                kind="vad",
                provider="webrtcvad",
                sample_rate=config.sample_rate,
            )
        if not 0 <= config.webrtcvad_mode <= 3:
            raise ValueError("webrtcvad mode must be 0-3")
        self._rate = config.sample_rate
        self._mode = config.webrtcvad_mode
        self._frame = config.sample_rate * FRAME_MS // 1000
        self._caps = VadCapabilities(
            name="webrtcvad", frame_samples=self._frame, sample_rate=self._rate, probabilistic=False
        )
        self._vad = self._fresh()

    def _fresh(self) -> webrtcvad.Vad:
        vad = webrtcvad.Vad(self._mode)
        noise = np.random.default_rng(0).standard_normal(self._frame * _PRIME_FRAMES) * _PRIME_LEVEL
        primer = noise.astype(np.int16)
        for i in range(_PRIME_FRAMES):
            vad.is_speech(primer[i * self._frame : (i + 1) * self._frame].tobytes(), self._rate)
        return vad

    @property
    def capabilities(self) -> VadCapabilities:
        return self._caps

    def speech_probability(self, samples: npt.NDArray[np.int16]) -> float:
        if samples.shape != (self._frame,):
            raise ValueError(f"webrtcvad needs exactly {self._frame} samples, got {samples.shape}")
        return 1.0 if self._vad.is_speech(samples.astype("<i2", copy=False).tobytes(), self._rate) else 0.0

    def reset(self) -> None:
        self._vad = self._fresh()

    def close(self) -> None:
        return None


def create(config: VadConfig) -> WebRtcVad:
    """Registry factory for ``"webrtcvad"``."""
    return WebRtcVad(config)
