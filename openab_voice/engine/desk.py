"""The transcript desk: one voice session's recognized speech, from its transcriber to its consumers.

The data path is direct calls, not the bus (ADR 0015): :meth:`TranscriptDesk.route` passes each event
on synchronously. A ``TranscriptFinal`` is offered to the intakes in order (the task phrase,
"remember that ..."); the first that takes it ends the offer and the conversation only hears it was
claimed, else the conversation hears it. A speculative an intake would take never reaches the
conversation; other transcript events and STT ``ErrorRaised`` go to it; other observations stop here.
A consumer that raises is logged and skipped. Routing rules in detail:
docs/adr/0015-data-path-by-direct-calls.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from openab_voice.bus.events import ErrorRaised
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    SpeechResumed,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.stt.recognize import RecognitionEvent

__all__ = ["Heard", "Intake", "Listener", "TranscriptDesk"]

log = logging.getLogger(__name__)

Heard = (
    TranscriptFinal
    | TranscriptPartial
    | TranscriptDiscarded
    | TranscriptSpeculative
    | SpeculationWithdrawn
    | SpeechResumed
    | ErrorRaised
)
"""What the conversation hears from the desk."""
E = TypeVar("E", bound=Heard)


class Intake(Protocol):
    """A path that takes some finals for itself (``TaskPhraseIntake``, ``RememberIntake``)."""

    def claims(self, text: str) -> bool:
        """Whether ``text`` would be taken (no side effect; asked for speculative finals)."""
        ...

    def offer(self, final: TranscriptFinal) -> bool:
        """Take ``final`` if it is this intake's (parsed once, acted on now); whether it did."""
        ...


class Listener(Protocol):
    """The conversation's side of the desk."""

    def hear(self, event: Heard) -> None:
        """A transcript event nobody else took."""
        ...

    def hear_claimed(self, final: TranscriptFinal) -> None:
        """A final an intake took: never a dialogue turn, but a valid end of an interruption."""
        ...


class TranscriptDesk:
    """Routes one session's transcripts: intakes first, then the conversation.

    Args:
        intakes: offered every final, in this order; the first that takes it ends the offer.
        conversation: hears what no intake took (None: no dialogue in this session).
    """

    def __init__(self, intakes: Sequence[Intake] = (), conversation: Listener | None = None) -> None:
        self._intakes: tuple[Intake, ...] = tuple(intakes)
        self._conversation = conversation

    def route(self, event: RecognitionEvent) -> None:
        """Hand ``event`` to whoever consumes it, synchronously (the transcriber's sink)."""
        conversation = self._conversation
        match event:
            case TranscriptFinal():
                claimed = self._claimed(event)
                if conversation is not None:
                    _guarded(conversation.hear_claimed if claimed else conversation.hear, event)
            case TranscriptSpeculative():
                if conversation is not None and not self._would_claim(event.text):
                    _guarded(conversation.hear, event)
            case TranscriptPartial() | TranscriptDiscarded() | SpeculationWithdrawn() | SpeechResumed():
                if conversation is not None:
                    _guarded(conversation.hear, event)
            case ErrorRaised() if event.stage == "stt":
                if conversation is not None:
                    _guarded(conversation.hear, event)
            case _:
                pass  # observations: the bus carried them

    def close(self) -> None:
        """Route nothing more (the session is closing; its consumers are about to close)."""
        self._intakes = ()
        self._conversation = None

    def _claimed(self, final: TranscriptFinal) -> bool:
        for intake in self._intakes:
            try:
                if intake.offer(final):
                    return True
            except Exception:  # one intake's bug must not stop the others or the conversation
                log.exception("intake %s failed on a final", type(intake).__name__)
        return False

    def _would_claim(self, text: str) -> bool:
        for intake in self._intakes:
            try:
                if intake.claims(text):
                    return True
            except Exception:
                log.exception("intake %s failed on a speculative final", type(intake).__name__)
        return False


def _guarded(call: Callable[[E], None], event: E) -> None:
    try:
        call(event)
    except Exception:  # the conversation's bug must not stop the transcriber or later events
        log.exception("the conversation failed on %s", type(event).__name__)
