"""The agent self-test's stage: the real conversation manager on fake providers, in virtual time.

Everything but the providers is the production code (see :mod:`openab_voice.diagnostics.agent`);
the chat model, TTS and speaker are the fakes of :mod:`openab_voice.testing.dialogue_fakes`, driven
by a :class:`~openab_voice.clock.FakeClock`, and the real long-term memory lives in a temporary
directory.

Virtual time and worker threads: the memory runs on worker threads (``asyncio.to_thread``: the
search's embedding, the audit write), in real time. Were the virtual clock advanced while such work
is in flight, the tool's timeout (virtual seconds) would pass in a few real milliseconds and the
search would fail as ``TOOL_TIMEOUT``, or its duration would depend on the machine's speed. So the
loop's default executor here counts the work it is given (:class:`WorkerThreads`), and the clock is
advanced only once every piece has finished and the tasks waiting on it have run: the self-test
waits on the work's completion, never on time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Engine

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock, SystemClock, first_done
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.errors import OpenabError
from openab_voice.memory.embedder import load_minilm
from openab_voice.memory.long_term import Health, LongTermMemory, MemoryKind
from openab_voice.memory.tools import MEMORY_SEARCH, register_memory_tools
from openab_voice.providers.speech import ChatMessage, ToolCall
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRows
from openab_voice.stt.events import TranscriptFinal, TranscriptPartial
from openab_voice.testing.dialogue_fakes import (
    FakeChatModel,
    FakeRoster,
    FakeSpeechOutput,
    FakeTextToSpeech,
    ScriptedReply,
)
from openab_voice.tools import MemoryAuditLog, ToolRouter, default_tools

ANSWER_1 = "Paris is the capital of France. It is known for the Eiffel Tower."
ANSWER_2 = (
    "The Eiffel Tower was finished in 1889. It was built for the World's Fair. "
    "Gustave Eiffel's company designed and built it."
)
ANSWER_3 = "It is about 330 metres tall."
SESSION = "selftest"
_GUILD = 1
REMEMBERED = "Alice takes her coffee black, without sugar."
_SETTLE_LIMIT_S = 60.0  # real seconds the worker threads may take, all pending work together

P = ParamSpec("P")
T = TypeVar("T")


def _memory_answer(messages: Sequence[ChatMessage]) -> ScriptedReply:
    """The model's second round: read the memory tool's result and answer from it."""
    content = json.loads(messages[-1].content) if messages[-1].role == "tool" else {}
    results = content.get("results") or [{}]
    text = str(results[0].get("text", ""))
    return ScriptedReply.text(f"You told me this: {text}" if text else "I have nothing saved about that.")


class WorkerThreads(concurrent.futures.ThreadPoolExecutor):
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


class Memory:
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
                    text=REMEMBERED,
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


class Harness:
    def __init__(self, root: Path) -> None:
        self.clock = FakeClock()
        self.workers = WorkerThreads()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.chat = FakeChatModel(
            self.clock,
            [
                ScriptedReply.text(ANSWER_1),
                ScriptedReply.text(ANSWER_2, delay_s=0.15),
                ScriptedReply.text(ANSWER_3),
                ScriptedReply.tool(
                    ToolCall(id="call-1", name=MEMORY_SEARCH, arguments='{"query": "how Alice takes coffee"}')
                ),
                _memory_answer,
            ],
        )
        self.memory = Memory(root, self.clock)
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
            session_id=SESSION,
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
                session_id=SESSION,
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


async def drive(h: Harness, seconds: float, *, step: float = 0.01) -> None:
    """Advance virtual time by ``seconds`` in ``step``s, each only once the worker threads are idle."""
    for _ in range(max(1, round(seconds / step))):
        await h.workers.settle(h.clock)
        h.clock.advance(step)
    await h.workers.settle(h.clock)


async def run_until(h: Harness, predicate: Callable[[], bool], *, limit_s: float = 30.0) -> bool:
    """Advance virtual time until ``predicate()`` holds (True) or ``limit_s`` passed (False)."""
    await h.workers.settle(h.clock)
    elapsed, step = 0.0, 0.01
    while not predicate():
        if elapsed >= limit_s:
            return False
        await drive(h, step, step=step)
        elapsed += step
    return True
