"""The front end's speakers: each one's capture ring and pipeline, built, retried and freed.

:class:`PipelineFactory` holds the APM and VAD provider factories of one
:class:`~openab_voice.audio.frontend.FrontEnd`, checks them at start-up (one instance of each is
built and discarded, so a missing library or model fails there, not on the first speaker's first
frame), says whether the front end is degraded, and starts and stops a speaker's
:class:`~openab_voice.audio.pipeline.SpeakerPipeline` with the events that report it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from openab_voice.audio.events import AudioPipelineStarted, AudioPipelineStopped, AudioProcessingError
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.audio.pipeline import SpeakerPipeline
from openab_voice.audio.resample import Chunk
from openab_voice.audio.ring import FrameRing
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus.events import Event
from openab_voice.clock import Clock
from openab_voice.errors import OpenabError
from openab_voice.providers.apm import ApmCapabilities, ApmConfig, AudioProcessor, apm_registry
from openab_voice.providers.registry import ProviderRegistry
from openab_voice.providers.vad import VadCapabilities, VadConfig, VoiceActivityDetector, vad_registry

__all__ = ["PipelineFactory", "Speaker"]

_RETRY_S = 1.0


@dataclass(slots=True)
class Speaker:
    """One speaker's capture ring and, from their first processed frame, their pipeline."""

    ring: FrameRing
    shard: int = 0  # the front-end shard (thread) that processes this speaker, for life
    pipeline: SpeakerPipeline | None = None
    retry_at: float | None = None


class PipelineFactory:
    """Builds and frees speaker pipelines on the configured providers.

    Args:
        settings: front-end settings (which providers, their configuration).
        clock: injected clock.
        emit: where the pipelines' events and this factory's go (the front end's).
        apm_providers / vad_providers: registries (tests inject fakes or missing modules).

    Raises:
        ProviderUnavailable: a configured provider cannot start.
        ConfigError: unknown provider name.
    """

    def __init__(
        self,
        settings: FrontEndSettings,
        *,
        clock: Clock,
        emit: Callable[[Event], None],
        apm_providers: ProviderRegistry[ApmConfig, AudioProcessor] | None = None,
        vad_providers: ProviderRegistry[VadConfig, VoiceActivityDetector] | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._emit = emit
        apm_reg = apm_providers or apm_registry()
        vad_reg = vad_providers or vad_registry()
        apm_cfg, vad_cfg = settings.apm_config(), settings.vad_config()
        self._new_apm: Callable[[], AudioProcessor] = lambda: apm_reg.create(settings.apm_provider, apm_cfg)
        self._new_vad: Callable[[], VoiceActivityDetector] = lambda: vad_reg.create(
            settings.vad_provider, vad_cfg
        )
        probe_apm = self._new_apm()
        self.apm_capabilities: ApmCapabilities = probe_apm.capabilities
        probe_apm.close()
        probe_vad = self._new_vad()
        self.vad_capabilities: VadCapabilities = probe_vad.capabilities
        probe_vad.close()

    @property
    def degraded_reasons(self) -> tuple[str, ...]:
        """Why the front end does not clean audio as a production setup should (empty when fine)."""
        caps = self.apm_capabilities
        reasons = []
        if caps.degraded:
            reasons.append(f"apm_{caps.name}")
        for stage in ("echo_cancellation", "noise_suppression", "auto_gain_control", "high_pass_filter"):
            if not caps.degraded and not getattr(caps, stage):
                reasons.append(f"{stage}_off")
        return tuple(reasons)

    def start(self, speaker: Speaker, render_recent: Iterable[Chunk]) -> SpeakerPipeline | None:
        """The speaker's new pipeline, seeded with the recent render; None when its providers
        failed to start (reported; retried after a second)."""
        speaker_id = speaker.ring.speaker_id or ""
        now = self._clock.monotonic()
        if speaker.retry_at is not None and now < speaker.retry_at:
            return None
        settings = self._settings
        try:
            pipeline = SpeakerPipeline(
                speaker_id,
                settings,
                apm_factory=self._new_apm,
                vad_factory=self._new_vad,
                apm_provider=settings.apm_provider,
                clock=self._clock,
                emit=self._emit,
            )
        except OpenabError as exc:  # ProviderUnavailable after a successful start-up: report, retry
            speaker.retry_at = now + _RETRY_S
            self._emit(
                AudioProcessingError(
                    at=now,
                    speaker_id=speaker_id,
                    component="pipeline",
                    provider=settings.apm_provider,
                    code=exc.code,
                    message=exc.message[:300],
                    recovered=False,
                    generation=0,
                )
            )
            return None
        for chunk in render_recent:
            pipeline.add_render(chunk)
        reasons = self.degraded_reasons
        self._emit(
            AudioPipelineStarted(
                at=now,
                speaker_id=speaker_id,
                apm_provider=self.apm_capabilities.name,
                vad_provider=self.vad_capabilities.name,
                degraded=bool(reasons),
                degraded_reasons=reasons,
            )
        )
        return pipeline

    def stop(self, speaker: Speaker, reason: str) -> ProcessedFrame | None:
        """Close the speaker's pipeline; returns the frame that ends its speech in progress, if any."""
        pipeline, speaker.pipeline = speaker.pipeline, None
        speaker.ring.clear()
        if pipeline is None:
            return None
        end = pipeline.close(reason)
        self._emit(
            AudioPipelineStopped(
                at=self._clock.monotonic(),
                speaker_id=pipeline.speaker_id,
                reason=reason,
                frames=pipeline.frames,
            )
        )
        return end
