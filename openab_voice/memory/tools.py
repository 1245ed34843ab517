"""The memory tools the voice model gets: ``memory_search(query)`` and ``memory_save(text, kind)``.

The guild comes from the voice session and the speaker from the tool call's trusted context (SSRC
attribution), never from the model's arguments: what a speaker said is saved under that speaker.
A refused save is a result the model reads (``saved: false`` and the reason), so it can tell the
speaker why.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Final

from openab_voice.memory.long_term import LongTermMemory, MemoryHit, MemoryKind, SaveRefused
from openab_voice.providers.chat import ToolSpec
from openab_voice.settings.defaults import default_of
from openab_voice.settings.store import StoreSettings
from openab_voice.tools.registry import ToolContext, ToolRegistry

__all__ = ["MEMORY_SAVE", "MEMORY_SEARCH", "SPECS", "hit_payload", "register_memory_tools"]

MEMORY_SEARCH: Final = "memory_search"
MEMORY_SAVE: Final = "memory_save"

SPECS: Final = (
    ToolSpec(
        name=MEMORY_SEARCH,
        description="Search what you were asked to remember in this server (preferences, facts, projects).",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for, in a few words."}},
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=MEMORY_SAVE,
        description=(
            "Remember something the current speaker asked you to remember. Never save passwords, keys, "
            "payment data or ID numbers: such a save is refused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The fact, in one sentence."},
                "kind": {"type": "string", "enum": [k.value for k in MemoryKind]},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    ),
)


def hit_payload(hit: MemoryHit) -> dict[str, Any]:
    record = hit.record
    return {
        "id": record.id,
        "kind": record.kind,
        "text": record.text,
        "speaker_id": record.speaker_id,
        "saved": datetime.fromtimestamp(record.created_at, tz=UTC).date().isoformat(),
        "score": round(hit.score, 3),
    }


def register_memory_tools(
    registry: ToolRegistry,
    memory: LongTermMemory,
    *,
    guild_id: int,
    top_k: int = default_of(StoreSettings, "memory_top_k"),
) -> None:
    """Add the two memory tools, bound to ``memory`` and this session's guild."""

    async def search(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        hits = await asyncio.to_thread(
            memory.search, guild_id=guild_id, query=str(arguments["query"]), k=top_k
        )
        result: dict[str, Any] = {"results": [hit_payload(hit) for hit in hits]}
        if not memory.health.ok:
            result["unavailable"] = memory.health.reason
        return result

    async def save(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        if context.speaker_id is None:
            return {"saved": False, "reason": "only what a known speaker said can be saved"}
        kind = MemoryKind(arguments.get("kind", MemoryKind.FACT.value))
        outcome = await asyncio.to_thread(
            memory.save,
            guild_id=guild_id,
            kind=kind,
            text=str(arguments["text"]),
            speaker_id=context.speaker_id,
            source="tool",
        )
        if isinstance(outcome, SaveRefused):
            return {"saved": False, "reason": outcome.reason}
        return {"saved": True, "id": outcome.id, "kind": outcome.kind}

    registry.register(SPECS[0], search)
    registry.register(SPECS[1], save)
