"""What the model says about an action, held against what the store says.

A realtime model may not announce approval or claim an action result (RFC decision 6). Every
sentence of its transcript goes through :class:`ActionClaims` before its audio plays: a claimed
status (waiting, approved, running, done, failed, cancelled, rejected) that no action of this voice
session bears out, as the store last published it, is a
:class:`~openab_voice.engine.claims.Contradiction`: cut, reported, and replaced by the canonical line.
The grammar is deliberately narrow and reads ambiguity in the model's favour; its rules:
docs/adr/0004-action-plane.md.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from enum import StrEnum

from openab_voice.actions.events import ActionChanged
from openab_voice.actions.speech import ActionStatusView, language_of, status_line, while_status
from openab_voice.bus import EventBus
from openab_voice.engine.claims import Contradiction
from openab_voice.jobs import JobStatus

__all__ = ["ActionClaims", "Claim", "claim_in"]


class Claim(StrEnum):
    """A status a sentence can claim for an action."""

    AWAITING = "awaiting confirmation"
    APPROVED = "approved"
    RUNNING = "running"
    UNFINISHED = "not finished"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


_S = JobStatus
HOLDS: dict[Claim, frozenset[JobStatus]] = {
    Claim.AWAITING: frozenset({_S.PROPOSED, _S.DELIVERED}),
    # Approval happened: the action went past the operator's click.
    Claim.APPROVED: frozenset({_S.CONFIRMED, _S.RUNNING, _S.SUCCEEDED, _S.FAILED, _S.OUTCOME_UNKNOWN}),
    Claim.RUNNING: frozenset({_S.CONFIRMED, _S.RUNNING}),
    Claim.UNFINISHED: frozenset({_S.PROPOSED, _S.DELIVERED, _S.CONFIRMED, _S.RUNNING}),
    Claim.DONE: frozenset({_S.SUCCEEDED}),
    Claim.FAILED: frozenset({_S.FAILED}),
    Claim.CANCELLED: frozenset({_S.CANCELLED}),
    Claim.REJECTED: frozenset({_S.REJECTED}),
}
"""The statuses in which each claim is true."""

_TASK = r"(?:\b(?:the|your|this|that|my|our)\s+(?:\w+\s+)?(?:task|action|job|request|agent|change|work|file)s?\b|\b(?:task|action|job)s?\b)"
_PRONOUN = r"(?:\bit\b|\bthat\b|\bthis\b)"
_GAP = r"[^.!?]{0,40}?"  # within the sentence, a few words apart
_BE = (
    r"(?:is|was|are|were|isn't|wasn't|aren't|has\s+been|hasn't\s+been|have\s+been|haven't\s+been"
    r"|had\s+been|'s|’s|got|gets|just\s+got)"
)
_I_HAVE = r"\bI(?:\s+have|'ve|’ve|\s+just|\s+already)?"
_NOT = re.compile(r"\bnot\b|\bnever\b|n't\b|n’t\b|\byet\s+to\b", re.I)
_DONE_VERBS = (
    r"(?:done|finished|completed|created|written|wrote|made|added|deleted|removed|ran|run|executed|fixed"
    r"|updated|changed|committed|pushed|deployed|renamed|moved|installed|built|generated|saved)"
)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One way of saying a claim.

    Attributes:
        pattern: what it looks like.
        vague: it names no task ("it is finished", a bare "Done!"): only a claim where the session
            has an action for "it" to be (the Eiffel Tower "was finished in 1889" is no claim).
        negatable: a negation inside the match turns it into the opposite claim, or none.
    """

    pattern: re.Pattern[str]
    vague: bool = False
    negatable: bool = True


def _about(tail: str) -> tuple[_Rule, _Rule]:
    """The rule with a task as its subject, and its vague twin with a pronoun."""
    return (
        _Rule(re.compile(_TASK + _GAP + tail, re.I)),
        _Rule(re.compile(_PRONOUN + _GAP + tail, re.I), vague=True),
    )


def _said(pattern: str, *, vague: bool = False, negatable: bool = True) -> tuple[_Rule]:
    return (_Rule(re.compile(pattern, re.I), vague=vague, negatable=negatable),)


