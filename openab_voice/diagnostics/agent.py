"""``openab-voice self-test agent``: the real conversation manager on fake providers, in virtual time.

Everything but the providers is the production code: the state machine, turn policy, context,
response runner (with the real sentence segmenter), speech handles, interruption controller, the
ToolRouter (the one tool path, auditing into memory) and the real long-term memory (SQLite and the
FAISS vector file in a temporary directory, the offline MiniLM embedder) behind the real
``memory_search`` tool. The chat model, TTS and speaker are the fakes of
:mod:`openab_voice.testing.dialogue_fakes`, driven by a :class:`~openab_voice.clock.FakeClock`, so
the run is deterministic.

Virtual time and worker threads: the memory runs on worker threads (``asyncio.to_thread``: the
search's embedding, the audit write), in real time. Were the virtual clock advanced while such work
is in flight, the tool's timeout (virtual seconds) would pass in a few real milliseconds and the
search would fail as ``TOOL_TIMEOUT``, or its duration would depend on the machine's speed. So the
loop's default executor here counts the work it is given (:class:`_WorkerThreads`), and the clock is
advanced only once every piece has finished and the tasks waiting on it have run: the self-test
waits on the work's completion, never on time.

Three turns, each checked from the bus events, the context, the audit log and what the fake speaker
played:

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

Returns ``{"passed": bool, "turns": [...], "memory": {...}, "latency_ms": {...}}``; any failed check
(or a crash) makes ``passed`` False. No check is skipped or faked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Engine

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.clock import FakeClock, SystemClock, first_done
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
from openab_voice.errors import OpenabError
from openab_voice.memory.embedder import load_minilm
from openab_voice.memory.long_term import Health, LongTermMemory, MemoryKind
from openab_voice.memory.tools import MEMORY_SEARCH, register_memory_tools
from openab_voice.providers.speech import ChatMessage, ToolCall
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRows
from openab_voice.testing.dialogue_fakes import (
    FakeChatModel,
    FakeRoster,
    FakeSpeechOutput,
    FakeTextToSpeech,
    ScriptedReply,
)
from openab_voice.tools import MemoryAuditLog, ToolRouter, default_tools

__all__ = ["run_agent_self_test"]

BARGE_IN_TARGET_MS = 200.0
_ANSWER_1 = "Paris is the capital of France. It is known for the Eiffel Tower."
_ANSWER_2 = (
    "The Eiffel Tower was finished in 1889. It was built for the World's Fair. "
    "Gustave Eiffel's company designed and built it."
)
_ANSWER_3 = "It is about 330 metres tall."
_SESSION = "selftest"
_GUILD = 1
_REMEMBERED = "Alice takes her coffee black, without sugar."
_SETTLE_LIMIT_S = 60.0  # real seconds the worker threads may take, all pending work together

P = ParamSpec("P")
T = TypeVar("T")


def _memory_answer(messages: Sequence[ChatMessage]) -> ScriptedReply:
    """The model's second round: read the memory tool's result and answer from it."""
    content = json.loads(messages[-1].content) if messages[-1].role == "tool" else {}
    results = content.get("results") or [{}]
    text = str(results[0].get("text", ""))
    return ScriptedReply.text(f"You told me this: {text}" if text else "I have nothing saved about that.")


class _WorkerThreads(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, keeping the work in flight so the clock can wait for it.

    ``submit`` is called on the loop's thread (``run_in_executor``), so the set is only touched there.
    """

    def __init__(self) -> None:
        super().__init__(max_workers=4, thread_name_prefix="selftest-worker")
        self._in_flight: set[concurrent.futures.Future[Any]] = set()

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        future = super().submit(fn, *args, **kwargs)
        self._in_flight.add(future)
        return future

    async def settle(self, clock: FakeClock) -> None:
        """Return once no work is in flight and the tasks it woke have run (virtual time stands still).

        Raises:
            TimeoutError: the work took longer than ``_SETTLE_LIMIT_S`` real seconds.
        """
        while True:
            for _ in range(30):
                await clock.sleep(0)
            self._in_flight = {f for f in self._in_flight if not f.done()}
            if not self._in_flight:
                return
            waiting = [asyncio.wrap_future(f) for f in self._in_flight]
            if (
                await first_done(
                    SystemClock(), _SETTLE_LIMIT_S, asyncio.gather(*waiting, return_exceptions=True)
                )
                is None
            ):
                raise TimeoutError(f"worker threads still busy after {_SETTLE_LIMIT_S:g} s")


