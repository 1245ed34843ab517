"""The seam between a model's speech and the action plane's truth.

An engine whose model speaks for itself (the realtime engine) hands each sentence of the model's
transcript to a :class:`SpeechClaims` before that sentence's audio plays. The action plane implements
it (:class:`openab_voice.actions.claims.ActionClaims`); the engine only acts on the answer: a
:class:`Contradiction` is cut, reported (``SpeechClaimCut``) and never committed as heard, and its
``correction`` is said instead by the exact voice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from openab_voice.engine.expiry import SpeechCause

__all__ = ["Contradiction", "SpeechClaims"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Contradiction:
    """A sentence that claims an action status the store does not bear out.

    Attributes:
        sentence: what the model said (as far as its transcript had come).
        claimed: the status it claimed (``"done"``, ``"awaiting confirmation"`` ...).
        actual: the status of the session's latest action (``"no task"`` when there is none).
        action_id: that action, if any.
        correction: the canonical line for the actual status (said exactly instead).
        cause: what must still hold for the correction to be said (None: always).
    """

    sentence: str
    claimed: str
    actual: str
    action_id: str | None
    correction: str
    cause: SpeechCause | None = None


class SpeechClaims(Protocol):
    """Checks what a model is about to say about actions."""

    def contradiction(self, sentence: str, *, session_id: str | None) -> Contradiction | None:
        """The contradiction when ``sentence`` claims something the store does not bear out."""
        ...
