"""Conversation events: dialogue states, turns, utterances, interruptions, tool calls, speech dropped
or cut. (Transcripts are :mod:`openab_voice.stt.events`; ``LatencyMeasured`` is the bus's.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openab_voice.bus.events import Event, sanitize


@dataclass(frozen=True, slots=True, kw_only=True)
class DialogueStateChanged(Event):
    previous: str
    state: str
    cause: str
    turn_id: str | None = None
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAccepted(Event):
    """A final transcript became a user turn addressed to the bot."""

    speaker_id: str
    turn_id: str
    text: str
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnIgnored(Event):
    """A final transcript kept as channel context only (e.g. not addressed to the bot)."""

    speaker_id: str
    text: str
    reason: str
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class BotUtteranceFinished(Event):
    """What the bot meant to say, what was actually heard (committed to context), and whether it was cut."""

    turn_id: str
    text: str
    spoken_text: str
    interrupted: bool
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptionDetected(Event):
    speaker_id: str
    turn_id: str | None
    state: str
    confidence: float
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallHandled(Event):
    turn_id: str
    name: str
    ok: bool
    result: dict[str, Any] = field(default_factory=dict)
    stage: str = "tools"

    def __post_init__(self) -> None:
        object.__setattr__(self, "result", sanitize(self.result))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderTruncated(Event):
    """The realtime engine truncated a provider item at the position playback reported as played.

    Attributes:
        item_id: the provider's assistant item.
        audio_end_ms: what ``conversation.item.truncate`` said was heard of that item.
        played_ms: the utterance position playback reported (the item may start later in it).
        utterance_id: the playback utterance (None when nothing reached playback).
    """

    turn_id: str
    item_id: str
    audio_end_ms: int
    played_ms: float
    utterance_id: str | None = None
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderToldHeard(Event):
    """The live engine told its model which words of a cut answer were heard (GPT-Live has no
    truncation: a note in its context is the API's means).

    Attributes:
        heard: the answer's heard text, as our context records it.
        played_ms: the utterance position playback reported.
    """

    turn_id: str
    heard: str
    played_ms: float
    stage: str = "engine"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechDropped(Event):
    """Queued speech was not said because its cause expired (an action moved on, ...).

    Attributes:
        turn_id: the response it belonged to (the announcement's own id when it never started).
        text: what would have been said.
        cause: the cause's name (who queued it and why).
        reason: why the cause no longer holds, as the cause reported it.
        point: where the check caught it: ``queued`` (before the response started),
            ``before_synthesis``, ``before_audio`` (after synthesis, before its first frame) or
            ``playing`` (cut within a frame; what had played stays played).
    """

    turn_id: str
    text: str
    cause: str
    reason: str
    point: str
    stage: str = "engine"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", sanitize(self.text))


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechClaimCut(Event):
    """The model began to claim an action status the store does not bear out; it was cut.

    The claim is never committed as heard (context, transcript, memory): only this event records it.

    Attributes:
        turn_id: the response it was part of.
        text: the claim, as far as the model's transcript had come.
        claimed: the status it claimed.
        actual: the status of the session's latest action (``"no task"``: none).
        action_id: that action, if any.
        kept_ms: the response's audio before the claim (played out unless someone interrupted; the
            claim's own audio, if any of it was out yet, was stopped).
        correction: the canonical line queued in its place.
    """

    turn_id: str
    text: str
    claimed: str
    actual: str
    action_id: str | None
    kept_ms: float
    correction: str
    stage: str = "engine"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", sanitize(self.text))
