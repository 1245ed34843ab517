"""Interruption control: when user speech cuts the bot off, and when that was a false alarm.

Barge-in: in full-duplex mode a :class:`~openab_voice.audio.events.SpeechStarted` (only onsets the
echo gate accepted) while a response runs (``thinking``, ``speaking``, ``tool_running``) becomes a
:class:`~openab_voice.engine.state.BargeIn`; in turn-based mode nothing interrupts. The interrupting
speech is still transcribed and its final becomes the next turn. After a barge-in the controller
holds a :class:`ResumePlan` (the cut sentence and those after it). The interruption is real once the
speaker's words show up (a non-empty partial, or an accepted final); it was false, and the plan goes
back to the manager to resume, when the utterance is discarded (a cough), its final is not a turn,
or the window passes with no transcript while the speaker is silent. Any accepted turn drops the
plan. Pure bookkeeping: no I/O, no clock; the manager runs the window timer and passes back its token.
"""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.audio.events import SpeechStarted
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.settings import DialogueMode
from openab_voice.engine.state import BUSY, BargeIn, DialogueState
from openab_voice.engine.supervisor import PreparedResponse

__all__ = ["InterruptionController", "ResumePlan", "resume_plan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePlan:
    """What to say after a false interruption.

    Attributes:
        turn_id: the turn whose response was cut.
        replay: sentences to speak again, the cut one first; empty means generate the reply again
            (the cut came before any sentence existed).
        exact: the cut response was a status line (said again exactly, see ``PreparedResponse``).
        cause: the status line's cause (checked again before it is resumed).
    """

    turn_id: str
    replay: tuple[str, ...]
    exact: bool = False
    cause: SpeechCause | None = None


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
    words: bool = False  # the speaker's words appeared: a real interruption in progress
    expired: bool = False


class InterruptionController:
    """Barge-in decisions and false-interruption bookkeeping for one conversation.

    Args:
        mode: full duplex (barge-in on) or turn based (off).
        resume: resume after false interruptions.
    """

    def __init__(self, *, mode: DialogueMode, resume: bool) -> None:
        self._mode = mode
        self._resume = resume
        self._speaking: set[str] = set()
        self._pending: _Pending | None = None
        self._tokens = 0

    @property
    def pending_speaker(self) -> str | None:
        return None if self._pending is None else self._pending.speaker_id

    def on_speech_started(self, state: DialogueState, event: SpeechStarted) -> BargeIn | None:
        """Track the speaker; a :class:`BargeIn` when this speech interrupts the bot."""
        self._speaking.add(event.speaker_id)
        if self._mode is not DialogueMode.FULL_DUPLEX or state not in BUSY:
            return None
        return BargeIn(speaker_id=event.speaker_id, audio_time=event.audio_time, confidence=event.confidence)

    def on_speech_ended(self, speaker_id: str) -> ResumePlan | None:
        self._speaking.discard(speaker_id)
        p = self._pending
        if p is not None and p.speaker_id == speaker_id and p.expired and not p.words:
            return self._resolve_false()
        return None

    def arm(self, *, speaker_id: str, plan: ResumePlan | None) -> int | None:
        """Hold ``plan`` after a barge-in by ``speaker_id``; returns the window timer's token."""
        self._pending = None
        if plan is None or not self._resume:
            return None
        self._tokens += 1
        self._pending = _Pending(token=self._tokens, speaker_id=speaker_id, plan=plan)
        return self._tokens

    def on_partial(self, speaker_id: str, text: str) -> None:
        p = self._pending
        if p is not None and p.speaker_id == speaker_id and text.strip():
            p.words = True

    def on_final(self, speaker_id: str, *, accepted: bool) -> ResumePlan | None:
        """A final transcript: an accepted turn drops the plan; the interrupter's ignored one resumes."""
        p = self._pending
        if p is None:
            return None
        if accepted:
            self._pending = None
            return None
        return self._resolve_false() if p.speaker_id == speaker_id else None

    def on_discarded(self, speaker_id: str) -> ResumePlan | None:
        p = self._pending
        if p is not None and p.speaker_id == speaker_id:
            return self._resolve_false()
        return None

    def on_window_expired(self, token: int) -> ResumePlan | None:
        p = self._pending
        if p is None or p.token != token:
            return None  # a stale timer
        p.expired = True
        if p.words or p.speaker_id in self._speaking:
            return None  # still talking: the final transcript (or discard) decides
        return self._resolve_false()

    def clear(self) -> None:
        """Drop the plan (a new response started, or the conversation stopped)."""
        self._pending = None

    def _resolve_false(self) -> ResumePlan | None:
        p = self._pending
        self._pending = None
        return None if p is None else p.plan
