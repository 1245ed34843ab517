"""Re-decode recognition: a batch :class:`~openab_voice.stt.base.SpeechToText` made to stream.

The synchronous scheduling core behind :class:`~openab_voice.stt.redecode_stream.RedecodeStream`:
its inputs return the :class:`DecodeJob` s to start and events go to ``emit`` in order, so tests
drive it on a fake timeline. An utterance runs from the first ``user_speech`` frame (plus
``pre_roll_ms``) to the first frame without it, or to where the end-of-turn stage ended it
(:mod:`~openab_voice.stt.endpointing`); it is re-decoded as it grows (partials, stable prefix), its
quiet stretches speculatively; it ends with one ``TranscriptFinal`` or ``TranscriptDiscarded``.
Finals first; under overload partials are shed, finals never dropped. Rules: docs/adr/0012, 0021.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import Event
from openab_voice.clock import Clock
from openab_voice.errors import AudioError
from openab_voice.stt.base import Hypothesis, SttCapabilities
from openab_voice.stt.endpointing import EndOfTurnStage, TurnCheck
from openab_voice.stt.stability import StabilityFilter
from openab_voice.stt.transcripts import TranscriptReporter
from openab_voice.stt.utterances import DecodeJob, SpeakerState, TranscriberSettings, Utterance

_END_TOLERANCE_S = 0.025  # frame timestamps vs the VAD's end time: resampler and chunking offsets
_EMPTY: npt.NDArray[np.int16] = np.zeros(0, dtype=np.int16)


class RedecodeCore:
    """Utterances per speaker and the decodes they need, for a provider with ``capabilities``.

    Args:
        capabilities: the provider's; partial decodes only when ``streaming``, batches when ``batch``.
        emit: where transcript, latency, backlog and error events go, in order.
        clock: injected clock (event times and latency).
        settings: tunables.
        session_id: stamped on every event.
        turns: the end-of-turn stage (None: the VAD's silence alone ends a turn).
    """

    def __init__(
        self,
        capabilities: SttCapabilities,
        *,
        emit: Callable[[Event], None],
        clock: Clock,
        settings: TranscriberSettings | None = None,
        session_id: str | None = None,
        turns: EndOfTurnStage | None = None,
    ) -> None:
        self._clock = clock
        self._session = session_id
        self._emit = emit
        self.turns = turns
        self._checks: list[TurnCheck] = []
        self.settings = settings or TranscriberSettings()
        self._report = TranscriptReporter(emit, clock=clock, settings=self.settings, session_id=session_id)
        self._rate = capabilities.sample_rate
        self._streaming = capabilities.streaming
        self.batching = capabilities.batch and self.settings.max_batch > 1
        self.batch_running = False
        self._speakers: dict[str, SpeakerState] = {}
        self._ids = itertools.count(1)
        self._in_flight = 0
        self.partials_shed = 0
        self.closed = False

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
        if self.closed:
            return []
        speaker = self._speaker(audio.speaker_id)
        if speaker.end_at is not None and audio.timestamp >= speaker.end_at - _END_TOLERANCE_S:
            self._end(speaker)  # a frame after a capture-stopped end belongs to the next utterance
        samples = audio.samples().reshape(-1)
        utt = speaker.current
        quiet = frame.speech_probability < self.settings.speculate_below
        resumed = False
        if speaker.after_turn:  # the turn ended at a pause the VAD still counts as speech
            if frame.user_speech and quiet:
                self._keep_pre_roll(speaker, samples)
                return self._schedule()
            speaker.after_turn = False  # the VAD caught up, or new words: a new utterance
            resumed = frame.user_speech
        if utt is not None and not frame.user_speech and self.turns is not None and self.turns.holds(utt):
            utt.holding = True  # the VAD ended the speech; the end-of-turn stage has not (yet)
        if frame.user_speech or (utt is not None and utt.holding):
            if utt is None:
                utt = speaker.current = self._begin(audio.speaker_id, speaker, audio.timestamp)
                if resumed:
                    self._report.resumed(utt, audio.timestamp)
            utt.holding = not frame.user_speech  # the speaker talks on: the VAD's next end is judged anew
            utt.chunks.append(samples)
            utt.samples += samples.size
            utt.audio_end = audio.timestamp + audio.duration
            if quiet:
                if utt.quiet_since is None:
                    utt.quiet_since = audio.timestamp
                self._announce_if_due(utt)
                self._judge_if_due(utt)
            elif utt.quiet_since is not None:
                utt.quiet_since = None  # speech again: a speculative final is stale
                self._report.withdraw(utt)
            reached = speaker.end_at is not None and utt.audio_end >= speaker.end_at - _END_TOLERANCE_S
            if utt.holding and self.turns is not None and self.turns.ends_held(utt):
                utt.audio_end = utt.quiet_since or utt.audio_end  # the turn ended at the pause
                self._end(speaker)
            elif reached or utt.samples >= self.settings.max_utterance_s * self._rate:
                self._end(speaker)  # at the length cap, the next speech frame starts a new utterance
        else:
            if utt is not None:
                # The end of speech, as the VAD placed it (a minimum silence before this frame).
                utt.audio_end = audio.timestamp if frame.speech_end is None else frame.speech_end
                self._end(speaker)
            self._keep_pre_roll(speaker, samples)
        return self._schedule()

    def end_speech(self, speaker_id: str, audio_time: float) -> list[DecodeJob]:
        """Speech ended at ``audio_time`` with no silent frame to follow (capture stopped, speaker
        left: the front end's timer); the utterance ends once the frames up to ``audio_time`` are in
        (they may be queued behind this call). Returns the decodes to start now."""
        speaker = self._speakers.get(speaker_id)
        if speaker is None or speaker.current is None or self.closed:
            return []
        speaker.end_at = audio_time
        if speaker.current.audio_end >= audio_time - _END_TOLERANCE_S:
            self._end(speaker)
        return self._schedule()

    def pause(self, speaker_id: str, audio_time: float) -> list[DecodeJob]:
        """No packet from the speaker since ``audio_time``: if their last frames were quiet they are
        probably done, so the quiet stretch is decoded speculatively now (its final if nothing
        follows); packets held up mid-word (jitter) start nothing. Returns the decodes to start."""
        speaker = self._speakers.get(speaker_id)
        utt = speaker.current if speaker is not None else None
        if utt is None or self.closed or utt.quiet_since is None:
            return []
        if utt.audio_end < audio_time - _END_TOLERANCE_S:
            return []  # frames up to the pause are still on their way
        utt.paused_quiet = utt.quiet_since
        self._announce_if_due(utt)
        return self._schedule()

    def complete(self, job: DecodeJob, result: Hypothesis | BaseException) -> list[DecodeJob]:
        """Apply a finished decode (its hypothesis or the exception it raised); returns decodes to start."""
        self._apply(job, result)
        return [] if self.closed else self._schedule()

    def complete_all(self, results: list[tuple[DecodeJob, Hypothesis | BaseException]]) -> list[DecodeJob]:
        """Apply a batch's decodes, in order; returns the decodes to start (scheduled once)."""
        for job, result in results:
            self._apply(job, result)
        return [] if self.closed else self._schedule()

    def _apply(self, job: DecodeJob, result: Hypothesis | BaseException) -> None:
        self.release(job)
        utt = job._utterance
        if job.speculative:
            if isinstance(result, Hypothesis) and self._is_open(utt):
                # It decoded what a partial would have (none runs in a quiet stretch): its words are
                # that partial's, and count toward the stable prefix as a partial's do. A doubtful
                # first pass too: a partial is that same first pass, never held to the final's
                # guards (agreement between hypotheses is the partials' guard).
                self._report.partial(utt, result, job.audio_end)
            # Kept only for the quiet run it was decoded in; a failure just means no shortcut.
            if not utt.concluded and isinstance(result, Hypothesis) and utt.spec_quiet == utt.quiet_since:
                if result.doubtful:  # not a final as it stands: no shortcut, nothing announced
                    utt.spec_doubtful = True
                else:
                    utt.spec = result
                    self._announce_if_due(utt)
                    self._judge_if_due(utt)
        elif not utt.concluded:
            if isinstance(result, BaseException):
                self._report.failed(job, result)
            elif job.final:
                self._report.finish(utt, result)
            else:
                self._report.partial(utt, result, job.audio_end)

    def take_turn_checks(self) -> list[TurnCheck]:
        """The pauses due for the end-of-turn detector (run each, then :meth:`turn_judged`)."""
        checks, self._checks = self._checks, []
        return checks

    def turn_judged(
        self, check: TurnCheck, result: float | BaseException, check_ms: float
    ) -> list[DecodeJob]:
        """Apply the detector's P(complete) for ``check`` (or its exception: no verdict, the VAD's
        end of speech decides); returns the decodes to start."""
        assert self.turns is not None
        utt = check._utterance
        decided = self.turns.verdict(
            check, result, check_ms, at=self._clock.monotonic(), session_id=self._session
        )
        self._emit(decided)
        speaker = self._speakers.get(check.speaker_id)
        if self.closed or speaker is None or not self.turns.current(utt, check, speaker.current):
            return []  # the speaker talked on, or the utterance ended meanwhile: nothing to decide
        if decided.complete or (utt.holding and self.turns.ends_held(utt)):
            utt.audio_end = check.quiet_since
            speaker.after_turn = not utt.holding  # the VAD has not ended this speech yet
            self._end(speaker)
        return self._schedule()

    def hold_deadline(self) -> float | None:
        """The earliest time a held utterance's pause runs out (None: nothing is held)."""
        turns = self.turns
        held = [turns.deadline(sp.current) for sp in self._speakers.values() if turns and sp.current]
        return min((d for d in held if d is not None), default=None)

    def expire_holds(self, now: float) -> list[DecodeJob]:
        """End the held utterances whose pause has run out by ``now`` (no frame came to say so)."""
        for speaker in self._speakers.values():
            deadline = self.turns.deadline(speaker.current) if self.turns and speaker.current else None
            if deadline is not None and deadline <= now and (utt := speaker.current) is not None:
                utt.audio_end = utt.quiet_since or utt.audio_end
                self._end(speaker)
        return self._schedule()

    def flush(self) -> list[DecodeJob]:
        """End every utterance in progress (the stream stopped); returns the final decodes to start."""
        for speaker in self._speakers.values():
            self._end(speaker)
        return self._schedule()

    def remove_speaker(self, speaker_id: str) -> None:
        """Forget a speaker: open utterances are discarded, a decode in flight is ignored."""
        speaker = self._speakers.pop(speaker_id, None)
        if speaker is not None:
            self._report.discard_all(speaker, "speaker_removed")

    def discard_open(self, reason: str) -> None:
        """Discard every utterance that has no final yet (the stream is closing) and forget the speakers."""
        while self._speakers:
            _, speaker = self._speakers.popitem()
            self._report.discard_all(speaker, reason)

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

    def _is_open(self, utt: Utterance) -> bool:
        speaker = self._speakers.get(utt.speaker_id)
        return speaker is not None and speaker.current is utt

    # --- scheduling -----------------------------------------------------------------------------

    def _schedule(self) -> list[DecodeJob]:
        for speaker in self._speakers.values():
            while speaker.finishing and speaker.finishing[0].speculated and not speaker.busy:
                utt = speaker.finishing.popleft()
                assert utt.spec is not None
                self._report.finish(
                    utt, utt.spec
                )  # the speculative decode saw all the speech: it is the final
        jobs: list[DecodeJob] = []
        limit = self.settings.max_batch if self.batching else self.settings.max_concurrent_decodes
        while self._in_flight < limit and not self.batch_running:
            job = self._next_final() or self._next_speculative(early=False)
            if job is None and not (self.batching and any(j.final for j in jobs)):
                # A batch steps until its longest item is done: a partial riding along with a
                # final would hold that final back for its own words. Finals (speculative ones
                # too) go out in a batch of their own; partials wait for the next one.
                job = self._next_partial()
            if job is None and not (self.batching and any(not j.final for j in jobs)):
                job = self._next_speculative(early=True)  # nothing else to decode: start it now
            if job is None:
                break
            self._in_flight += 1
            self._speakers[job.speaker_id].busy = True
            jobs.append(job)
        waiting = [u for sp in self._speakers.values() for u in sp.finishing if not u.speculated]
        if waiting:
            self._shed_partials()
        self._report.backlog(waiting, self._speakers.values(), partials_shed=self.partials_shed)
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

    def release(self, job: DecodeJob) -> None:
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

    def _next_speculative(self, *, early: bool) -> DecodeJob | None:
        """The speculative final of a quiet run.

        It is decoded as soon as the decoder would otherwise run a partial there (the same audio:
        every word before the quiet), once the quiet is long enough to announce, or (``early``) at
        the run's first frame when the decoder has nothing else to do, whichever comes first. Its
        announcement always waits for the quiet to last (:meth:`_announce_if_due`): the decode is
        then ready when it falls due instead of starting then, and a final and the answer prepared
        on it are a decode earlier. A run that turns back into speech only cost a decode the
        decoder had no other use for (ADR 0012, decision 8).

        The decode is ``quick``: the provider's first pass only. One it doubts (a short "Hello?"
        the guards cut) is no shortcut and is not announced; a full decode of the run follows only
        when the decoder has nothing else to do (ADR 0012, decision 9), so a speculation that may
        never be used does not hold the decoder for a slow second pass while others wait."""
        if self.settings.speculate_after_ms <= 0:
            return None
        for speaker in self._speakers.values():
            utt = speaker.current
            if utt is None or speaker.busy or speaker.finishing or utt.quiet_since is None:
                continue
            due = early or self._spec_due(utt) or (self._streaming and self._partial_wait(utt) is not None)
            if utt.spec_quiet != utt.quiet_since and due:
                utt.spec_quiet, utt.spec, utt.spec_doubtful = utt.quiet_since, None, False
                return self._job(utt, final=True, speculative=True, quick=True)
            if early and utt.spec_doubtful and utt.spec_quiet == utt.quiet_since:
                # The quick decode was doubtful and the decoder is free: the full one, fallback and
                # all, so a pause that does end the turn still has its final ready at the end.
                utt.spec_doubtful = False
                return self._job(utt, final=True, speculative=True)
        return None

    def _spec_due(self, utt: Utterance) -> bool:
        """The quiet run has lasted ``speculate_after_ms``, or the capture paused in it."""
        assert utt.quiet_since is not None
        after = self.settings.speculate_after_ms / 1000.0
        return utt.audio_end - utt.quiet_since >= after or utt.paused_quiet == utt.quiet_since

    def _judge_if_due(self, utt: Utterance) -> None:
        if self.turns is not None and self._is_open(utt) and (check := self.turns.due(utt)) is not None:
            self._checks.append(check)

    def _announce_if_due(self, utt: Utterance) -> None:
        """Announce the quiet run's speculative final once it is decoded and the run long enough."""
        if utt.speculated and not utt.spec_announced and self._is_open(utt) and self._spec_due(utt):
            assert utt.spec is not None
            self._report.speculative(utt, utt.spec)

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
                # Quiet since the last speech: what a partial would decode is the speculative final
                # (see _next_speculative), and a partial would hold the decoder past the moment that
                # falls due. Speech again, and the partial is due at once.
                continue
            waited = self._partial_wait(utt)
            if waited is not None and waited > waited_most:
                best, waited_most = utt, waited  # the longest-waiting speaker first
        if best is None:
            return None
        best.decoded_at = best.samples - best.pre_roll
        return self._job(best, final=False)

    def _job(
        self, utt: Utterance, *, final: bool, speculative: bool = False, quick: bool = False
    ) -> DecodeJob:
        samples = np.concatenate(utt.chunks)
        utt.chunks = [samples]  # one contiguous buffer; later frames append to it
        return DecodeJob(
            speaker_id=utt.speaker_id,
            utterance_id=utt.id,
            samples=samples,
            final=final,
            audio_end=utt.audio_end,
            speculative=speculative,
            quick=quick,
            _utterance=utt,
        )
