"""The agent self-test's three turns, each checked from the bus events, the context, the audit log
and what the fake speaker played:

1. **question and answer**: states ``listening -> thinking -> speaking -> listening``; event order;
   the whole answer played in sentence order and committed to context.
2. **interruption during playback**: user speech during the second sentence; the states include
   ``speaking -> interrupted -> listening``; sound stops within a frame; the chat stream is closed;
   only the first (fully played) sentence is committed; the interrupting question becomes the next
   turn and is answered.
3. **memory search**: a record stored through the memory, which then passes its consistency check
   on reopening (as at a restart); the model calls ``memory_search`` through the router:
   ``thinking -> tool_running -> thinking -> speaking``; the record reaches the model as the tool
   message; the call is audited, with no virtual time spent; only the spoken answer enters context.
   A memory health error (FAISS unavailable, an index inconsistent with the rows) fails the check
   ``memory healthy`` with the memory's error code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus.events import Event, LatencyMeasured
from openab_voice.diagnostics.agent_harness import (
    ANSWER_1,
    ANSWER_3,
    REMEMBERED,
    SESSION,
    Harness,
)
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    ToolCallHandled,
    TurnAccepted,
)
from openab_voice.engine.state import DialogueState
from openab_voice.memory.tools import MEMORY_SEARCH
from openab_voice.stt.events import TranscriptPartial

BARGE_IN_TARGET_MS = 200.0


@dataclass
class Turn:
    name: str
    start: int  # index into the event log where the turn began
    started_at: float  # virtual time it began
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: Any = "") -> None:
        self.checks.append({"name": name, "passed": bool(ok), "detail": detail})


def _say(h: Harness, text: str, *, began: float | None = None) -> None:
    """A final transcript of 1.5 s of speech (or since ``began``) that ended now."""
    h.say(text, began=h.now() - 1.5 if began is None else began)


def _state(to: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, DialogueStateChanged) and e.state == to


def _metric(name: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, LatencyMeasured) and e.metric == name


async def question_answer(h: Harness) -> Turn:
    turn = Turn("question_answer", len(h.events), h.clock.monotonic())
    _say(h, "What is the capital of France?")
    done = await h.clock.run_until(h.finished("turn-1"))
    turn.check("answer finished", done)
    states = h.states(since=turn.start)
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
    turn.check("event order", h.events.in_order(*order, since=turn.start))
    played = h.played_sentences(turn.started_at)
    sentences = ["Paris is the capital of France.", "It is known for the Eiffel Tower."]
    turn.check("playback order", played == sentences, played)
    utt = h.utterance("turn-1")
    turn.check("whole answer heard", utt is not None and utt.spoken_text == ANSWER_1 and not utt.interrupted)
    turn.check("context write", h.assistant_text() == [ANSWER_1], h.assistant_text())
    return turn


async def interruption(h: Harness) -> Turn:
    turn = Turn("interruption", len(h.events), h.clock.monotonic())
    _say(h, "Tell me about the Eiffel Tower.")
    second = "It was built for the World's Fair."
    playing = await h.clock.run_until(lambda: second in h.played_sentences())
    turn.check("second sentence playing", playing)
    await h.run(0.2)
    barge_at = h.clock.monotonic()
    closed_before = h.chat.closed_early
    h.sense(
        SpeechStarted(
            at=barge_at,
            session_id=SESSION,
            speaker_id="alice",
            audio_time=barge_at,
            probability=0.9,
            during_playback=True,
            confidence=0.9,
        )
    )
    stopped = await h.clock.run_until(lambda: h.manager.state is DialogueState.LISTENING, limit_s=1.0)
    turn.check("back to listening", stopped)
    states = h.states(since=turn.start)
    cut = ["speaking->interrupted", "interrupted->listening"]
    turn.check(
        "speaking -> interrupted -> listening",
        any(states[i : i + 2] == cut for i in range(len(states))),
        states,
    )
    turn.check("interruption event", bool(h.events.of(InterruptionDetected, since=turn.start)))
    late = [t for _, _, t in h.output.played if t > barge_at + 0.02]
    turn.check("sound stopped within one frame", not late, f"{len(late)} frames after the interruption")
    turn.check("chat stream cancelled", h.chat.closed_early == closed_before + 1)
    open_tts = set(h.tts.requested) - set(h.tts.completed) - set(h.tts.closed_early)
    turn.check("no speech synthesis left running", not open_tts, sorted(open_tts))
    barge = [e.value_ms for e in h.events.of(LatencyMeasured, since=turn.start) if e.metric == "barge_in_ms"]
    turn.check("barge-in latency", bool(barge) and max(barge) < BARGE_IN_TARGET_MS, barge)
    utt = h.utterance("turn-2")
    first = "The Eiffel Tower was finished in 1889."
    turn.check(
        "only heard text committed",
        utt is not None and utt.interrupted and utt.spoken_text == first and h.assistant_text()[-1] == first,
        h.assistant_text(),
    )
    await _interrupting_question_answered(h, turn, barge_at, [first, second])
    return turn


async def _interrupting_question_answered(h: Harness, turn: Turn, barge_at: float, heard: list[str]) -> None:
    """The interrupting speech is transcribed and becomes the next turn, which is answered after
    the sentences ``heard`` before the cut."""
    await h.run(0.4)
    h.hear(
        TranscriptPartial(
            at=h.clock.monotonic(),
            session_id=SESSION,
            speaker_id="alice",
            utterance_id="u-int",
            text="Actually how tall",
            stable=True,
            audio_start=barge_at,
            audio_end=h.clock.monotonic(),
        )
    )
    await h.run(0.5)
    _say(h, "Actually, how tall is it?", began=barge_at)
    answered = await h.clock.run_until(h.finished("turn-3"))
    turn.check("interrupting question answered", answered and h.assistant_text()[-1] == ANSWER_3)
    resumed = [
        e for e in h.events.of(DialogueStateChanged, since=turn.start) if e.cause == "false_interruption"
    ]
    turn.check("no false-interruption resume", not resumed)
    played = h.played_sentences(turn.started_at)
    turn.check("playback order", played == [*heard, ANSWER_3], played)


async def memory_search(h: Harness) -> Turn:
    turn = Turn("memory_search", len(h.events), h.clock.monotonic())
    health = h.memory.health
    turn.check("memory healthy", health.ok, f"{health.code or 'ok'}: {health.reason}")
    turn.check("record stored", h.memory.record_id is not None, h.memory.record_id)
    _say(h, "How do I take my coffee?")
    done = await h.clock.run_until(h.finished("turn-4"))
    turn.check("answer finished", done)
    states = h.states(since=turn.start)
    expected = [
        "listening->thinking",
        "thinking->tool_running",
        "tool_running->thinking",
        "thinking->speaking",
        "speaking->listening",
    ]
    turn.check("state sequence", states == expected, states)
    handled = [[e.name, e.ok] for e in h.events.of(ToolCallHandled, since=turn.start)]
    turn.check("tool ran through the router", handled == [[MEMORY_SEARCH, True]], handled)
    audited = [[a.tool, a.outcome, a.duration_ms] for a in h.audit.entries if a.tool == MEMORY_SEARCH]
    # Zero virtual milliseconds: the clock stood still while the search worked on its thread.
    turn.check("search audited, no virtual time spent", audited == [[MEMORY_SEARCH, "ok", 0.0]], audited)
    back = h.chat.requests[-1][-1]
    found = json.loads(back.content).get("results", []) if back.role == "tool" else []
    turn.check(
        "stored record reaches the model",
        back.tool_call_id == "call-1"
        and [(r.get("id"), r.get("text")) for r in found[:1]] == [(h.memory.record_id, REMEMBERED)],
        back.content,
    )
    turn.check("tool offered to the model", MEMORY_SEARCH in h.chat.offered_tools[-2])
    utt = h.utterance("turn-4")
    spoken = utt.spoken_text if utt is not None else ""
    turn.check("answer spoken from the record", spoken == f"You told me this: {REMEMBERED}", spoken)
    roles = {m.role for m in h.manager.context.messages()}
    turn.check(
        "context holds the heard answer only", h.assistant_text()[-1] == spoken and "tool" not in roles
    )
    order = [
        lambda e: isinstance(e, TurnAccepted),
        lambda e: isinstance(e, ToolCallHandled),
        _state("speaking"),
    ]
    turn.check("event order", h.events.in_order(*order, since=turn.start))
    return turn
