"""The optional ``webrtc-audio-processing`` provider: the 2016-era WebRTC APM (AEC2) through PyPI
``webrtc-audio-processing`` 0.1.x (the ``webrtc-audio-processing`` extra; built from source with ``swig``).

Kept beside the default (livekit's AEC3, provider ``webrtc``) so both can be compared on the same echo
path; AEC3 wins (ADR 0003), so this one stays opt-in. It runs AEC2 at high suppression with a
stream-delay hint (``ApmConfig.stream_delay_ms``, or a
:class:`~openab_voice.providers.apm_delay.DelayEstimator` by default), moderate noise suppression and
adaptive digital gain; it has no high-pass filter switch (``high_pass_filter=False``). The binding
reads one 10 ms frame from any buffer unchecked, so every frame's size is checked here first.
Measurements: docs/adr/0003-webrtc-apm-provider.md.
"""

from __future__ import annotations

from typing import Any, Final

import webrtc_audio_processing

from openab_voice.errors import AudioError, ErrorCode
from openab_voice.providers.apm import ApmCapabilities, ApmConfig
from openab_voice.providers.apm_delay import DelayEstimator

__all__ = ["PROVIDER", "WebrtcAudioProcessingApm", "create"]

PROVIDER: Final = "webrtc-audio-processing"
SAMPLE_RATES: Final = (8000, 16000, 32000, 48000)
_AEC2: Final = 2  # binding's aec_type: 1 is AECM (mobile), 2 the full AEC2
_AEC_HIGH_SUPPRESSION: Final = 2
_NS_MODERATE: Final = 1
_AGC_ADAPTIVE_DIGITAL: Final = 1
# The binding starts at a -30 dBFS target; WebRTC's own default is -3 dBFS (livekit's AGC aims there too).
_AGC_TARGET_DBFS: Final = 3


class WebrtcAudioProcessingApm:
    """:class:`~openab_voice.providers.apm.AudioProcessor` backed by ``webrtc_audio_processing``.

    Args:
        config: what the front end asks for; ``channels`` must be 1 and ``sample_rate`` one of
            8, 16, 32 or 48 kHz.

    Raises:
        AudioError: ``AUDIO_APM_FORMAT_MISMATCH`` for a channel count or rate the APM cannot take.
    """

    def __init__(self, config: ApmConfig) -> None:
        if config.channels != 1 or config.sample_rate not in SAMPLE_RATES:
            raise AudioError(
                f"{PROVIDER} processes mono audio at {SAMPLE_RATES} Hz; "
                f"got {config.channels} channel(s) at {config.sample_rate} Hz",
                code=ErrorCode.AUDIO_APM_FORMAT_MISMATCH,
                provider=PROVIDER,
                sample_rate=config.sample_rate,
                channels=config.channels,
            )
        ap = webrtc_audio_processing.AudioProcessingModule(
            aec_type=_AEC2 if config.echo_cancellation else 0,
            enable_ns=config.noise_suppression,
            agc_type=_AGC_ADAPTIVE_DIGITAL if config.auto_gain_control else 0,
            enable_vad=False,
        )
        rate = config.sample_rate
        # The output format defaults to 16 kHz mono in the binding: it must equal the input here, or
        # process_stream would return a frame of another size.
        ap.set_stream_format(rate, 1, rate, 1)
        ap.set_reverse_stream_format(rate, 1)
        self._delay: DelayEstimator | None = None
        if config.echo_cancellation:
            ap.set_aec_level(_AEC_HIGH_SUPPRESSION)
            if config.stream_delay_ms is not None:
                ap.set_system_delay(int(config.stream_delay_ms))
            else:
                self._delay = DelayEstimator(rate)
        if config.noise_suppression:
            ap.set_ns_level(_NS_MODERATE)
        if config.auto_gain_control:
            ap.set_agc_target(_AGC_TARGET_DBFS)
        self._ap: Any = ap
        self._frame_bytes = rate // 100 * 2
        self._rate = rate
        self._silence = bytes(self._frame_bytes)
        self._last_render = self._silence
        self._fixed_delay_ms = config.stream_delay_ms if config.echo_cancellation else None
        self._caps = ApmCapabilities(
            name=PROVIDER,
            echo_cancellation=config.echo_cancellation,
            noise_suppression=config.noise_suppression,
            auto_gain_control=config.auto_gain_control,
            high_pass_filter=False,  # the binding has no switch for it
        )

    @property
    def capabilities(self) -> ApmCapabilities:
        return self._caps

    @property
    def delay_ms(self) -> float | None:
        """The delay hint AEC2 works with: fixed, estimated, or None while still unknown."""
        if self._delay is not None:
            return self._delay.delay_ms
        return None if self._fixed_delay_ms is None else float(self._fixed_delay_ms)

    def _module(self) -> Any:
        if self._ap is None:
            raise RuntimeError("APM instance is closed")
        return self._ap

    def _check(self, pcm: bytes, what: str) -> None:
        if len(pcm) != self._frame_bytes:
            raise AudioError(
                f"{PROVIDER} takes 10 ms mono int16 frames ({self._frame_bytes} bytes at {self._rate} Hz); "
                f"got {len(pcm)} bytes of {what}",
                code=ErrorCode.AUDIO_APM_FORMAT_MISMATCH,
                provider=PROVIDER,
                expected_bytes=self._frame_bytes,
                got_bytes=len(pcm),
            )

    def process_render(self, pcm: bytes) -> None:
        ap = self._module()
        self._check(pcm, "render reference")
        ap.process_reverse_stream(pcm)
        self._last_render = pcm

    def process_capture(self, pcm: bytes) -> bytes:
        ap = self._module()
        self._check(pcm, "capture")
        if self._delay is not None:
            found = self._delay.push(self._last_render, pcm)
            if found is not None:
                # Applied by the binding after the next reverse-stream frame, i.e. from the next pair.
                ap.set_system_delay(round(found))
        self._last_render = self._silence  # a capture without its render pairs with silence
        out = ap.process_stream(pcm)
        return bytes(out)

    def close(self) -> None:
        # Dropping the last reference runs the binding's destructor (SWIG owns the C++ object).
        self._ap = None


def create(config: ApmConfig) -> WebrtcAudioProcessingApm:
    """Registry factory for ``"webrtc-audio-processing"``."""
    return WebrtcAudioProcessingApm(config)
