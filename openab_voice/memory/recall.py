"""The conversation's view of long-term memory: :class:`MemoryContext` is the engine's
:class:`~openab_voice.engine.context.MemoryRecall` for one voice session's guild."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from openab_voice.memory.long_term import LongTermMemory
from openab_voice.settings.defaults import default_of
from openab_voice.settings.store import StoreSettings

__all__ = ["MemoryContext"]


class MemoryContext:
    """Top-k memories of ``guild_id`` for a turn, each as ``<kind>: <text> (saved by <name>)``.

    Args:
        name_of: a speaker's display name from their id.
    """

    def __init__(
        self,
        memory: LongTermMemory,
        *,
        guild_id: int,
        top_k: int = default_of(StoreSettings, "memory_top_k"),
        name_of: Callable[[str], str] | None = None,
    ) -> None:
        self._memory = memory
        self._guild_id = guild_id
        self._top_k = top_k
        self._name_of = name_of

    async def recall(self, *, speaker_id: str | None, text: str) -> Sequence[str]:
        hits = await asyncio.to_thread(
            self._memory.search, guild_id=self._guild_id, query=text, k=self._top_k
        )
        lines = []
        for hit in hits:
            record = hit.record
            who = self._name_of(record.speaker_id) if self._name_of is not None else record.speaker_id
            lines.append(f"{record.kind}: {record.text} (saved by {who})")
        return lines
