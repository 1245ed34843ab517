"""The APM stage of one speaker's pipeline: format guard, render/capture pairing, runtime recovery.

A provider failing at run time (livekit raises ``RuntimeError`` from its FFI) must not take the
speaker's pipeline down, and must not leak unprocessed audio downstream either: unprocessed capture
still contains the bot's echo and would reach VAD and STT as "user speech". So the failed chunk is
replaced by silence, an ``audio_processing_error`` event is emitted, and a fresh instance is built
(its AEC starts unconverged, so the stage reports ``reconverging`` for a while and the echo gate
lowers its confidence). If even a fresh instance cannot be built, the stage keeps outputting silence
and retries once per second of audio: never a silent pass-through.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from openab_voice.audio.events import AudioProcessingError
from openab_voice.audio.resample import Samples, check_apm_format
from openab_voice.bus.events import Event
from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.providers.apm import ApmCapabilities, AudioProcessor

_RETRY_S = 1.0


class ApmStage:
    """Runs one :class:`~openab_voice.providers.apm.AudioProcessor` with recovery.

    Args:
        factory: builds a fresh processor (the registry's factory bound to the config).
        provider: registry name (for events).
        sample_rate: internal rate; chunks are exactly 10 ms of it.
        speaker_id: whose capture.
        reconverge_s: how long a fresh instance counts as re-converging.
        clock: injected clock (event time).
        emit: event sink.
    """

    def __init__(
        self,
        factory: Callable[[], AudioProcessor],
        *,
        provider: str,
        sample_rate: int,
        speaker_id: str,
        reconverge_s: float,
        clock: Clock,
        emit: Callable[[Event], None],
    ) -> None:
        self._factory = factory
        self.provider = provider
        self.sample_rate = sample_rate
        self.chunk_samples = sample_rate // 100
        self.speaker_id = speaker_id
        self._reconverge_s = reconverge_s
        self._clock = clock
        self._emit = emit
        self._silence = bytes(self.chunk_samples * 2)
        self._apm: AudioProcessor | None = factory()
        self.capabilities: ApmCapabilities = self._apm.capabilities
        self.generation = 1
        self.errors = 0
        self._reconverging_until: float | None = None
        self._retry_at: float | None = None

    @property
    def degraded(self) -> bool:
        """The provider does not clean audio (``disabled``) or no instance is running."""
        return self.capabilities.degraded or self._apm is None

    def reconverging(self, audio_time: float) -> bool:
        """True while a replacement instance's AEC is still converging, or none is running."""
        if self._apm is None:
            return True
        return self._reconverging_until is not None and audio_time < self._reconverging_until

    def process(self, capture: Samples, render: Samples | None, audio_time: float) -> tuple[Samples, bool]:
        """Process one 10 ms chunk; ``render`` None means the bot played nothing then.

        Returns:
            The processed chunk and whether the APM really processed it (False: silence substituted).

        Raises:
            AudioError: ``AUDIO_APM_FORMAT_MISMATCH`` when capture or render is not a mono 10 ms chunk
                at the internal rate (a wiring bug, not a runtime failure).
        """
        render_len = self.chunk_samples if render is None else render.size
        if capture.ndim != 1 or capture.size != self.chunk_samples or render_len != self.chunk_samples:
            check_apm_format(
                capture_rate=self.sample_rate,
                capture_channels=capture.shape[1] if capture.ndim == 2 else 1,
                capture_samples=capture.shape[0],
                render_rate=self.sample_rate,
                render_channels=render.shape[1] if render is not None and render.ndim == 2 else 1,
                render_samples=render_len if render is None else render.shape[0],
                apm_rate=self.sample_rate,
            )
        apm = self._apm if self._apm is not None else self._retry(audio_time)
        if apm is None:
            return np.zeros(self.chunk_samples, dtype=np.int16), False
        try:
            apm.process_render(self._silence if render is None else render.tobytes())
            out = apm.process_capture(capture.tobytes())
        except Exception as exc:  # any library failure: recover, never pass raw audio on
            self._recover(exc, audio_time)
            return np.zeros(self.chunk_samples, dtype=np.int16), False
        return np.frombuffer(out, dtype=np.int16), True

    def restart(self, audio_time: float) -> None:
        """Replace the instance with a fresh one now: the echo path moved where this AEC cannot
        follow it quickly (:mod:`~openab_voice.audio.coupling`); a fresh AEC3 converges faster than
        an aligned one re-aligns. Re-converging from ``audio_time``, as after a failure."""
        old, self._apm = self._apm, None
        if old is not None:
            with contextlib.suppress(Exception):  # a close that fails leaves nothing to keep
                old.close()
        self._retry_at = None
        self._retry(audio_time)

    def close(self) -> None:
        """Release the processor (idempotent)."""
        apm, self._apm = self._apm, None
        if apm is not None:
            apm.close()

    def _recover(self, exc: Exception, audio_time: float) -> None:
        self.errors += 1
        failed, self._apm = self._apm, None
        if failed is not None:
            # The instance is already broken; its close failing too changes nothing.
            with contextlib.suppress(Exception):
                failed.close()
        self._retry_at = audio_time
        recovered = self._retry(audio_time) is not None
        code = exc.code if isinstance(exc, OpenabError) else ErrorCode.AUDIO_APM_RUNTIME_ERROR
        self._emit(
            AudioProcessingError(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                component="apm",
                provider=self.provider,
                code=code,
                message=f"{type(exc).__name__}: {exc}"[:300],
                recovered=recovered,
                generation=self.generation,
            )
        )

    def _retry(self, audio_time: float) -> AudioProcessor | None:
        if self._retry_at is not None and audio_time < self._retry_at:
            return None
        try:
            apm = self._factory()
        except Exception:
            self._retry_at = audio_time + _RETRY_S
            return None
        self._apm = apm
        self._retry_at = None
        self.generation += 1
        self._reconverging_until = audio_time + self._reconverge_s
        return apm