@dataclass
class _Turn:
    name: str
    start: int  # index into the event log where the turn began
    started_at: float  # virtual time it began
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: Any = "") -> None:
        self.checks.append({"name": name, "passed": bool(ok), "detail": detail})


class _Memory:
    """The real long-term memory in ``root``: one record saved, then reopened (the consistency check a
    restart runs). ``health`` is the check's verdict, or the error that kept it from running."""

    def __init__(self, root: Path, clock: FakeClock) -> None:
        self.memory: LongTermMemory | None = None
        self.record_id: int | None = None
        self._engine: Engine | None = None
        try:
            url = f"sqlite:///{root / 'selftest.db'}"
            upgrade(url)
            self._engine = open_engine(url)
            self.memory = LongTermMemory(
                MemoryRows(self._engine), load_minilm(), path=root / "memory-vectors.bin", clock=clock
            )
            self.health = self.memory.open()
            if self.health.ok:
                saved = self.memory.save(
                    guild_id=_GUILD,
                    kind=MemoryKind.PREFERENCE,
                    text=_REMEMBERED,
                    speaker_id="alice",
                    source="selftest",
                )
                self.record_id = getattr(saved, "id", None)
                self.memory.close()
                self.health = self.memory.open()
        except OpenabError as exc:  # FAISS or the embedder missing: the check could not run
            self.health = Health(code=exc.code, reason=exc.message, records=0, seconds=0.0)

    def report(self) -> dict[str, Any]:
        h = self.health
        return {"code": h.code, "reason": h.reason, "records": h.records, "record_id": self.record_id}

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        if self._engine is not None:
            self._engine.dispose()


class _Harness:
    def __init__(self, root: Path) -> None:
        self.clock = FakeClock()
        self.workers = _WorkerThreads()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.chat = FakeChatModel(
            self.clock,
            [
                ScriptedReply.text(_ANSWER_1),
                ScriptedReply.text(_ANSWER_2, delay_s=0.15),
                ScriptedReply.text(_ANSWER_3),
                ScriptedReply.tool(
                    ToolCall(id="call-1", name=MEMORY_SEARCH, arguments='{"query": "how Alice takes coffee"}')
                ),
                _memory_answer,
            ],
        )
        self.memory = _Memory(root, self.clock)
        registry = default_tools(self.clock)
        if self.memory.memory is not None:
            register_memory_tools(registry, self.memory.memory, guild_id=_GUILD)
        self.audit = MemoryAuditLog()
        self.tts = FakeTextToSpeech(self.clock)
        self.output = FakeSpeechOutput(self.clock)
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            chat=self.chat,
            tts=self.tts,
            output=self.output,
            # The one tool path, as a session's: the router, auditing into memory (no job store here).
            tools=ToolRouter(registry, clock=self.clock, audit=self.audit),
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


async def drive(h: _Harness, seconds: float, *, step: float = 0.01) -> None:
    """Advance virtual time by ``seconds`` in ``step``s, each only once the worker threads are idle."""
    for _ in range(max(1, round(seconds / step))):
        await h.workers.settle(h.clock)
        h.clock.advance(step)
    await h.workers.settle(h.clock)


