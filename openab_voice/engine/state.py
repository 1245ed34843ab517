"""The dialogue state machine: pure ``transition(snapshot, input) -> (snapshot, effects)``.

States are the spec's seven. The table (``busy`` is ``thinking | speaking | tool_running``)::

    idle         --Start---------------> listening
    listening    --UserTurn------------> thinking      StartResponse
    listening    --ResumeRequested-----> thinking      StartResponse(resume)
    busy         --UserTurn------------> thinking      InterruptResponse(superseded), StartResponse
    thinking     --AudioStarted--------> speaking      (unchanged in speaking / tool_running)
    thinking     --ToolStarted---------> tool_running  (also from speaking)
    tool_running --ToolFinished--------> thinking
    thinking     --ResponseFinished----> listening     CommitResponse (also from speaking)
    busy         --BargeIn-------------> interrupted   InterruptResponse(barge_in)
    interrupted  --ResponseCancelled---> listening
    busy         --ResponseFailed------> recovering    DiscardResponse
    recovering   --Recovered-----------> listening
    listening    --ProviderLost--------> recovering    (the engine's provider connection dropped)
    busy         --ProviderLost--------> recovering    DiscardResponse
    listening    --ProviderFailed------> recovering    Recover   (a failure outside any response: STT)
    not idle     --Stop----------------> idle          InterruptResponse(stopped) if a response runs

Every recoverable error the spec lists goes to ``recovering`` and back to ``listening``: the chat
model, TTS, playback, tool path and memory recall fail inside a response (``ResponseFailed``, the
code names which: memory recall is ``MEMORY_RECALL_FAILED``), the realtime provider loses its session
(``ProviderLost``), and speech-to-text fails outside any response (``ProviderFailed(kind="stt")``).
A ``ProviderFailed`` while a response runs leaves it alone (the failed decode is not the response's,
and the transcriber already discarded its utterance); in idle, recovering or interrupted it changes
nothing.

Inputs from a response that is no longer current (a report the runner queued just before it
was cancelled) carry a stale ``response_id`` and change nothing. Anything else that does not fit the
table raises :class:`IllegalTransition`.

The machine holds no text and does no I/O: effects name what to do and the conversation manager, the
one place that applies them, does it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import assert_never

from openab_voice.errors import IllegalTransition

__all__ = [
    "BUSY",
    "AudioStarted",
    "BargeIn",
    "CommitResponse",
    "DialogueInput",
    "DialogueState",
    "DiscardResponse",
    "Effect",
    "InterruptResponse",
    "ProviderFailed",
    "ProviderLost",
    "Recover",
    "Recovered",
    "ResponseCancelled",
    "ResponseFailed",
    "ResponseFinished",
    "ResumeRequested",
    "Snapshot",
    "Start",
    "StartResponse",
    "Stop",
    "ToolFinished",
    "ToolStarted",
    "UserTurn",
    "cause_of",
    "transition",
]


class DialogueState(StrEnum):
    IDLE = "idle"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"
    INTERRUPTED = "interrupted"
    TOOL_RUNNING = "tool_running"
    RECOVERING = "recovering"


BUSY = frozenset({DialogueState.THINKING, DialogueState.SPEAKING, DialogueState.TOOL_RUNNING})
"""States in which a response is running: user speech here is an interruption."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The machine's whole state.

    Attributes:
        state: the dialogue state.
        turn_id: the user turn the current response answers (None when there is none).
        response_id: the running (or being-cancelled) response; reports from others are stale.
    """

    state: DialogueState = DialogueState.IDLE
    turn_id: str | None = None
    response_id: str | None = None


# --- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """The manager started: begin listening."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """The manager is closing: drop any response and go idle."""

    reason: str = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserTurn:
    """A final transcript the turn policy accepted; ``response_id`` names the response to start."""

    turn_id: str
    response_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeRequested:
    """Speak prepared sentences without the model (new ``response_id``): the cut response after a false
    interruption, or an announcement (an action's status)."""

    turn_id: str
    response_id: str
    cause: str = "false_interruption"


@dataclass(frozen=True, slots=True, kw_only=True)
class BargeIn:
    """Valid user speech (past the echo gate) while a response runs."""

    speaker_id: str
    audio_time: float
    confidence: float


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioStarted:
    """The response wrote a sentence's first audio to the output."""

    response_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted:
    response_id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished:
    response_id: str
    name: str
    ok: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFinished:
    """Everything the response had to say was played (or the output cut it: ``interrupted``)."""

    response_id: str
    interrupted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFailed:
    """A provider (chat, TTS, playback, tool path) failed; ``code`` is the structured error code."""

    response_id: str
    code: str
    message: str
    retryable: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseCancelled:
    """The interrupted response's tasks have stopped and what was heard is committed."""

    response_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """Cleanup after a failure is done (for an engine with a provider session: a fresh one is ready)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderLost:
    """The engine lost its provider session (a websocket drop); it reconnects, then reports
    :class:`Recovered`. Ignored where nothing listens (idle) or recovery already runs."""

    code: str
    message: str
    retryable: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderFailed:
    """A recoverable provider failure outside any response; ``kind`` names the provider (``"stt"``:
    a decode failed and its utterance was discarded). From listening: recovering, then
    :class:`Recovered` once :class:`Recover`'s cleanup is done."""

    kind: str
    code: str
    message: str
    retryable: bool = True


DialogueInput = (
    Start
    | Stop
    | UserTurn
    | ResumeRequested
    | BargeIn
    | AudioStarted
    | ToolStarted
    | ToolFinished
    | ResponseFinished
    | ResponseFailed
    | ResponseCancelled
    | Recovered
    | ProviderLost
    | ProviderFailed
)

# --- effects --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StartResponse:
    """Run the response subgraph (LLM -> segmenter -> TTS -> output) for ``turn_id``."""

    turn_id: str
    response_id: str
    resume: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptResponse:
    """Stop playback now, cancel the LLM/TTS/tool tasks, commit only what was heard.

    ``barge_in`` is set when user speech caused it (for the latency figure and false-interruption
    recovery). The manager reports :class:`ResponseCancelled` when done.
    """

    response_id: str
    reason: str
    barge_in: BargeIn | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitResponse:
    """The response ended on its own: commit the heard text."""

    response_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscardResponse:
    """The response failed: stop it, commit nothing, report the error; then :class:`Recovered`."""

    response_id: str
    code: str
    message: str
    retryable: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Recover:
    """Clean up after a :class:`ProviderFailed` (no response to stop); then :class:`Recovered`."""

    kind: str
    code: str


Effect = StartResponse | InterruptResponse | CommitResponse | DiscardResponse | Recover

_Result = tuple[Snapshot, tuple[Effect, ...]]

# --- transition -----------------------------------------------------------------------------------


def transition(snap: Snapshot, event: DialogueInput) -> _Result:
    """The next snapshot and the effects to apply, or :class:`IllegalTransition`."""
    match event:
        case Start():
            return _start(snap)
        case Stop():
            return _stop(snap, event)
        case UserTurn() | ResumeRequested():
            return _new_response(snap, event)
        case BargeIn():
            return _barge_in(snap, event)
        case AudioStarted() | ToolStarted() | ToolFinished() | ResponseFinished() | ResponseFailed():
            if event.response_id != snap.response_id:
                return snap, ()  # stale: queued by a response already cancelled
            return _progress(snap, event)
        case ResponseCancelled():
            return _cancelled(snap, event)
        case Recovered():
            _require(snap, event, {DialogueState.RECOVERING})
            return Snapshot(state=DialogueState.LISTENING), ()
        case ProviderLost():
            return _lost(snap, event)
        case ProviderFailed():
            if snap.state is not DialogueState.LISTENING:
                return snap, ()  # a response runs (not its failure), nothing listens, or recovery runs
            return replace(snap, state=DialogueState.RECOVERING), (Recover(kind=event.kind, code=event.code),)
        case _:
            assert_never(event)


def _require(
    snap: Snapshot, event: DialogueInput, allowed: set[DialogueState] | frozenset[DialogueState]
) -> None:
    if snap.state not in allowed:
        raise IllegalTransition(
            f"{type(event).__name__} is not accepted in state {snap.state.value}",
            state=snap.state.value,
            input=type(event).__name__,
        )


def _start(snap: Snapshot) -> _Result:
    _require(snap, Start(), {DialogueState.IDLE})
    return Snapshot(state=DialogueState.LISTENING), ()


def _stop(snap: Snapshot, event: Stop) -> _Result:
    _require(snap, event, set(DialogueState) - {DialogueState.IDLE})
    effects: tuple[Effect, ...] = ()
    if snap.response_id is not None:
        effects = (InterruptResponse(response_id=snap.response_id, reason=event.reason),)
    return Snapshot(state=DialogueState.IDLE), effects


def _new_response(snap: Snapshot, event: UserTurn | ResumeRequested) -> _Result:
    resume = isinstance(event, ResumeRequested)
    # A resume only makes sense from listening; a new turn may also supersede a running response.
    _require(snap, event, {DialogueState.LISTENING} if resume else {DialogueState.LISTENING, *BUSY})
    effects: list[Effect] = []
    if snap.state in BUSY and snap.response_id is not None:
        effects.append(InterruptResponse(response_id=snap.response_id, reason="superseded"))
    effects.append(StartResponse(turn_id=event.turn_id, response_id=event.response_id, resume=resume))
    new = Snapshot(state=DialogueState.THINKING, turn_id=event.turn_id, response_id=event.response_id)
    return new, tuple(effects)


def _barge_in(snap: Snapshot, event: BargeIn) -> _Result:
    _require(snap, event, BUSY)
    assert snap.response_id is not None  # every busy state has a response
    effect = InterruptResponse(response_id=snap.response_id, reason="barge_in", barge_in=event)
    return replace(snap, state=DialogueState.INTERRUPTED), (effect,)


def _progress(
    snap: Snapshot, event: AudioStarted | ToolStarted | ToolFinished | ResponseFinished | ResponseFailed
) -> _Result:
    s = DialogueState
    match event:
        case AudioStarted():
            # More sentences keep starting while speaking, and earlier sentences still play while a
            # tool runs: neither changes the state.
            _require(snap, event, BUSY)
            if snap.state is s.THINKING:
                return replace(snap, state=s.SPEAKING), ()
            return snap, ()
        case ToolStarted():
            _require(snap, event, {s.THINKING, s.SPEAKING})
            return replace(snap, state=s.TOOL_RUNNING), ()
        case ToolFinished():
            _require(snap, event, {s.TOOL_RUNNING})
            return replace(snap, state=s.THINKING), ()
        case ResponseFinished():
            _require(snap, event, {s.THINKING, s.SPEAKING})
            return Snapshot(state=s.LISTENING), (CommitResponse(response_id=event.response_id),)
        case ResponseFailed():
            _require(snap, event, BUSY)
            effect = DiscardResponse(
                response_id=event.response_id,
                code=event.code,
                message=event.message,
                retryable=event.retryable,
            )
            return replace(snap, state=s.RECOVERING), (effect,)
        case _:
            assert_never(event)


def _lost(snap: Snapshot, event: ProviderLost) -> _Result:
    if snap.state in {DialogueState.IDLE, DialogueState.RECOVERING, DialogueState.INTERRUPTED}:
        return snap, ()  # nothing listens, or recovery (or the cut's settling) already runs
    effects: tuple[Effect, ...] = ()
    if snap.state in BUSY and snap.response_id is not None:
        effects = (
            DiscardResponse(
                response_id=snap.response_id,
                code=event.code,
                message=event.message,
                retryable=event.retryable,
            ),
        )
    return replace(snap, state=DialogueState.RECOVERING), effects


def _cancelled(snap: Snapshot, event: ResponseCancelled) -> _Result:
    if event.response_id != snap.response_id:
        return snap, ()  # a superseded or stopped response finished unwinding: nothing to do
    _require(snap, event, {DialogueState.INTERRUPTED})
    return Snapshot(state=DialogueState.LISTENING), ()


def cause_of(event: DialogueInput) -> str:
    """A short machine-readable cause for the ``DialogueStateChanged`` an input produced."""
    match event:
        case Stop():
            return event.reason
        case ResumeRequested():
            return event.cause
        case ResponseFailed() | ProviderLost() | ProviderFailed():
            return event.code
        case _:
            name = type(event).__name__
            return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
