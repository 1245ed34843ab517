"""What a recognizer says about an utterance: partials through the stability filter, the rules that
make a final usable, speculative finals and their withdrawal, discards and decode failures; and about
the finals waiting for a decode (the backlog reports).

:class:`TranscriptReporter` turns decode results into the transcript events of
:mod:`openab_voice.engine.events` and hands each to ``emit`` (the recognize stream's output); it
decides nothing about *when* to decode (that is :class:`~openab_voice.stt.redecode.RedecodeCore`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from openab_voice.bus.events import ErrorRaised, Event, LatencyMeasured
from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.stt.base import Hypothesis
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    SpeechResumed,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.stt.stability import normalize_words
from openab_voice.stt.utterances import DecodeJob, SpeakerState, TranscriberSettings, Utterance

log = logging.getLogger("openab_voice.stt.transcriber")

_BACKLOG_REPORT_S = 1.0  # a lasting backlog is reported at most this often


class TranscriptReporter:
    """Transcript events for one stream's utterances, and its backlog reports.

    Args:
        emit: where each event goes, in order.
        clock: event times and latencies.
        settings: the usability thresholds (``min_confidence``, ``max_no_speech_prob``).
        session_id: stamped on every event.
    """

    def __init__(
        self,
        emit: Callable[[Event], None],
        *,
        clock: Clock,
        settings: TranscriberSettings,
        session_id: str | None,
    ) -> None:
        self._emit = emit
        self._clock = clock
        self.settings = settings
        self._session = session_id
        self._shed_reported = 0
        self._backlog_at: float | None = None  # last TranscriptionBacklog while backlogged, else None

    def partial(self, utt: Utterance, hyp: Hypothesis, audio_end: float) -> None:
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
            self._emit(
                LatencyMeasured(
                    at=now,
                    session_id=self._session,
                    metric="first_stable_partial_ms",
                    value_ms=(now - utt.audio_start) * 1000.0,
                    speaker_id=utt.speaker_id,
                )
            )

    def unusable(self, hyp: Hypothesis) -> str | None:
        """Why a final hypothesis cannot be published (None: it can)."""
        text, s = hyp.text.strip(), self.settings
        if not text:
            return "empty"
        if not normalize_words(text):
            return "punctuation_only"
        if (
            hyp.no_speech_prob is not None
            and hyp.no_speech_prob > s.max_no_speech_prob
            and (hyp.confidence is None or hyp.confidence < s.no_speech_unless_confidence)
        ):
            return "no_speech"
        if hyp.confidence is not None and hyp.confidence < s.min_confidence:
            return "low_confidence"
        return None

    def speculative(self, utt: Utterance, hyp: Hypothesis) -> None:
        """A usable speculative final for an utterance still open: say what its final will be."""
        if self.unusable(hyp) is not None:
            return
        utt.spec_announced = True
        self._emit(
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

    def resumed(self, utt: Utterance, audio_time: float) -> None:
        """``utt`` starts inside the speech segment a turn ended in (no onset of the front end's)."""
        self._emit(
            SpeechResumed(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
                audio_time=audio_time,
            )
        )

    def withdraw(self, utt: Utterance) -> None:
        """Speech followed an announced speculation: it will not be the final."""
        if not utt.spec_announced:
            return
        utt.spec_announced = False
        self._emit(
            SpeculationWithdrawn(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
            )
        )

    def finish(self, utt: Utterance, hyp: Hypothesis) -> None:
        text = hyp.text.strip()
        reason = self.unusable(hyp)
        if reason is None:
            utt.concluded = True
            self._emit(
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
        self.discard(utt, reason, text)

    def failed(self, job: DecodeJob, exc: BaseException) -> None:
        code = exc.code if isinstance(exc, OpenabError) else ErrorCode.STT_DECODE_FAILED
        log.warning("speech-to-text decode failed for %s: %r", job.utterance_id, exc)
        self._emit(
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
            self.discard(job._utterance, "stt_error")

    def discard_all(self, speaker: SpeakerState, reason: str) -> None:
        for utt in (*speaker.finishing, *((speaker.current,) if speaker.current else ())):
            self.discard(utt, reason)

    def discard(self, utt: Utterance, reason: str, text: str = "") -> None:
        if utt.concluded:
            return
        utt.concluded = True
        self._emit(
            TranscriptDiscarded(
                at=self._clock.monotonic(),
                session_id=self._session,
                speaker_id=utt.speaker_id,
                utterance_id=utt.id,
                reason=reason,
                text=text,
            )
        )

    def backlog(
        self, waiting: list[Utterance], speakers: Iterable[SpeakerState], *, partials_shed: int
    ) -> None:
        """Report the finals ``waiting`` for a decode slot when they pile up, again at most once a
        second while they do, and once when they clear (``partials_shed``: the scheduler's count)."""
        now = self._clock.monotonic()
        backlogged = len(waiting) >= 2 or (bool(waiting) and partials_shed > self._shed_reported)
        if backlogged:
            if self._backlog_at is not None and now - self._backlog_at < _BACKLOG_REPORT_S:
                return
            self._backlog_at = now
        elif waiting or self._backlog_at is None:
            return  # not (or still) backlogged: nothing new to say
        else:
            self._backlog_at = None  # cleared
        self._shed_reported = partials_shed
        ended = [u.ended_at for u in waiting if u.ended_at is not None]
        self._emit(
            TranscriptionBacklog(
                at=now,
                session_id=self._session,
                waiting=len(waiting),
                talking=sum(1 for sp in speakers if sp.current is not None),
                partials_shed=partials_shed,
                oldest_wait_ms=round((now - min(ended)) * 1000.0, 1) if ended else 0.0,
            )
        )

    def _publish_partial(self, utt: Utterance, text: str, *, stable: bool, audio_end: float) -> None:
        utt.partials += 1
        self._emit(
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
