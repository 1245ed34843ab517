"""The re-decode :class:`~openab_voice.stt.recognize.RecognizeStream`: a batch provider made to stream.

:class:`RedecodeRecognizer` wraps a :class:`~openab_voice.stt.base.SpeechToText` that decodes
a whole buffer at a time (faster-whisper); each :class:`RedecodeStream` runs the scheduling core
(:class:`~openab_voice.stt.redecode.RedecodeCore`: when to decode partials, speculative finals and
finals) on asyncio, with the decodes on its own threads below the audio plane's priority (ADR 0006),
and yields the core's events in order.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import Event
from openab_voice.clock import Clock, perf_ns
from openab_voice.errors import ConfigError
from openab_voice.priority import audio_boost_available, lower_current_thread
from openab_voice.providers.turn import TurnDetector
from openab_voice.stt.base import Hypothesis, SpeechToText
from openab_voice.stt.endpointing import EndOfTurnSettings, EndOfTurnStage, TurnCheck
from openab_voice.stt.recognize import RecognitionEvent
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.utterances import DecodeJob, TranscriberSettings
from openab_voice.tasks import TaskOwner

__all__ = ["RedecodeRecognizer", "RedecodeStream", "StreamPhase"]

log = logging.getLogger(__name__)


class StreamPhase(enum.Enum):
    """Where a :class:`RedecodeStream` is in its life (it only moves forward)."""

    OPEN = "open"  # frames and hints accepted
    ENDING = "ending"  # end_input(): the open utterances get their finals, nothing new comes in
    CLOSING = "closing"  # aclose(): decodes in flight are waited for (bounded), the rest discarded
    DONE = "done"  # the end of the iteration is queued: nothing more will be yielded


class RedecodeRecognizer:
    """Streams from a batch provider by decoding each utterance again as it grows.

    Args:
        stt: the provider (its owner closes it, not the streams).
        clock: injected clock (event times and latency).
        settings: the scheduling tunables.
        turn_detector: judges pauses (:mod:`openab_voice.stt.endpointing`); None: a turn ends on
            the VAD's silence alone. Shared by every stream; its owner closes it.
        turns: the end-of-turn tunables (with a detector).

    Raises:
        ConfigError: the detector scores audio at another rate than the provider decodes.
    """

    def __init__(
        self,
        stt: SpeechToText,
        *,
        clock: Clock,
        settings: TranscriberSettings | None = None,
        turn_detector: TurnDetector | None = None,
        turns: EndOfTurnSettings | None = None,
    ) -> None:
        self._stt = stt
        self._clock = clock
        self.settings = settings or TranscriberSettings()
        self._detector = turn_detector
        self._turns = turns or EndOfTurnSettings()
        if (
            turn_detector is not None
            and turn_detector.capabilities.sample_rate != stt.capabilities.sample_rate
        ):
            raise ConfigError(
                f"the end-of-turn detector scores {turn_detector.capabilities.sample_rate} Hz audio, the "
                f"speech-to-text provider decodes {stt.capabilities.sample_rate} Hz",
                setting="end_of_turn",
            )

    @property
    def sample_rate(self) -> int:
        return self._stt.capabilities.sample_rate

    def stream(self, *, session_id: str | None = None) -> RedecodeStream:
        stage = None
        if self._detector is not None:
            window = self._detector.capabilities.max_seconds
            stage = EndOfTurnStage(self._turns, rate=self.sample_rate, window_s=window)
        return RedecodeStream(
            self._stt,
            clock=self._clock,
            settings=self.settings,
            session_id=session_id,
            turn_detector=self._detector,
            turns=stage,
        )


class RedecodeStream:
    """One session's re-decode stream (see :class:`~openab_voice.stt.recognize.RecognizeStream`)."""

    def __init__(
        self,
        stt: SpeechToText,
        *,
        clock: Clock,
        settings: TranscriberSettings,
        session_id: str | None = None,
        turn_detector: TurnDetector | None = None,
        turns: EndOfTurnStage | None = None,
    ) -> None:
        if (turn_detector is None) != (turns is None):
            raise ValueError("an end-of-turn stage needs its detector, and a detector its stage")
        self._stt = stt
        self._detector = turn_detector
        self.settings = settings
        self._events: asyncio.Queue[RecognitionEvent | None] = asyncio.Queue()
        self.core = RedecodeCore(
            stt.capabilities,
            emit=self._emit,
            clock=clock,
            settings=settings,
            session_id=session_id,
            turns=turns,
        )
        self._executor: ThreadPoolExecutor | None = None
        self._turn_executor: ThreadPoolExecutor | None = None
        self._clock = clock
        self._hold_timer: asyncio.Task[None] | None = None  # ends held utterances whose pause ran out
        self._tasks = TaskOwner("re-decode stream", clock=clock)
        self.phase = StreamPhase.OPEN

    # --- input ------------------------------------------------------------------------------------

    def push_frame(self, frame: ProcessedFrame) -> None:
        if self.phase is StreamPhase.OPEN:
            self._start(self.core.push(frame))

    def pause(self, speaker_id: str, audio_time: float) -> None:
        if self.phase is StreamPhase.OPEN:
            self._start(self.core.pause(speaker_id, audio_time))

    def flush(self, speaker_id: str | None = None, audio_time: float | None = None) -> None:
        if (speaker_id is None) != (audio_time is None):
            raise ValueError("flush takes a speaker and the time their speech ended, or neither")
        if self.phase is not StreamPhase.OPEN:
            return
        if speaker_id is None or audio_time is None:
            self._start(self.core.flush())
        else:
            self._start(self.core.end_speech(speaker_id, audio_time))

    def end_input(self) -> None:
        if self.phase is not StreamPhase.OPEN:
            return
        self._start(self.core.flush())
        self.phase = StreamPhase.ENDING
        if self._hold_timer is not None:
            self._hold_timer.cancel()  # the flush ended every held utterance
        self._maybe_finish()

    def remove_speaker(self, speaker_id: str) -> None:
        self.core.remove_speaker(speaker_id)

    # --- output -----------------------------------------------------------------------------------

    def __aiter__(self) -> RedecodeStream:
        return self

    async def __anext__(self) -> RecognitionEvent:
        event = await self._events.get()
        if event is None:
            self._events.put_nowait(None)  # every later call ends too
            raise StopAsyncIteration
        return event

    def _emit(self, event: Event) -> None:
        self._events.put_nowait(event)  # type: ignore[arg-type]  # the core emits only RecognitionEvents

    def _maybe_finish(self) -> None:
        if self.phase is StreamPhase.ENDING and not self._tasks:
            self._done()

    async def aclose(self) -> None:
        """Stop: wait (bounded) for decodes in flight, discard what got no final (idempotent)."""
        if self.phase in (StreamPhase.CLOSING, StreamPhase.DONE):
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            return
        self.phase = StreamPhase.CLOSING
        self.core.closed = True
        if self._hold_timer is not None:
            self._hold_timer.cancel()
        await self._tasks.aclose(grace_s=self.settings.close_timeout_s)  # on the injected clock
        self.core.discard_open("closed")
        for executor in (self._executor, self._turn_executor):
            if executor is not None:
                executor.shutdown(wait=False)  # a model run still going finishes on its own
        self._done()  # after the discards: they are the stream's last events

    def _done(self) -> None:
        self.phase = StreamPhase.DONE
        self._events.put_nowait(None)

    # --- decodes ----------------------------------------------------------------------------------

    def _start(self, jobs: list[DecodeJob]) -> None:
        for check in self.core.take_turn_checks():
            self._spawn(self._judge(check), f"turn-{check.utterance_id}")
        if self._detector is not None and self._hold_timer is None and self.core.hold_deadline() is not None:
            self._hold_timer = self._spawn(self._expire_holds(), "turn-hold")
        if self.core.batching and jobs:
            self.core.batch_running = True
            self._spawn(self._decode_batch(jobs), f"stt-batch-{len(jobs)}")
            return
        for job in jobs:
            self._spawn(self._decode(job), f"stt-{job.utterance_id}")

    async def _expire_holds(self) -> None:
        """While an utterance is held past the VAD's end, end it when its pause runs out even if no
        frame comes (a Discord client sends nothing in silence)."""
        try:
            while (deadline := self.core.hold_deadline()) is not None and not self.core.closed:
                await self._clock.sleep(max(0.0, deadline - self._clock.monotonic()))
                self._start(self.core.expire_holds(self._clock.monotonic()))
        finally:
            self._hold_timer = None

    async def _judge(self, check: TurnCheck) -> None:
        """One pause through the end-of-turn detector, on its own thread (a decode in flight does
        not hold it back), below the audio plane like the decodes."""
        assert self._detector is not None
        if self._turn_executor is None:
            self._turn_executor = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="turn-detect",
                initializer=None if audio_boost_available() else lower_current_thread,
            )
        began = perf_ns()
        result: float | BaseException
        try:
            score = functools.partial(self._detector.completion_probability, check.samples)
            result = await asyncio.get_running_loop().run_in_executor(self._turn_executor, score)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # no verdict: the VAD's end of speech decides (TurnDecided says so)
            log.warning("end-of-turn detector failed: %s", exc)
            result = exc
        self._start(self.core.turn_judged(check, result, (perf_ns() - began) / 1e6))

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(work, name=name, on_done=lambda _task: self._maybe_finish())

    async def _decode_batch(self, jobs: list[DecodeJob]) -> None:
        """One batch: every decode in it applied, then what falls due scheduled once."""
        results: list[Hypothesis | BaseException]
        try:
            results = list(
                await asyncio.get_running_loop().run_in_executor(self._decoder(), self._run_batch, jobs)
            )
        except asyncio.CancelledError:
            self.core.batch_running = False
            for job in jobs:
                self.core.release(job)
            raise
        except Exception as exc:  # the provider failed the whole batch: each decode reports it
            results = [exc] * len(jobs)
        self.core.batch_running = False
        self._start(self.core.complete_all(list(zip(jobs, results, strict=True))))

    async def _decode(self, job: DecodeJob) -> None:
        result: Hypothesis | BaseException
        try:
            decode = functools.partial(self._stt.transcribe, job.samples, final=job.final, quick=job.quick)
            result = await asyncio.get_running_loop().run_in_executor(self._decoder(), decode)
        except asyncio.CancelledError:
            self.core.release(job)  # closing: the thread finishes on its own and its result is dropped
            raise
        except Exception as exc:  # a provider failure is reported as an event, never fatal
            result = exc
        self._start(self.core.complete(job, result))

    def _run_batch(self, jobs: list[DecodeJob]) -> list[Hypothesis | Exception]:
        """Decode thread: one decode alone as usual, several in one batch."""
        if len(jobs) == 1:
            try:
                return [self._stt.transcribe(jobs[0].samples, final=jobs[0].final, quick=jobs[0].quick)]
            except Exception as exc:
                return [exc]
        return self._stt.transcribe_batch([(job.samples, job.final, job.quick) for job in jobs])

    def _decoder(self) -> ThreadPoolExecutor:
        """The decode threads (created on first use), below the audio plane: at normal priority where
        the audio threads could be raised, else lowered themselves (openab_voice/priority.py)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.settings.max_concurrent_decodes,
                thread_name_prefix="stt-decode",
                initializer=None if audio_boost_available() else lower_current_thread,
            )
        return self._executor
