"""One speaker's front-end pipeline: resample -> APM (with the shared render reference) -> VAD -> gate.

Input: the receiver's decoded frames (48 kHz stereo, 20 ms). Output: one :class:`ProcessedFrame` per
input frame (internal-rate mono, speech flags) for STT, plus events: ``speech_start`` /
``speech_end`` (only for onsets the echo gate accepted), ``echo_gate_decision``,
``audio_reference_drift`` / ``audio_reference_realigned``, ``audio_processing_error``.

Everything here is synchronous and single-threaded per pipeline; the :class:`~.frontend.FrontEnd`
decides on which thread it runs and how events reach the bus.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable

import numpy as np

from openab_voice.audio.apm import ApmStage
from openab_voice.audio.coupling import EchoCoupling
from openab_voice.audio.drift import DriftMonitor
from openab_voice.audio.echo_gate import EchoGate, GateVerdict
from openab_voice.audio.events import (
    AudioProcessingError,
    CapturePaused,
    EchoCouplingDetected,
    EchoGateDecision,
    SpeechEnded,
    SpeechStarted,
)
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.audio.render import RenderAligner
from openab_voice.audio.resample import Chunk, Chunker, Resampler
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.audio.vad import VadEdge, VadStage, VadTransition
from openab_voice.bus.events import Event
from openab_voice.clock import Clock, perf_ns
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.providers.apm import AudioProcessor
from openab_voice.providers.vad import VoiceActivityDetector


class StageTimings:
    """Recent per-call wall times (``clock.perf_ns``) of each stage, bounded."""

    def __init__(self, keep: int = 4096) -> None:
        self._keep = keep
        self._data: dict[str, collections.deque[int]] = {}

    def record(self, stage: str, ns: int) -> None:
        self._data.setdefault(stage, collections.deque(maxlen=self._keep)).append(ns)

    def samples_us(self, stage: str) -> list[float]:
        return [ns / 1000.0 for ns in self._data.get(stage, ())]

    def percentile_us(self, stage: str, q: float) -> float | None:
        """The ``q``-th percentile in microseconds, or None without samples."""
        data = self._data.get(stage)
        return float(np.percentile(np.fromiter(data, dtype=np.int64), q)) / 1000.0 if data else None


class SpeakerPipeline:
    """The per-speaker chain; created by the :class:`~.frontend.FrontEnd` on a speaker's first frame.

    Args:
        speaker_id: Discord user id.
        settings: front-end settings.
        apm_factory / vad_factory: build fresh provider instances (also used for recovery).
        apm_provider: the APM's registry name (for events).
        clock: injected clock (event times, idle detection).
        emit: event sink (the front end routes it to the bus and adds the session id).
    """

    def __init__(
        self,
        speaker_id: str,
        settings: FrontEndSettings,
        *,
        apm_factory: Callable[[], AudioProcessor],
        vad_factory: Callable[[], VoiceActivityDetector],
        apm_provider: str,
        clock: Clock,
        emit: Callable[[Event], None],
    ) -> None:
        rate = settings.internal_rate
        self.speaker_id = speaker_id
        self.settings = settings
        self._clock = clock
        self._emit = emit
        self.chunk_s = 0.01
        self._resampler = Resampler(rate)
        self._chunker = Chunker(rate // 100, rate)
        self.apm = ApmStage(
            apm_factory,
            provider=apm_provider,
            sample_rate=rate,
            speaker_id=speaker_id,
            reconverge_s=settings.apm_reconverge_ms / 1000.0,
            clock=clock,
            emit=emit,
        )
        self.vad = VadStage(vad_factory, settings, rate, on_error=self._on_vad_error)
        self.drift = DriftMonitor(
            speaker_id,
            tolerance_s=settings.drift_tolerance_ms / 1000.0,
            recovery_s=settings.drift_recovery_ms / 1000.0,
            low_confidence=settings.drift_confidence,
            clock=clock,
            emit=emit,
        )
        self.render = RenderAligner(
            chunk_s=self.chunk_s,
            tolerance_s=settings.drift_tolerance_ms / 1000.0,
            gap_s=settings.capture_gap_ms / 1000.0,
            history_s=settings.render_history_ms / 1000.0,
            drift=self.drift,
        )
        self.gate = EchoGate(settings, chunk_samples=rate // 100, rate=rate)
        self.coupling = EchoCoupling(
            chunk_samples=rate // 100, rate=rate, always=settings.aec_reference == "always"
        )
        self.timings = StageTimings()
        self.frames = 0
        self.user_speech = False
        self._gate_pending = False
        self._speech_start: float | None = None
        self._speech_end: float | None = None  # set when user speech ends, taken by the next output
        self._last_capture_end: float | None = None
        self._pause_reported = False  # CapturePaused sent for the gap since the last frame
        self._transmission_ended = False  # the last frame received was the client's silence trailer
        self._last_input: AudioFrame | None = None  # the last frame processed, received or filled

    @property
    def degraded(self) -> bool:
        return self.apm.degraded

    def add_render(self, chunk: Chunk) -> None:
        """Queue one internal-format 10 ms render chunk (the front end fans the same chunk out)."""
        self.render.add(chunk)

    def process(self, frame: AudioFrame) -> ProcessedFrame | None:
        """Run one received capture frame through the chain; None until the resampler has primed.

        A frame for time already filled with silence (a new transmission that began within it) is
        moved to the end of the fill: its audio is kept whole, a few milliseconds later.
        """
        self._pause_reported = False
        self._transmission_ended = frame.end_of_transmission
        last = self._last_input
        if last is not None and last.concealed and frame.timestamp < last.timestamp + last.duration:
            frame = dataclasses.replace(frame, timestamp=last.timestamp + last.duration)
        return self._process(frame)

    def _process(self, frame: AudioFrame) -> ProcessedFrame | None:
        self._last_input = frame
        started = perf_ns()
        mono = self._resampler.process(frame)
        end_time = frame.timestamp + frame.duration - self._resampler.delay_s
        chunks = self._chunker.push(mono, end_time)
        self.timings.record("resample", perf_ns() - started)
        self._last_capture_end = end_time
        self.frames += 1
        if not chunks:
            return None
        outputs = []
        apm_ok = True
        for chunk in chunks:
            take = self.render.take(chunk.timestamp)
            if self.coupling.observe(chunk.samples, take.chunk):
                self._coupled(chunk.timestamp)
            # Only a speaker whose microphone carries the bot gets the reference: AEC3 fed a render
            # that is not in the capture suppresses the person talking over the bot.
            render = take.chunk.samples if take.chunk is not None and self.coupling.coupled else None
            t0 = perf_ns()
            processed, ok = self.apm.process(chunk.samples, render, chunk.timestamp)
            t1 = perf_ns()
            self.timings.record("apm", t1 - t0)
            apm_ok = apm_ok and ok
            self.gate.observe(chunk.samples, processed, take.chunk)
            windows, transitions = self.vad.push(processed, chunk.timestamp)
            if windows:
                self.timings.record("vad", perf_ns() - t1)
            for transition in transitions:
                self._on_transition(transition)
            if windows and self._gate_pending and self.vad.in_speech:
                self._evaluate(windows[-1].audio_time, initial=False)
            outputs.append(processed)
        pcm = np.concatenate(outputs) if len(outputs) > 1 else outputs[0]
        speech_end, self._speech_end = self._speech_end, None
        return ProcessedFrame(
            frame=AudioFrame(
                pcm=pcm.tobytes(),
                sample_rate=self.settings.internal_rate,
                channels=1,
                timestamp=chunks[0].timestamp,
                frame_id=frame.frame_id,
                speaker_id=self.speaker_id,
                concealed=frame.concealed,
            ),
            speech=self.vad.in_speech,
            user_speech=self.user_speech,
            speech_probability=self.vad.probability,
            bot_speaking=self.gate.bot_speaking,
            apm_ok=apm_ok,
            degraded=self.apm.degraded or self.apm.reconverging(chunks[-1].timestamp),
            speech_end=speech_end,
        )

    def check_idle(self, now: float) -> list[ProcessedFrame]:
        """Judge a capture gap inside speech at ``now`` (the receiver's watermark: every packet from
        before it was pushed); returns the frames of silence it filled in.

        Discord sends nothing while someone is silent. A client that stops transmitting first sends
        five Opus silence frames (``end_of_transmission``): after those, the time no packet covers
        *is* silence, and is processed as silence up to ``now``, so the VAD ends the speech by its
        own rule (a minimum silence after the quiet began, which may be before the packets stopped)
        and speculation sees the pause as any other. Without that trailer nothing is invented (a
        packet may only be late): after ``capture_gap_ms`` without a packet :class:`CapturePaused`
        says so once (a hint for speculation), and after the minimum silence without one the speech
        ends (``capture_stopped``), where the VAD's quiet run began, or else where the capture ended.
        """
        captured_to = self._last_capture_end  # on the VAD's (resampled) timeline
        if captured_to is None or not self.vad.in_speech:
            return []
        filled = self._fill_silence(now) if self._transmission_ended else []
        if not self.vad.in_speech:
            return filled
        gap = now - captured_to
        if self.user_speech and not self._pause_reported and gap >= self.settings.capture_gap_ms / 1000.0:
            self._pause_reported = True
            self._emit(
                CapturePaused(at=self._clock.monotonic(), speaker_id=self.speaker_id, audio_time=captured_to)
            )
        if gap >= self.settings.vad_min_silence_ms / 1000.0:
            transition = self.vad.force_end()
            self.vad.reset()
            if transition is not None:
                end = min(transition.audio_time, captured_to)
                self._on_transition(VadTransition(VadEdge.END, end, 0.0), "capture_stopped")
        return filled

    def _fill_silence(self, now: float) -> list[ProcessedFrame]:
        """Silence frames after the client's end-of-transmission trailer, up to ``now``, while the
        speech lasts (a minimum silence at most)."""
        last = self._last_input
        assert last is not None
        limit = last.timestamp + self.settings.vad_min_silence_ms / 1000.0
        out: list[ProcessedFrame] = []
        while self.vad.in_speech:
            start = last.timestamp + last.duration
            if start + last.duration > now + 1e-9 or start >= limit:
                break
            last = dataclasses.replace(last, pcm=bytes(len(last.pcm)), timestamp=start, concealed=True)
            processed = self._process(last)
            if processed is not None:
                out.append(processed)
        return out

    def close(self, reason: str = "closed") -> ProcessedFrame | None:
        """End any speech in progress and release the providers (idempotent).

        Returns:
            When user speech was in progress, the frame that ends it in the processed stream, in
            order with the frames before it: 10 ms of silence (``concealed``) right after the last
            capture, ``user_speech`` False and ``speech_end`` set, so a consumer ends the utterance
            exactly there instead of waiting for a ``SpeechEnded`` that races later frames (a
            voice connection's gap: the speaker's next frames come from a new pipeline). None
            otherwise.
        """
        transition = self.vad.force_end()
        if transition is not None:
            self._on_transition(transition, reason)
        self.apm.close()
        self.vad.close()
        self._resampler.reset()  # frees the native soxr stream now, not whenever this object is collected
        speech_end, self._speech_end = self._speech_end, None
        last = self._last_input
        if speech_end is None or last is None:
            return None
        rate = self.settings.internal_rate
        return ProcessedFrame(
            frame=AudioFrame(
                pcm=bytes(2 * (rate // 100)),
                sample_rate=rate,
                channels=1,
                timestamp=self._last_capture_end if self._last_capture_end is not None else speech_end,
                frame_id=last.frame_id,
                speaker_id=self.speaker_id,
                concealed=True,
            ),
            speech=False,
            user_speech=False,
            speech_probability=0.0,
            bot_speaking=self.gate.bot_speaking,
            apm_ok=True,
            degraded=False,
            speech_end=speech_end,
        )

    def _on_transition(self, transition: VadTransition, reason: str = "silence") -> None:
        if transition.edge is VadEdge.START:
            self._gate_pending = True
            self._evaluate(transition.audio_time, initial=True, probability=transition.probability)
            return
        self._gate_pending = False
        if not self.user_speech:
            return
        self.user_speech = False
        self._speech_end = transition.audio_time
        started = self._speech_start if self._speech_start is not None else transition.audio_time
        self._emit(
            SpeechEnded(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                audio_time=transition.audio_time,
                started_audio_time=started,
                duration_s=round(max(0.0, transition.audio_time - started), 3),
                reason=reason,
            )
        )

    def _evaluate(self, audio_time: float, *, initial: bool, probability: float | None = None) -> None:
        t0 = perf_ns()
        confidence = self.drift.confidence
        if self.apm.reconverging(audio_time):
            confidence *= self.settings.drift_confidence
        verdict = self.gate.evaluate(
            confidence=confidence,
            echo_cancelling=self.apm.capabilities.echo_cancellation and not self.apm.degraded,
            coupled=self.coupling.coupled,
            echo_suspected=self.coupling.suspected,
        )
        self.timings.record("gate", perf_ns() - t0)
        if verdict.reason == "render_correlated":
            self.coupling.note_echo()
        if not initial and not verdict.accepted:
            return  # re-evaluations of a rejected onset are only reported when they flip
        self._emit_decision(verdict, audio_time)
        if not verdict.accepted:
            return
        self._gate_pending = False
        self.user_speech = True
        self._speech_start = audio_time
        self._emit(
            SpeechStarted(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                audio_time=audio_time,
                probability=round(probability if probability is not None else self.vad.probability, 3),
                during_playback=verdict.bot_speaking,
                confidence=verdict.confidence,
            )
        )

    def _coupled(self, audio_time: float) -> None:
        if self.coupling.new_paths:  # coupled before, now on a shorter echo path: AEC3 starts afresh
            self.apm.restart(audio_time)
        self._emit(
            EchoCouplingDetected(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                correlation=self.coupling.last_correlation,
                raw_dbfs=self.coupling.raw_dbfs,
            )
        )

    def _emit_decision(self, verdict: GateVerdict, audio_time: float) -> None:
        self._emit(
            EchoGateDecision(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                audio_time=audio_time,
                accepted=verdict.accepted,
                reason=verdict.reason,
                bot_speaking=verdict.bot_speaking,
                confidence=verdict.confidence,
                raw_dbfs=verdict.raw_dbfs,
                residual_dbfs=verdict.residual_dbfs,
                render_dbfs=verdict.render_dbfs,
                suppression_db=verdict.suppression_db,
                render_correlation=verdict.render_correlation,
                raw_correlation=round(verdict.evidence.raw_correlation, 3),
                echo_cancelling=verdict.evidence.echo_cancelling,
                coupled=verdict.evidence.coupled,
                echo_suspected=verdict.evidence.echo_suspected,
                reference_aligned=self.drift.aligned,
                apm_degraded=self.apm.degraded or self.apm.reconverging(audio_time),
            )
        )

    def _on_vad_error(self, exc: Exception) -> None:
        self._emit(
            AudioProcessingError(
                at=self._clock.monotonic(),
                speaker_id=self.speaker_id,
                component="vad",
                provider=self.vad.provider,
                code=exc.code if isinstance(exc, OpenabError) else ErrorCode.AUDIO_VAD_RUNTIME_ERROR,
                message=f"{type(exc).__name__}: {exc}"[:300],
                recovered=True,
                generation=self.vad.generation,
            )
        )
