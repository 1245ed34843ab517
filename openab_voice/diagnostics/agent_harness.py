"""The agent self-test's stage: the real conversation manager on fake providers, in virtual time.

Everything but the providers is the production code (see :mod:`openab_voice.diagnostics.agent`);
the stage is the conversation rig of the tests (:class:`~openab_voice.testing.rig.Rig`: the fakes of
:mod:`openab_voice.testing.dialogue_fakes` on a self-advancing virtual clock), with the one tool path
of a session and the real long-term memory in a temporary directory.

Virtual time and worker threads: the memory runs on worker threads (``asyncio.to_thread``: the
search's embedding, the audit write), in real time. So the rig's clock waits for that work
(:class:`~openab_voice.testing.virtual_time.WorkerThreads`, the loop's default executor while the
rig runs: ``Rig(threads=True)``) before it moves: the tool's timeout in virtual seconds cannot pass in a few real
milliseconds, and the self-test waits on the work's completion, never on time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from openab_voice.clock import FakeClock
from openab_voice.errors import OpenabError
from openab_voice.memory.embedder import load_minilm
from openab_voice.memory.long_term import Health, LongTermMemory, MemoryKind
from openab_voice.memory.tools import MEMORY_SEARCH, register_memory_tools
from openab_voice.providers.chat import ChatMessage, ToolCall
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRows
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig
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


def _memory_answer(messages: Sequence[ChatMessage]) -> ScriptedReply:
    """The model's second round: read the memory tool's result and answer from it."""
    content = json.loads(messages[-1].content) if messages[-1].role == "tool" else {}
    results = content.get("results") or [{}]
    text = str(results[0].get("text", ""))
    return ScriptedReply.text(f"You told me this: {text}" if text else "I have nothing saved about that.")


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


class Harness(Rig):
    """The rig with the self-test's script of replies, the memory tools and the audit log."""

    memory: Memory

    def __init__(self, root: Path) -> None:
        self.audit = MemoryAuditLog()

        def tools(clock: FakeClock) -> ToolRouter:
            self.memory = Memory(root, clock)
            registry = default_tools(clock)
            if self.memory.memory is not None:
                register_memory_tools(registry, self.memory.memory, guild_id=_GUILD)
            # The one tool path, as a session's: the router, auditing into memory (no job store here).
            return ToolRouter(registry, clock=clock, audit=self.audit)

        super().__init__(
            replies=[
                ScriptedReply.text(ANSWER_1),
                ScriptedReply.text(ANSWER_2, delay_s=0.15),
                ScriptedReply.text(ANSWER_3),
                ScriptedReply.tool(
                    ToolCall(id="call-1", name=MEMORY_SEARCH, arguments='{"query": "how Alice takes coffee"}')
                ),
                _memory_answer,
            ],
            tools=tools,
            session_id=SESSION,
            threads=True,
        )

    def assistant_text(self) -> list[str]:
        return [row["text"] for row in self.manager.context.dump() if row["role"] == "assistant"]
