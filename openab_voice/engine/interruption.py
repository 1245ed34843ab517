"""Interruption control: when user speech cuts the bot off, and when that was a false alarm.

Barge-in: in full-duplex mode a :class:`~openab_voice.audio.events.SpeechStarted` (only onsets the
echo gate accepted) while a response runs (``thinking``, ``speaking``, ``tool_running``) becomes a
:class:`~openab_voice.engine.state.BargeIn` at once (the output stops within a frame); in turn-based
mode nothing interrupts. The interrupting speech is still transcribed and its final becomes the next
turn. After a barge-in the controller holds a :class:`ResumePlan` (the cut sentence and those after
it). The interruption is real once the speaker's words show up (a partial that is not a backchannel,
or an accepted final); it was false, and the plan goes back to the manager to resume, when the
utterance is discarded (a cough), its final is not a turn, or the window passes with no transcript
while the speaker is silent.

Backchannels (:mod:`~openab_voice.engine.backchannel`, on unless ``ignore_backchannels`` is off): a
short "yeah" or "mm-hmm" said over the bot is no turn and the bot goes on. The bot still stops on its
onset (the barge-in budget leaves no time to hear the words first); the plan is resumed as soon as a
stable partial says a backchannel and the speech ended within the bound, or, without one, when the
final does. A backchannel's final said over the bot (its speech began while a response ran, or it
comes while one runs) is never answered, even when no barge-in came first. A cut word ("wait",
"stop"), the wake name or a real sentence stays a real interruption. Any accepted turn drops the
plan. Pure bookkeeping: no I/O, no clock; the manager runs the window timer and passes back its
token. Decision and figures: docs/adr/0019-backchannels.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from openab_voice.audio.events import SpeechStarted
from openab_voice.engine.backchannel import MAX_DURATION_S, Verdict, classify
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.settings import DialogueMode
from openab_voice.engine.state import BUSY, BargeIn, DialogueState
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.stt.events import TranscriptFinal, TranscriptPartial

__all__ = ["Backchannel", "InterruptionController", "ResumePlan", "resume_plan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePlan:
    """What to say after a false interruption.

    Attributes:
        turn_id: the turn whose response was cut.
        replay: sentences to speak again, the cut one first; empty means generate the reply again
            (the cut came before any sentence existed).
        exact: the cut response was a status line (said again exactly, see ``PreparedResponse``).
        cause: the status line's cause (checked again before it is resumed).
        reason: why it is resumed: ``false_interruption`` or ``backchannel`` (the state change's cause).
    """

    turn_id: str
    replay: tuple[str, ...]
    exact: bool = False
    cause: SpeechCause | None = None
    reason: str = "false_interruption"


@dataclass(frozen=True, slots=True, kw_only=True)
class Backchannel:
    """A final that is a backchannel said over the bot: no turn. ``plan``: what to resume (None when
    nothing was cut, or it was already resumed on the utterance's stable partial)."""

    plan: ResumePlan | None


def resume_plan(handle: SpeechHandle, prepared: PreparedResponse | None = None) -> ResumePlan | None:
    """The plan for resuming ``handle``'s response (``prepared``: what it was started with), or None
    when nothing is left to say. A status line is resumed as one: exact, under the same cause."""
    exact = prepared is not None and prepared.exact
    cause = prepared.cause if prepared is not None else None
    unheard = handle.unheard_sentences()
    if unheard:
        return ResumePlan(turn_id=handle.turn_id, replay=unheard, exact=exact, cause=cause)
    if not handle.heard_sentences() and not handle.is_generation_done:
        return ResumePlan(turn_id=handle.turn_id, replay=())
    return None


@dataclass(slots=True)
class _Pending:
    token: int
    speaker_id: str
    plan: ResumePlan
    words: bool = False  # words that are no backchannel appeared: a real interruption in progress
    backchannel: bool = False  # a stable partial said a backchannel
    ended_s: float | None = None  # the speech's duration, once it ended
    expired: bool = False


class InterruptionController:
    """Barge-in decisions and false-interruption bookkeeping for one conversation.

    Args:
        mode: full duplex (barge-in on) or turn based (off).
        resume: resume after false interruptions.
        backchannels: a backchannel said over the bot is no turn, and what it cut is resumed.
    """

    def __init__(self, *, mode: DialogueMode, resume: bool, backchannels: bool) -> None:
        self._mode = mode
        self._resume = resume
        self._backchannels = backchannels and mode is DialogueMode.FULL_DUPLEX
        self._speaking: set[str] = set()
        self._over_bot: set[str] = set()  # speakers whose current speech began while a response ran
        self._pending: _Pending | None = None
        self._tokens = 0

    @property
    def pending_speaker(self) -> str | None:
        return None if self._pending is None else self._pending.speaker_id

    def on_speech_started(self, state: DialogueState, event: SpeechStarted) -> BargeIn | None:
        """Track the speaker; a :class:`BargeIn` when this speech interrupts the bot."""
        speaker = event.speaker_id
        self._speaking.add(speaker)
        if state in BUSY:
            self._over_bot.add(speaker)
        else:
            self._over_bot.discard(speaker)
        p = self._pending
        if p is not None and p.speaker_id == speaker:
            p.ended_s = None  # talking again: the earlier end no longer bounds what they say
        if self._mode is not DialogueMode.FULL_DUPLEX or state not in BUSY:
            return None
        return BargeIn(speaker_id=speaker, audio_time=event.audio_time, confidence=event.confidence)

    def on_speech_ended(self, speaker_id: str, *, duration_s: float) -> ResumePlan | None:
        """The speaker stopped after ``duration_s`` of speech: a backchannel already heard, or a
        silent false alarm whose window passed, resumes now."""
        self._speaking.discard(speaker_id)
        p = self._pending
        if p is None or p.speaker_id != speaker_id:
            return None
        p.ended_s = duration_s
        if self._early_backchannel(p):
            return self._resolve(backchannel=True)
        if p.expired and not p.words and not p.backchannel:
            return self._resolve()
        return None

    def arm(self, *, speaker_id: str, plan: ResumePlan | None) -> int | None:
        """Hold ``plan`` after a barge-in by ``speaker_id``; returns the window timer's token."""
        self._pending = None
        if plan is None or not (self._resume or self._backchannels):
            return None
        self._tokens += 1
        self._pending = _Pending(token=self._tokens, speaker_id=speaker_id, plan=plan)
        return self._tokens

    def on_partial(self, event: TranscriptPartial, *, wake_name: str | None) -> ResumePlan | None:
        """A partial of the interrupter: words make the interruption real, unless they are a
        backchannel; a stable backchannel whose speech already ended within the bound resumes now."""
        p = self._pending
        if p is None or p.speaker_id != event.speaker_id or not event.text.strip():
            return None
        if self._backchannels and classify(event.text, wake_name=wake_name) is Verdict.BACKCHANNEL:
            p.backchannel = p.backchannel or event.stable
        else:
            p.words = True  # sticky: a later "yeah" does not undo "wait"
        return self._resolve(backchannel=True) if self._early_backchannel(p) else None

    def take_backchannel(
        self, state: DialogueState, final: TranscriptFinal, *, wake_name: str | None
    ) -> Backchannel | None:
        """A final the turn policy accepted: a :class:`Backchannel` when it is one said over the bot
        (then it is no turn), else None (a turn; the caller reports it with :meth:`on_final`)."""
        speaker = final.speaker_id
        over_bot = self._over_bot_now(state, speaker)
        self._over_bot.discard(speaker)
        if not self._backchannels or not over_bot:
            return None
        duration = final.audio_end - final.audio_start
        if classify(final.text, duration_s=duration, wake_name=wake_name) is not Verdict.BACKCHANNEL:
            return None
        p = self._pending
        plan = self._resolve(backchannel=True) if p is not None and p.speaker_id == speaker else None
        return Backchannel(plan=plan)

    def is_backchannel(
        self, state: DialogueState, *, speaker_id: str, text: str, duration_s: float, wake_name: str | None
    ) -> bool:
        """Whether ``text`` (a speculative final) would be taken as a backchannel; changes nothing."""
        over_bot = self._over_bot_now(state, speaker_id)
        verdict = classify(text, duration_s=duration_s, wake_name=wake_name)
        return self._backchannels and over_bot and verdict is Verdict.BACKCHANNEL

    def on_final(self, speaker_id: str, *, accepted: bool) -> ResumePlan | None:
        """A final transcript: an accepted turn drops the plan; the interrupter's ignored one resumes."""
        self._over_bot.discard(speaker_id)
        p = self._pending
        if p is None:
            return None
        if accepted:
            self._pending = None
            return None
        return self._resolve() if p.speaker_id == speaker_id else None

    def on_discarded(self, speaker_id: str) -> ResumePlan | None:
        self._over_bot.discard(speaker_id)
        p = self._pending
        if p is not None and p.speaker_id == speaker_id:
            return self._resolve()
        return None

    def on_window_expired(self, token: int) -> ResumePlan | None:
        p = self._pending
        if p is None or p.token != token:
            return None  # a stale timer
        p.expired = True
        if p.words or p.backchannel or p.speaker_id in self._speaking:
            return None  # words heard, or still talking: the final transcript (or discard) decides
        return self._resolve()

    def clear(self) -> None:
        """Drop the plan (a new response started, or the conversation stopped)."""
        self._pending = None

    def _over_bot_now(self, state: DialogueState, speaker_id: str) -> bool:
        """Whether what ``speaker_id`` says now was said over the bot: their speech began while a
        response ran, one runs now, or it cut one that is still held for them (their final can come
        after they began to speak again)."""
        held = self._pending is not None and self._pending.speaker_id == speaker_id
        return speaker_id in self._over_bot or state in BUSY or held

    def _early_backchannel(self, p: _Pending) -> bool:
        """A stable backchannel, nothing else said, and the speech ended within the bound: the
        final would only confirm it (and it is checked again then)."""
        return p.backchannel and not p.words and p.ended_s is not None and p.ended_s <= MAX_DURATION_S

    def _resolve(self, *, backchannel: bool = False) -> ResumePlan | None:
        """Drop the plan; it, to resume, when resuming this kind of false alarm is on."""
        p = self._pending
        self._pending = None
        if p is None:
            return None
        if backchannel and self._backchannels:
            return replace(p.plan, reason="backchannel")
        return p.plan if self._resume else None