# Checked in order: the first claim with a rule that matches is the sentence's claim.
_GRAMMAR: tuple[tuple[Claim, tuple[_Rule, ...]], ...] = (
    (
        Claim.AWAITING,
        (
            *_said(
                r"\b(?:wait(?:s|ing)?|pending|awaiting)\b" + _GAP + r"\b(?:confirm\w*|approv\w*|operator)"
            ),
            *_said(r"\b(?:needs?|requires?)\b" + _GAP + r"\b(?:confirm\w*|approv\w*)"),
            *_said(r"\bplease\s+confirm\b|\bconfirm\s+(?:it|the\s+task|the\s+action)\b"),
        ),
    ),
    (Claim.REJECTED, _about(r"\b" + _BE + r"\s+(?:\w+\s+)?(?:rejected|declined|denied|refused)\b")),
    (
        Claim.CANCELLED,
        (
            *_about(r"\b" + _BE + r"\s+(?:\w+\s+)?(?:cancell?ed|stopped|aborted|called\s+off)\b"),
            *_said(_I_HAVE + r"\s+(?:cancell?ed|stopped|aborted)\b"),
        ),
    ),
    (
        Claim.FAILED,
        (
            *_about(r"\b(?:has\s+|have\s+)?(?:failed|errored|crashed)\b"),
            # "I couldn't": the negation is the claim itself.
            *_said(r"\bI\s+(?:couldn't|could\s+not|was\s+unable\s+to|failed\s+to)\b", negatable=False),
        ),
    ),
    (
        Claim.APPROVED,
        (
            *_about(r"\b" + _BE + r"\s+(?:\w+\s+)?(?:approved|confirmed|authori[sz]ed|accepted)\b"),
            *_said(_I_HAVE + r"\s+(?:approved|confirmed|authori[sz]ed)\b"),
        ),
    ),
    (
        Claim.DONE,
        (
            *_about(
                r"\b(?:"
                + _BE
                + r"|is\s+now|are\s+now)\s+(?:now\s+|all\s+|already\s+|not\s+yet\s+|not\s+)?"
                + r"(?:done|complete|completed|finished|successful|succeeded|ready)\b"
            ),
            *_about(r"\b(?:succeeded|completed|finished|worked)\b"),
            *_said(_I_HAVE + r"\s+(?:now\s+|already\s+|successfully\s+)?" + _DONE_VERBS + r"\b"),
            *_said(r"^\W*(?:all\s+)?(?:done|finished|completed|success)\b", vague=True),
            *_said(r"\bsuccessfully\b", vague=True),
        ),
    ),
    (
        Claim.RUNNING,
        (
            *_about(
                r"\b(?:is|are|'s|’s)\s+(?:now\s+)?(?:running|in\s+progress|underway|under\s+way|executing|started)\b"
            ),
            *_about(r"\b(?:has|have|'s|’s)\s+(?:now\s+|just\s+)?(?:started|begun|kicked\s+off)\b"),
            *_said(r"\bI(?:'m|’m|\s+am)\s+(?:now\s+)?(?:working\s+on|running|executing|doing)\b"),
            *_said(_I_HAVE + r"\s+(?:now\s+|just\s+)?(?:started|begun|kicked\s+off|launched)\b"),
        ),
    ),
)

_NEGATED: dict[Claim, Claim] = {Claim.APPROVED: Claim.AWAITING, Claim.DONE: Claim.UNFINISHED}
"""A negated claim that is itself a status ("not approved yet" is waiting); other negations claim nothing."""


def claim_in(sentence: str, *, vague: bool = True) -> Claim | None:
    """The action status ``sentence`` claims, or None (``vague``: count claims that name no task).

    >>> claim_in("The task is done.")
    <Claim.DONE: 'done'>
    >>> claim_in("I've started the task for you.")
    <Claim.RUNNING: 'running'>
    >>> claim_in("It is waiting for your confirmation in the text channel.")
    <Claim.AWAITING: 'awaiting confirmation'>
    >>> claim_in("The task is not done yet.")
    <Claim.UNFINISHED: 'not finished'>
    >>> claim_in("It was finished in eighteen eighty nine.", vague=False) is None
    True
    >>> claim_in("The answer to that question is 4.") is None
    True
    >>> claim_in("Could you start a task for that?") is None
    True
    """
    for claim, rules in _GRAMMAR:
        for rule in rules:
            if rule.vague and not vague:
                continue
            found = rule.pattern.search(sentence)
            if found is None:
                continue
            if rule.negatable and _NOT.search(found.group(0)):
                negated = _NEGATED.get(claim)
                if negated is None:
                    break  # a negation of this claim says nothing checkable; try the next claim
                return negated
            return claim
    return None


class ActionClaims:
    """Checks the model's sentences against the statuses of each voice session's actions.

    Args:
        bus: where the store's transitions are published (``ActionChanged``, session = the action's
            voice session).
        keep: actions remembered per session (the oldest is forgotten first).
        sessions: voice sessions remembered (the one whose actions changed longest ago goes first).
    """

    def __init__(self, bus: EventBus, *, keep: int = 64, sessions: int = 256) -> None:
        self._keep = keep
        self._max_sessions = sessions
        self._sessions: collections.OrderedDict[str, collections.OrderedDict[str, JobStatus]] = (
            collections.OrderedDict()
        )
        self._view = ActionStatusView(bus)
        self._sub = bus.subscribe(ActionChanged, self._on_changed)

    def contradiction(self, sentence: str, *, session_id: str | None) -> Contradiction | None:
        """The contradiction when ``sentence`` claims a status no action of the session is in."""
        actions = self._sessions.get(session_id or "", collections.OrderedDict())
        claim = claim_in(sentence, vague=bool(actions))  # "it" is a task only where there is one
        if claim is None:
            return None
        if any(status in HOLDS[claim] for status in actions.values()):
            return None
        if not actions:
            return Contradiction(
                sentence=sentence,
                claimed=claim.value,
                actual="no task",
                action_id=None,
                correction=status_line(None, language_of(sentence)),
                cause=None,
            )
        action_id, latest = next(reversed(actions.items()))
        return Contradiction(
            sentence=sentence,
            claimed=claim.value,
            actual=latest.value,
            action_id=action_id,
            correction=status_line(latest, language_of(sentence)),
            cause=while_status(
                self._view, action_id, now=latest, statuses=frozenset({latest}), describes=latest.value
            ),
        )

    def _on_changed(self, event: ActionChanged) -> None:
        if event.session_id is None:
            return
        actions = self._sessions.setdefault(event.session_id, collections.OrderedDict())
        self._sessions.move_to_end(event.session_id)
        actions[event.action_id] = JobStatus(event.status)
        actions.move_to_end(event.action_id)
        while len(actions) > self._keep:
            actions.popitem(last=False)
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)

    def close(self) -> None:
        """Stop following the bus (idempotent)."""
        self._sub.close()
        self._view.close()