async def run_until(h: _Harness, predicate: Callable[[], bool], *, limit_s: float = 30.0) -> bool:
    """Advance virtual time until ``predicate()`` holds (True) or ``limit_s`` passed (False)."""
    await h.workers.settle(h.clock)
    elapsed, step = 0.0, 0.01
    while not predicate():
        if elapsed >= limit_s:
            return False
        await drive(h, step, step=step)
        elapsed += step
    return True


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
    done = await run_until(h, h.finished("turn-1"))
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
    playing = await run_until(h, lambda: second in h.played_sentences())
    turn.check("second sentence playing", playing)
    await drive(h, 0.2)
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
    stopped = await run_until(h, lambda: h.manager.state is DialogueState.LISTENING, limit_s=1.0)
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
    await drive(h, 0.4)
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
    await drive(h, 0.5)
    h.say("Actually, how tall is it?", began=barge_at)
    answered = await run_until(h, h.finished("turn-3"))
    turn.check("interrupting question answered", answered and h.assistant_text()[-1] == _ANSWER_3)
    resumed = [e for e in h.since(turn.start, DialogueStateChanged) if e.cause == "false_interruption"]
    turn.check("no false-interruption resume", not resumed)
    played = h.played_sentences(turn.started_at)
    turn.check("playback order", played == [first, second, _ANSWER_3], played)
    return turn


async def _memory_search(h: _Harness) -> _Turn:
    turn = _Turn("memory_search", len(h.events), h.clock.monotonic())
    health = h.memory.health
    turn.check("memory healthy", health.ok, f"{health.code or 'ok'}: {health.reason}")
    turn.check("record stored", h.memory.record_id is not None, h.memory.record_id)
    h.say("How do I take my coffee?")
    done = await run_until(h, h.finished("turn-4"))
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
    handled = [[e.name, e.ok] for e in h.since(turn.start, ToolCallHandled)]
    turn.check("tool ran through the router", handled == [[MEMORY_SEARCH, True]], handled)
    audited = [[a.tool, a.outcome, a.duration_ms] for a in h.audit.entries if a.tool == MEMORY_SEARCH]
    # Zero virtual milliseconds: the clock stood still while the search worked on its thread.
    turn.check("search audited, no virtual time spent", audited == [[MEMORY_SEARCH, "ok", 0.0]], audited)
    back = h.chat.requests[-1][-1]
    found = json.loads(back.content).get("results", []) if back.role == "tool" else []
    turn.check(
        "stored record reaches the model",
        back.tool_call_id == "call-1"
        and [(r.get("id"), r.get("text")) for r in found[:1]] == [(h.memory.record_id, _REMEMBERED)],
        back.content,
    )
    turn.check("tool offered to the model", MEMORY_SEARCH in h.chat.offered_tools[-2])
    utt = h.utterance("turn-4")
    spoken = utt.spoken_text if utt is not None else ""
    turn.check("answer spoken from the record", spoken == f"You told me this: {_REMEMBERED}", spoken)
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


async def _run(root: Path) -> dict[str, Any]:
    h = _Harness(root)
    # Every to_thread of the run (memory search, audit write) goes to the executor the clock waits on.
    asyncio.get_running_loop().set_default_executor(h.workers)
    turns: list[dict[str, Any]] = []
    try:
        async with h.output:
            await h.manager.start()
            try:
                for scenario in (_question_answer, _interruption, _memory_search):
                    turn = await scenario(h)
                    turns.append(_report(h, turn, len(h.events)))
            finally:
                await h.manager.aclose()
    finally:
        h.memory.close()
    errors = [f"{e.code}: {e.message}" for e in h.events if isinstance(e, ErrorRaised)]
    latency: dict[str, list[float]] = {}
    for e in h.events:
        if isinstance(e, LatencyMeasured):
            latency.setdefault(e.metric, []).append(round(e.value_ms, 1))
    return {
        "passed": bool(turns) and all(t["passed"] for t in turns) and not errors,
        "turns": turns,
        "errors": errors,
        "memory": h.memory.report(),
        "context": h.manager.context.dump(),
        "latency_ms": latency,
    }


def run_agent_self_test() -> dict[str, Any]:
    """Run the three-turn agent self-test; see the module docstring."""
    try:
        with tempfile.TemporaryDirectory(prefix="openab-selftest-") as root:
            return asyncio.run(_run(Path(root)))
    except Exception as exc:  # a crash is a failed self-test, reported like any other failure
        return {"passed": False, "turns": [], "errors": [f"{type(exc).__name__}: {exc}"]}
