"""Streaming transcription per speaker: utterances, partial decodes, a stability filter, finals.

An utterance starts on the first processed frame whose ``user_speech`` is True (with ``pre_roll_ms``
of the audio before it, which holds the onset the VAD needed time to confirm), grows while the
speaker talks and ends on the first frame where ``user_speech`` is False: the front end's VAD has
already waited its minimum silence. Audio is never dropped because the bot is speaking: whether an
utterance interrupts is the engine's decision.

While an utterance grows, every ``partial_interval_ms`` of new audio (``initial_partial_interval_ms``
until something is stable) the whole utterance so far is decoded again and published as a
``TranscriptPartial(stable=False)``; the longest common word prefix of the last
``stable_agreement`` hypotheses is published as ``TranscriptPartial(stable=True)`` whenever it grows
(a stable prefix is never retracted). At the end a final decode yields exactly one
``TranscriptFinal`` or ``TranscriptDiscarded`` (empty, punctuation only, no speech, low confidence,
a failed decode), so nothing downstream ever sees unusable text.

Decodes are CPU-bound: they run on the transcriber's own decode threads (below the audio plane's
priority: ADR 0006), at most one per speaker and ``max_concurrent_decodes`` in total
(the machine has 2 cores and CTranslate2 uses both). Finals go first; partials are "latest audio
wins", never queued up. With a provider that decodes in batches and ``max_batch`` > 1 (opt-in:
ADR 0012), everything due at once (several people talking) goes out as one batch, one batch in
flight: ten utterances then cost the decoder about a third of their sequential time.

Overload (more talkers than the CPU transcribes in real time) degrades in a fixed order: partials
are shed first (while a final waits for a slot, every partial that falls due is skipped and
counted), finals queue (oldest end of speech first) and are never dropped or cut short because
processing fell behind; an utterance ends only where the front end's VAD ended the speech. A
:class:`~openab_voice.engine.events.TranscriptionBacklog` reports when finals pile up (two or more
waiting, or partials shed), at most once a second while it lasts, and when it clears.

The scheduling core is synchronous (:meth:`Transcriber.push`, :meth:`Transcriber.complete`): it
returns the :class:`DecodeJob` s to start, so tests and the benchmark drive it on a fake timeline;
:meth:`Transcriber.run` is the asyncio driver over a ``FrontEnd.subscribe()`` stream.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import AsyncIterable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from openab_voice.audio.events import CapturePaused, SpeechEnded
from openab_voice.audio.pipeline import ProcessedFrame
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.engine.events import (
    LatencyMeasured,
    SpeculationWithdrawn,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.engine.stability import StabilityFilter, normalize_words
from openab_voice.engine.utterances import DecodeJob, SpeakerState, TranscriberSettings, Utterance
from openab_voice.errors import AudioError, OpenabError
from openab_voice.priority import audio_boost_available, lower_current_thread
from openab_voice.providers.speech import Hypothesis, SpeechToText

log = logging.getLogger(__name__)

_END_TOLERANCE_S = 0.025  # frame timestamps vs the VAD's end time: resampler and chunking offsets
_BACKLOG_REPORT_S = 1.0  # a lasting backlog is reported at most this often
_EMPTY: npt.NDArray[np.int16] = np.zeros(0, dtype=np.int16)


class Transcriber:
    """Per-speaker streaming transcription on a :class:`~openab_voice.providers.speech.SpeechToText`.

    Args:
        stt: the provider; partial decodes only when ``stt.capabilities.streaming``.
        bus: where transcript, latency and error events go.
        clock: injected clock (event times and latency).
        settings: tunables.
        session_id: stamped on every event.
    """

    def __init__(
        self,
        stt: SpeechToText,
        *,
        bus: EventBus,
        clock: Clock,
        settings: TranscriberSettings | None = None,
        session_id: str | None = None,
    ) -> None:
        self._stt = stt
        self._bus = bus
        self._clock = clock
        self.settings = settings or TranscriberSettings()
        self._session = session_id
        self._rate = stt.capabilities.sample_rate
        self._streaming = stt.capabilities.streaming
        self._speakers: dict[str, SpeakerState] = {}
        self._ids = itertools.count(1)
        self._in_flight = 0
        self.partials_shed = 0
        self._shed_reported = 0
        self._backlog_at: float | None = None  # last TranscriptionBacklog while backlogged, else None
        self._batching = stt.capabilities.batch and self.settings.max_batch > 1
        self._batch_running = False
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._closed = False

    # --- synchronous core -----------------------------------------------------------------------

    def push(self, frame: ProcessedFrame) -> list[DecodeJob]:
        """Take one processed frame; returns the decodes to start now.

        Raises:
            AudioError: the frame is not mono at the provider's sample rate.
        """
        audio = frame.frame
        if audio.sample_rate != self._rate or audio.channels != 1 or audio.speaker_id is None:
            raise AudioError(
                f"transcriber needs mono {self._rate} Hz speaker frames, got {audio.sample_rate} Hz "
                f"x{audio.channels} from {audio.speaker_id!r}"
            )
        if self._closed:
            return []
        speaker = self._speaker(audio.speaker_id)
        if speaker.end_at is not None and audio.timestamp >= speaker.end_at - _END_TOLERANCE_S:
            self._end(speaker)  # a frame after a capture-stopped end belongs to the next utterance
        samples = audio.samples().reshape(-1)
        utt = speaker.current
        if frame.user_speech:
            if utt is None:
                utt = speaker.current = self._begin(audio.speaker_id, speaker, audio.timestamp)
            utt.chunks.append(samples)
            utt.samples += samples.size
            utt.audio_end = audio.timestamp + audio.duration
            if frame.speech_probability < self.settings.speculate_below:
                if utt.quiet_since is None:
                    utt.quiet_since = audio.timestamp
            elif utt.quiet_since is not None:
                utt.quiet_since = None  # speech again: a speculative final is stale
                self._withdraw(utt)
            reached = speaker.end_at is not None and utt.audio_end >= speaker.end_at - _END_TOLERANCE_S
            if reached or utt.samples >= self.settings.max_utterance_s * self._rate:
                self._end(speaker)  # at the length cap, the next speech frame starts a new utterance
        else:
            if utt is not None:
                # The end of speech, as the VAD placed it (a minimum silence before this frame).
                utt.audio_end = audio.timestamp if frame.speech_end is None else frame.speech_end
                self._end(speaker)
            self._keep_pre_roll(speaker, samples)
        return self._schedule()

    def end_speech(self, speaker_id: str, audio_time: float) -> list[DecodeJob]:
        """Speech ended at ``audio_time`` with no silent frame to follow (capture stopped, speaker left).

        Discord stops sending packets in silence, so the front end ends speech on a timer; the
        utterance ends as soon as the frames up to ``audio_time`` have been pushed (they may still
        be queued behind this call). Returns the decodes to start now.
        """
        speaker = self._speakers.get(speaker_id)
        if speaker is None or speaker.current is None or self._closed:
            return []
        speaker.end_at = audio_time
        if speaker.current.audio_end >= audio_time - _END_TOLERANCE_S:
            self._end(speaker)
        return self._schedule()

    def pause(self, speaker_id: str, audio_time: float) -> list[DecodeJob]:
        """No packet from the speaker since ``audio_time`` (their speech still open): if their last
        frames were already quiet they are probably done (a client sends a few silence frames, then
        nothing), so the utterance is decoded speculatively now rather than after the rest of the
        quiet stretch (its final if nothing follows). Packets only held up mid-word (jitter) start
        nothing. Returns the decodes to start now."""
        speaker = self._speakers.get(speaker_id)
        utt = speaker.current if speaker is not None else None
        if utt is None or self._closed or utt.quiet_since is None:
            return []
        if utt.audio_end < audio_time - _END_TOLERANCE_S:
            return []  # frames up to the pause are still on their way
        utt.paused_quiet = utt.quiet_since
        return self._schedule()

    def complete(self, job: DecodeJob, result: Hypothesis | BaseException) -> list[DecodeJob]:
        """Apply a finished decode (its hypothesis or the exception it raised); returns decodes to start."""
        self._apply(job, result)
        return [] if self._closed else self._schedule()

    def _apply(self, job: DecodeJob, result: Hypothesis | BaseException) -> None:
        self._release(job)
        utt = job._utterance
        if job.speculative:
            # Kept only for the quiet run it was decoded in; a failure just means no shortcut.
            if not utt.concluded and isinstance(result, Hypothesis) and utt.spec_quiet == utt.quiet_since:
                utt.spec = result
                if self._is_open(utt):
                    self._announce_speculation(utt, result)
        elif not utt.concluded:
            if isinstance(result, BaseException):
                self._failed(job, result)
            elif job.final:
                self._finish(utt, result)
            else:
                self._partial(utt, result, job.audio_end)

    def flush(self) -> list[DecodeJob]:
        """End every utterance in progress (the stream stopped); returns the final decodes to start."""
        for speaker in self._speakers.values():
            self._end(speaker)
        return self._schedule()

    def remove_speaker(self, speaker_id: str) -> None:
        """Forget a speaker: open utterances are discarded, a decode in flight is ignored."""
        speaker = self._speakers.pop(speaker_id, None)
        if speaker is not None:
            self._discard_all(speaker, "speaker_removed")

    @property
    def speakers(self) -> tuple[str, ...]:
        """Speakers with state."""
        return tuple(self._speakers)

    # --- utterance lifecycle --------------------------------------------------------------------

    def _speaker(self, speaker_id: str) -> SpeakerState:
        speaker = self._speakers.get(speaker_id)
        if speaker is None:
            speaker = self._speakers[speaker_id] = SpeakerState()
        return speaker

    def _keep_pre_roll(self, speaker: SpeakerState, samples: npt.NDArray[np.int16]) -> None:
        speaker.pre_roll.append(samples)
        speaker.pre_roll_samples += samples.size
        keep = self.settings.pre_roll_ms * self._rate // 1000
        while speaker.pre_roll and speaker.pre_roll_samples - speaker.pre_roll[0].size >= keep:
            speaker.pre_roll_samples -= speaker.pre_roll.popleft().size

    def _begin(self, speaker_id: str, speaker: SpeakerState, start: float) -> Utterance:
        keep = self.settings.pre_roll_ms * self._rate // 1000
        pre = np.concatenate(speaker.pre_roll)[-keep:] if speaker.pre_roll and keep else _EMPTY
        speaker.pre_roll.clear()
        speaker.pre_roll_samples = 0
        return Utterance(
            id=f"{speaker_id}:{next(self._ids)}",
            speaker_id=speaker_id,
            audio_start=start,
            chunks=[pre],
            samples=pre.size,
            pre_roll=pre.size,
            audio_end=start,
            stability=StabilityFilter(self.settings.stable_agreement),
        )

    def _end(self, speaker: SpeakerState) -> None:
        speaker.end_at = None
        if speaker.current is not None:
            speaker.current.ended_at = self._clock.monotonic()
            speaker.finishing.append(speaker.current)
            speaker.current = None

    def _partial(self, utt: Utterance, hyp: Hypothesis, audio_end: float) -> None:
        # No confidence floor here: the first decodes of an utterance score low even when right
        # ("Hello?" at 0.19 on 0.5 s of audio); agreement between hypotheses is the guard.
        if not normalize_words(hyp.text):
            return
        self._publish_partial(utt, hyp.text, stable=False, audio_end=audio_end)
        if not utt.stability.update(hyp.text):
            return
        self._publish_partial(utt, utt.stability.text, stable=True, audio_end=audio_end)
        if not utt.first_stable:
            utt.first_stable = True
            now = self._clock.monotonic()
            self._bus.publish(
                LatencyMeasured(
                    at=now,
                    session_id=self._session,
                    metric="first_stable_partial_ms",
                    value_ms=(now - utt.audio_start) * 1000.0,
                    speaker_id=utt.speaker_id,
                )
            )

    def _unusable(self, hyp: Hypothesis) -> str | None:
        """Why a final hypothesis cannot be published (None: it can)."""
        text, s = hyp.text.strip(), self.settings
        if not text:
            return "empty"
        if not normalize_words(text):
            return "punctuation_only"
        if hyp.no_speech_prob is not None and hyp.no_speech_prob > s.max_no_speech_prob:
            return "no_speech"
        if hyp.confidence is not None and hyp.confidence < s.min_confidence:
            return "low_confidence"
        return None

    def _is_open(self, utt: Utterance) -> bool:
        speaker = self._speakers.get(utt.speaker_id)
        return speaker is not None and speaker.current is utt

    def _announce_speculation(self, utt: Utterance, hyp: Hypothesis) -> None:
        """A usable speculative final for an utterance still open: say what its final will be."""
        if self._unusable(hyp) is not None:
            return
        utt.spec_announced = True
        self._bus.publish(
            TranscriptSpeculative(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
                text=hyp.text.strip(),
                audio_start=utt.audio_start,
                audio_end=utt.audio_end,
            )
        )

    def _withdraw(self, utt: Utterance) -> None:
        """Speech followed an announced speculation: it will not be the final."""
        if not utt.spec_announced:
            return
        utt.spec_announced = False
        self._bus.publish(
            SpeculationWithdrawn(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
            )
        )

    def _finish(self, utt: Utterance, hyp: Hypothesis) -> None:
        text = hyp.text.strip()
        reason = self._unusable(hyp)
        if reason is None:
            utt.concluded = True
            self._bus.publish(
                TranscriptFinal(
                    at=self._clock.monotonic(),
                    session_id=self._session,
                    speaker_id=utt.speaker_id,
                    utterance_id=utt.id,
                    text=text,
                    audio_start=utt.audio_start,
                    audio_end=utt.audio_end,
                    partials=utt.partials,
                    confidence=hyp.confidence,
                )
            )
            return
        self._discard(utt, reason, text)

    def _failed(self, job: DecodeJob, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, OpenabError) else "STT_DECODE_FAILED"
        log.warning("speech-to-text decode failed for %s: %r", job.utterance_id, exc)
        self._bus.publish(
            ErrorRaised(
                at=self._clock.monotonic(),
                stage="stt",
                session_id=self._session,
                code=code,
                message=f"{type(exc).__name__}: {exc}",
                retryable=True,
                details={"speaker_id": job.speaker_id, "utterance_id": job.utterance_id, "final": job.final},
            )
        )
        if job.final:
            self._discard(job._utterance, "stt_error")

    def _discard_all(self, speaker: SpeakerState, reason: str) -> None:
        for utt in (*speaker.finishing, *((speaker.current,) if speaker.current else ())):
            self._discard(utt, reason)

    def _discard(self, utt: Utterance, reason: str, text: str = "") -> None:
        if utt.concluded:
            return
        utt.concluded = True
        self._bus.publish(
            TranscriptDiscarded(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
                reason=reason,
                text=text,
            )
        )

    def _publish_partial(self, utt: Utterance, text: str, *, stable: bool, audio_end: float) -> None:
        utt.partials += 1
        self._bus.publish(
            TranscriptPartial(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
                text=text,
                stable=stable,
                audio_start=utt.audio_start,
                audio_end=audio_end,
            )
        )

    # --- scheduling -----------------------------------------------------------------------------

    def _schedule(self) -> list[DecodeJob]:
        for speaker in self._speakers.values():
            while speaker.finishing and speaker.finishing[0].speculated and not speaker.busy:
                utt = speaker.finishing.popleft()
                assert utt.spec is not None
                self._finish(utt, utt.spec)  # the speculative decode saw all the speech: it is the final
        jobs: list[DecodeJob] = []
        limit = self.settings.max_batch if self._batching else self.settings.max_concurrent_decodes
        while self._in_flight < limit and not self._batch_running:
            job = self._next_final() or self._next_speculative() or self._next_partial()
            if job is None:
                break
            self._in_flight += 1
            self._speakers[job.speaker_id].busy = True
            jobs.append(job)
        waiting = [u for sp in self._speakers.values() for u in sp.finishing if not u.speculated]
        if waiting:
            self._shed_partials()
        self._report_backlog(waiting)
        return jobs

    def _shed_partials(self) -> None:
        """Finals are waiting for a slot: every partial that is due now is skipped, not deferred."""
        if not self._streaming:
            return
        for speaker in self._speakers.values():
            utt = speaker.current
            if utt is not None and self._partial_wait(utt) is not None:
                utt.decoded_at = utt.samples - utt.pre_roll
                self.partials_shed += 1

    def _partial_wait(self, utt: Utterance) -> int | None:
        """New speech samples since the utterance's last partial, when a partial is due (else None)."""
        s = self.settings
        interval = s.partial_interval_ms if utt.first_stable else s.initial_partial_interval_ms
        waited = utt.samples - utt.pre_roll - utt.decoded_at
        return waited if waited >= interval * self._rate // 1000 else None

    def _report_backlog(self, waiting: list[Utterance]) -> None:
        now = self._clock.monotonic()
        backlogged = len(waiting) >= 2 or (bool(waiting) and self.partials_shed > self._shed_reported)
        if backlogged:
            if self._backlog_at is not None and now - self._backlog_at < _BACKLOG_REPORT_S:
                return
            self._backlog_at = now
        elif waiting or self._backlog_at is None:
            return  # not (or still) backlogged: nothing new to say
        else:
            self._backlog_at = None  # cleared
        self._shed_reported = self.partials_shed
        ended = [u.ended_at for u in waiting if u.ended_at is not None]
        self._bus.publish(
            TranscriptionBacklog(
                at=now,
                session_id=self._session,
                waiting=len(waiting),
                talking=sum(1 for sp in self._speakers.values() if sp.current is not None),
                partials_shed=self.partials_shed,
                oldest_wait_ms=round((now - min(ended)) * 1000.0, 1) if ended else 0.0,
            )
        )

    def _release(self, job: DecodeJob) -> None:
        self._in_flight -= 1
        speaker = self._speakers.get(job.speaker_id)
        if speaker is not None:
            speaker.busy = False

    def _next_final(self) -> DecodeJob | None:
        ready = [sp for sp in self._speakers.values() if sp.finishing and not sp.busy]
        if not ready:
            return None
        speaker = min(ready, key=lambda sp: sp.finishing[0].audio_end)  # oldest end of speech first
        return self._job(speaker.finishing.popleft(), final=True)

    def _next_speculative(self) -> DecodeJob | None:
        after = self.settings.speculate_after_ms / 1000.0
        if after <= 0:
            return None
        for speaker in self._speakers.values():
            utt = speaker.current
            if utt is None or speaker.busy or speaker.finishing or utt.quiet_since is None:
                continue
            due = utt.audio_end - utt.quiet_since >= after or utt.paused_quiet == utt.quiet_since
            if utt.spec_quiet != utt.quiet_since and due:
                utt.spec_quiet, utt.spec = utt.quiet_since, None
                return self._job(utt, final=True, speculative=True)
        return None

    def _next_partial(self) -> DecodeJob | None:
        if not self._streaming:
            return None
        speculating = self.settings.speculate_after_ms > 0
        best, waited_most = None, 0
        for speaker in self._speakers.values():
            utt = speaker.current
            if utt is None or speaker.busy or speaker.finishing or utt.speculated:
                continue  # a speculated pause has no new speech: its final is already decoded
            if speculating and utt.quiet_since is not None:
                # Quiet since the last speech: a partial now would decode the same words as the
                # speculative final due within ``speculate_after_ms``, and hold the decoder past
                # the moment it falls due (the answer waits on that one). Speech again, and the
                # partial is due at once.
                continue
            waited = self._partial_wait(utt)
            if waited is not None and waited > waited_most:
                best, waited_most = utt, waited  # the longest-waiting speaker first
        if best is None:
            return None
        best.decoded_at = best.samples - best.pre_roll
        return self._job(best, final=False)

    def _job(self, utt: Utterance, *, final: bool, speculative: bool = False) -> DecodeJob:
        samples = np.concatenate(utt.chunks)
        utt.chunks = [samples]  # one contiguous buffer; later frames append to it
        return DecodeJob(
            speaker_id=utt.speaker_id,
            utterance_id=utt.id,
            samples=samples,
            final=final,
            audio_end=utt.audio_end,
            speculative=speculative,
            _utterance=utt,
        )

    # --- asyncio driver -------------------------------------------------------------------------

    async def run(self, stream: AsyncIterable[ProcessedFrame]) -> None:
        """Transcribe a processed-capture stream until it ends, then finish open utterances.

        Also follows :class:`~openab_voice.audio.events.SpeechEnded` on the bus for ends that no
        silent frame follows (Discord stops sending packets when a speaker goes quiet), and
        :class:`~openab_voice.audio.events.CapturePaused` (a speculative decode, see :meth:`pause`).
        """
        subscriptions = [
            self._bus.subscribe(SpeechEnded, self._on_speech_ended),
            self._bus.subscribe(CapturePaused, self._on_capture_paused),
        ]
        try:
            async for frame in stream:
                if self._closed:
                    return
                self._start(self.push(frame))
            self._start(self.flush())
            while self._tasks and not self._closed:
                await asyncio.wait(set(self._tasks))
        finally:
            for subscription in subscriptions:
                subscription.close()

    def start(self, stream: AsyncIterable[ProcessedFrame]) -> None:
        """Run :meth:`run` in a task owned by the transcriber (stopped by :meth:`aclose`)."""
        if self._runner is None and not self._closed:
            self._runner = asyncio.get_running_loop().create_task(self.run(stream), name="transcriber")

    def _on_speech_ended(self, event: SpeechEnded) -> None:
        if event.reason != "silence":  # after a "silence" end, a frame with user_speech False follows
            # Not from inside this bus dispatch: a speculative final would be published in it, and
            # reach later subscribers before the SpeechEnded that caused it.
            asyncio.get_running_loop().call_soon(self._end_speech_now, event.speaker_id, event.audio_time)

    def _on_capture_paused(self, event: CapturePaused) -> None:
        if not self._closed:  # decodes start from here, not from inside the bus dispatch
            asyncio.get_running_loop().call_soon(self._pause_now, event.speaker_id, event.audio_time)

    def _pause_now(self, speaker_id: str, audio_time: float) -> None:
        if not self._closed:
            self._start(self.pause(speaker_id, audio_time))

    def _end_speech_now(self, speaker_id: str, audio_time: float) -> None:
        if not self._closed:
            self._start(self.end_speech(speaker_id, audio_time))

    def _start(self, jobs: list[DecodeJob]) -> None:
        if self._batching and jobs:
            self._batch_running = True
            self._spawn(self._decode_batch(jobs), f"stt-batch-{len(jobs)}")
            return
        for job in jobs:
            self._spawn(self._decode(job), f"stt-{job.utterance_id}")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _decode_batch(self, jobs: list[DecodeJob]) -> None:
        """One batch: every decode in it applied, then what falls due scheduled once."""
        results: list[Hypothesis | BaseException]
        try:
            results = list(
                await asyncio.get_running_loop().run_in_executor(self._decoder(), self._run_batch, jobs)
            )
        except asyncio.CancelledError:
            self._batch_running = False
            for job in jobs:
                self._release(job)
            raise
        except Exception as exc:  # the provider failed the whole batch: each decode reports it
            results = [exc] * len(jobs)
        self._batch_running = False
        for job, result in zip(jobs, results, strict=True):
            self._apply(job, result)
        if not self._closed:
            self._start(self._schedule())

    async def _decode(self, job: DecodeJob) -> None:
        result: Hypothesis | BaseException
        try:
            decode = functools.partial(self._stt.transcribe, job.samples, final=job.final)
            result = await asyncio.get_running_loop().run_in_executor(self._decoder(), decode)
        except asyncio.CancelledError:
            self._release(job)  # closing: the thread finishes on its own and its result is dropped
            raise
        except Exception as exc:  # a provider failure is reported as an event, never fatal
            result = exc
        self._start(self.complete(job, result))

    def _run_batch(self, jobs: list[DecodeJob]) -> list[Hypothesis | Exception]:
        """Decode thread: one decode alone as usual, several in one batch."""
        if len(jobs) == 1:
            try:
                return [self._stt.transcribe(jobs[0].samples, final=jobs[0].final)]
            except Exception as exc:
                return [exc]
        return self._stt.transcribe_batch([(job.samples, job.final) for job in jobs])

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

    async def aclose(self) -> None:
        """Stop: wait (bounded) for decodes in flight, discard what got no final (idempotent)."""
        if self._closed:
            return
        self._closed = True
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=self.settings.close_timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        while self._speakers:
            _, speaker = self._speakers.popitem()
            self._discard_all(speaker, "closed")
        if self._executor is not None:
            self._executor.shutdown(wait=False)  # a decode still running finishes on its own
