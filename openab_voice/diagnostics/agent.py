"""``openab-voice self-test agent``: the real conversation manager on fake providers, in virtual time.

Everything but the providers is the production code: the state machine, turn policy, context,
response runner (with the real sentence segmenter), speech handles, interruption controller and
the real tool registry (``clock_now``). The chat model, TTS and speaker are the fakes of
:mod:`openab_voice.testing.dialogue_fakes`, driven by a :class:`~openab_voice.clock.FakeClock`, so
the run is deterministic and takes well under a second.

Three turns, each checked from the bus events, the context and what the fake speaker played:

1. **question and answer**: states ``listening -> thinking -> speaking -> listening``; event order;
   the whole answer played in sentence order and committed to context.
2. **interruption during playback**: user speech during the second sentence; the states include
   ``speaking -> interrupted -> listening``; sound stops within a frame; the chat stream is closed;
   only the first (fully played) sentence is committed; the interrupting question becomes the next
   turn and is answered.
3. **tool call**: ``thinking -> tool_running -> thinking -> speaking``; the tool result goes back to
   the model as a tool message; only the spoken answer enters context.

Returns ``{"passed": bool, "turns": [...], "latency_ms": {...}}``; any failed check (or a crash)
makes ``passed`` False. No check is skipped or faked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.clock import FakeClock
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    LatencyMeasured,
    ToolCallHandled,
    TranscriptFinal,
    TranscriptPartial,
    TurnAccepted,
)
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.providers.speech import ChatMessage, ToolCall
from openab_voice.testing.dialogue_fakes import (
    FakeChatModel,
    FakeRoster,
    FakeSpeechOutput,
    FakeTextToSpeech,
    ScriptedReply,
    drive,
    run_until,
)
from openab_voice.tools import CLOCK_NOW, MemoryAuditLog, ToolRouter, default_tools

__all__ = ["run_agent_self_test"]

BARGE_IN_TARGET_MS = 200.0
_ANSWER_1 = "Paris is the capital of France. It is known for the Eiffel Tower."
_ANSWER_2 = (
    "The Eiffel Tower was finished in 1889. It was built for the World's Fair. "
    "Gustave Eiffel's company designed and built it."
)
_ANSWER_3 = "It is about 330 metres tall."
_SESSION = "selftest"


def _time_answer(messages: Sequence[ChatMessage]) -> ScriptedReply:
    """The model's second round: read the clock tool's result and say the time."""
    content = json.loads(messages[-1].content) if messages[-1].role == "tool" else {}
    utc = str(content.get("utc", "unknown time"))
    return ScriptedReply.text(f"It is {utc[11:16]} UTC on {content.get('weekday', 'an unknown day')}.")


@dataclass
class _Turn:
    name: str
    start: int  # index into the event log where the turn began
    started_at: float  # virtual time it began
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: Any = "") -> None:
        self.checks.append({"name": name, "passed": bool(ok), "detail": detail})


class _Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.chat = FakeChatModel(
            self.clock,
            [
                ScriptedReply.text(_ANSWER_1),
                ScriptedReply.text(_ANSWER_2, delay_s=0.15),
                ScriptedReply.text(_ANSWER_3),
                ScriptedReply.tool(ToolCall(id="call-1", name=CLOCK_NOW, arguments="{}")),
                _time_answer,
            ],
        )
        self.tts = FakeTextToSpeech(self.clock)
        self.output = FakeSpeechOutput(self.clock)
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            chat=self.chat,
            tts=self.tts,
            output=self.output,
            # The one tool path, as a session's: the router, auditing into memory (no job store here).
            tools=ToolRouter(default_tools(self.clock), clock=self.clock, audit=MemoryAuditLog()),
            roster=FakeRoster({"alice": "Alice", "bot": "Jarvis"}, bots=["bot"]),
            settings=DialogueSettings(bot_user_id="bot"),
            session_id=_SESSION,
        )

    def since(self, start: int, kind: type[Event] = Event) -> list[Any]:
        return [e for e in self.events[start:] if isinstance(e, kind)]

    def states(self, start: int) -> list[str]:
        return [f"{e.previous}->{e.state}" for e in self.since(start, DialogueStateChanged)]

    def hear(self, event: TranscriptFinal | TranscriptPartial | SpeechStarted) -> None:
        """As a session delivers it: published for observers, then handed to the conversation."""
        self.bus.publish(event)
        self.manager.hear(event)

    def say(self, text: str, *, began: float | None = None) -> None:
        now = self.clock.monotonic()
        self.hear(
            TranscriptFinal(
                at=now,
                session_id=_SESSION,
                speaker_id="alice",
                utterance_id=f"u{len(self.events)}",
                text=text,
                audio_start=now - 1.5 if began is None else began,
                audio_end=now,
                partials=1,
            )
        )

    def finished(self, turn_id: str) -> Callable[[], bool]:
        return lambda: (
            any(isinstance(e, BotUtteranceFinished) and e.turn_id == turn_id for e in self.events)
            and (self.manager.state is DialogueState.LISTENING)
        )

    def utterance(self, turn_id: str) -> BotUtteranceFinished | None:
        found = [e for e in self.events if isinstance(e, BotUtteranceFinished) and e.turn_id == turn_id]
        return found[-1] if found else None

    def played_sentences(self, since_time: float = 0.0) -> list[str]:
        """Sentences in the order their frames were played (consecutive frames collapsed)."""
        out: list[str] = []
        last = 0
        for _, tag, at in self.output.played:
            if at >= since_time and tag != last:
                out.append(self.tts.sentence_for(tag))
            last = tag
        return out

    def assistant_text(self) -> list[str]:
        return [row["text"] for row in self.manager.context.dump() if row["role"] == "assistant"]


def _in_order(events: list[Event], predicates: list[Callable[[Event], bool]]) -> bool:
    """True when events matching each predicate occur in this order (as a subsequence)."""
    i = 0
    for event in events:
        if i < len(predicates) and predicates[i](event):
            i += 1
    return i == len(predicates)


def _state(to: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, DialogueStateChanged) and e.state == to


def _metric(name: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, LatencyMeasured) and e.metric == name


async def _question_answer(h: _Harness) -> _Turn:
    turn = _Turn("question_answer", len(h.events), h.clock.monotonic())
    h.say("What is the capital of France?")
    done = await run_until(h.clock, h.finished("turn-1"))
    turn.check("answer finished", done)
    states = h.states(turn.start)
    expected = ["listening->thinking", "thinking->speaking", "speaking->listening"]
    turn.check("state sequence", states == expected, states)
    order = [
        lambda e: isinstance(e, TurnAccepted),
        _state("thinking"),
        _metric("tts_first_chunk_ms"),
        _metric("eou_to_first_audio_ms"),
        _state("speaking"),
        _state("listening"),
        lambda e: isinstance(e, BotUtteranceFinished),
    ]
    turn.check("event order", _in_order(h.events[turn.start :], order))
    played = h.played_sentences(turn.started_at)
    sentences = ["Paris is the capital of France.", "It is known for the Eiffel Tower."]
    turn.check("playback order", played == sentences, played)
    utt = h.utterance("turn-1")
    turn.check("whole answer heard", utt is not None and utt.spoken_text == _ANSWER_1 and not utt.interrupted)
    turn.check("context write", h.assistant_text() == [_ANSWER_1], h.assistant_text())
    return turn


async def _interruption(h: _Harness) -> _Turn:
    turn = _Turn("interruption", len(h.events), h.clock.monotonic())
    h.say("Tell me about the Eiffel Tower.")
    second = "It was built for the World's Fair."
    playing = await run_until(h.clock, lambda: second in h.played_sentences())
    turn.check("second sentence playing", playing)
    await drive(h.clock, 0.2)
    barge_at = h.clock.monotonic()
    closed_before = h.chat.closed_early
    h.hear(
        SpeechStarted(
            at=barge_at,
            session_id=_SESSION,
            speaker_id="alice",
            audio_time=barge_at,
            probability=0.9,
            during_playback=True,
            confidence=0.9,
        )
    )
    stopped = await run_until(h.clock, lambda: h.manager.state is DialogueState.LISTENING, limit_s=1.0)
    turn.check("back to listening", stopped)
    states = h.states(turn.start)
    cut = ["speaking->interrupted", "interrupted->listening"]
    turn.check(
        "speaking -> interrupted -> listening",
        any(states[i : i + 2] == cut for i in range(len(states))),
        states,
    )
    turn.check("interruption event", bool(h.since(turn.start, InterruptionDetected)))
    late = [t for _, _, t in h.output.played if t > barge_at + 0.02]
    turn.check("sound stopped within one frame", not late, f"{len(late)} frames after the interruption")
    turn.check("chat stream cancelled", h.chat.closed_early == closed_before + 1)
    open_tts = set(h.tts.requested) - set(h.tts.completed) - set(h.tts.closed_early)
    turn.check("no speech synthesis left running", not open_tts, sorted(open_tts))
    barge = [e.value_ms for e in h.since(turn.start, LatencyMeasured) if e.metric == "barge_in_ms"]
    turn.check("barge-in latency", bool(barge) and max(barge) < BARGE_IN_TARGET_MS, barge)
    utt = h.utterance("turn-2")
    first = "The Eiffel Tower was finished in 1889."
    turn.check(
        "only heard text committed",
        utt is not None and utt.interrupted and utt.spoken_text == first and h.assistant_text()[-1] == first,
        h.assistant_text(),
    )
    # The interrupting speech is transcribed and becomes the next turn.
    await drive(h.clock, 0.4)
    h.hear(
        TranscriptPartial(
            at=h.clock.monotonic(),
            session_id=_SESSION,
            speaker_id="alice",
            utterance_id="u-int",
            text="Actually how tall",
            stable=True,
            audio_start=barge_at,
            audio_end=h.clock.monotonic(),
        )
    )
    await drive(h.clock, 0.5)
    h.say("Actually, how tall is it?", began=barge_at)
    answered = await run_until(h.clock, h.finished("turn-3"))
    turn.check("interrupting question answered", answered and h.assistant_text()[-1] == _ANSWER_3)
    resumed = [e for e in h.since(turn.start, DialogueStateChanged) if e.cause == "false_interruption"]
    turn.check("no false-interruption resume", not resumed)
    played = h.played_sentences(turn.started_at)
    turn.check("playback order", played == [first, second, _ANSWER_3], played)
    return turn


async def _tool_call(h: _Harness) -> _Turn:
    turn = _Turn("tool_call", len(h.events), h.clock.monotonic())
    h.say("What time is it?")
    done = await run_until(h.clock, h.finished("turn-4"))
    turn.check("answer finished", done)
    states = h.states(turn.start)
    expected = [
        "listening->thinking",
        "thinking->tool_running",
        "tool_running->thinking",
        "thinking->speaking",
        "speaking->listening",
    ]
    turn.check("state sequence", states == expected, states)
    handled = h.since(turn.start, ToolCallHandled)
    turn.check("tool ran through the registry", [(e.name, e.ok) for e in handled] == [(CLOCK_NOW, True)])
    request = h.chat.requests[-1]
    back = request[-1]
    turn.check(
        "tool result sent back to the model",
        back.role == "tool" and back.tool_call_id == "call-1" and "utc" in back.content,
        back.content,
    )
    turn.check("tool offered to the model", CLOCK_NOW in h.chat.offered_tools[-2])
    utt = h.utterance("turn-4")
    spoken = utt.spoken_text if utt is not None else ""
    turn.check("answer spoken", spoken.startswith("It is ") and "UTC" in spoken, spoken)
    roles = {m.role for m in h.manager.context.messages()}
    turn.check(
        "context holds the heard answer only", h.assistant_text()[-1] == spoken and "tool" not in roles
    )
    order = [
        lambda e: isinstance(e, TurnAccepted),
        lambda e: isinstance(e, ToolCallHandled),
        _state("speaking"),
    ]
    turn.check("event order", _in_order(h.events[turn.start :], order))
    return turn


def _report(h: _Harness, turn: _Turn, end: int) -> dict[str, Any]:
    return {
        "name": turn.name,
        "passed": all(c["passed"] for c in turn.checks),
        "checks": turn.checks,
        "states": [
            f"{e.previous}->{e.state}"
            for e in h.events[turn.start : end]
            if isinstance(e, DialogueStateChanged)
        ],
        "played": h.played_sentences(turn.started_at),
    }


async def _run() -> dict[str, Any]:
    h = _Harness()
    turns: list[dict[str, Any]] = []
    async with h.output:
        await h.manager.start()
        try:
            for scenario in (_question_answer, _interruption, _tool_call):
                turn = await scenario(h)
                turns.append(_report(h, turn, len(h.events)))
        finally:
            await h.manager.aclose()
    errors = [f"{e.code}: {e.message}" for e in h.events if isinstance(e, ErrorRaised)]
    latency: dict[str, list[float]] = {}
    for e in h.events:
        if isinstance(e, LatencyMeasured):
            latency.setdefault(e.metric, []).append(round(e.value_ms, 1))
    return {
        "passed": bool(turns) and all(t["passed"] for t in turns) and not errors,
        "turns": turns,
        "errors": errors,
        "context": h.manager.context.dump(),
        "latency_ms": latency,
    }


def run_agent_self_test() -> dict[str, Any]:
    """Run the three-turn agent self-test; see the module docstring."""
    try:
        return asyncio.run(_run())
    except Exception as exc:  # a crash is a failed self-test, reported like any other failure
        return {"passed": False, "turns": [], "errors": [f"{type(exc).__name__}: {exc}"]}
