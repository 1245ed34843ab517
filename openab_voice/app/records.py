"""The record plane's long-lived parts: the job store's database opened (and migrated) for what the
bot records outside the action plane: the ToolRouter's audit (``tool_calls``, whenever the spoken
dialogue can call a tool), the voice sessions' transcripts (``OPENAB_TRANSCRIPT_STORE``) and long-term
memory (``OPENAB_MEMORY_ENABLED``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings
from openab_voice.memory.embedder import load_minilm
from openab_voice.memory.long_term import Health, LongTermMemory
from openab_voice.settings.defaults import default_of
from openab_voice.settings.store import StoreSettings
from openab_voice.store.database import open_engine, resolve_url, upgrade
from openab_voice.store.memory_rows import MemoryRows
from openab_voice.store.tool_calls import ToolCallLog
from openab_voice.store.transcripts import TranscriptStore

__all__ = ["RecordParts", "build_record_parts", "rebuild_memory", "tools_audited", "vectors_path"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordParts:
    """What :func:`build_record_parts` made; whoever built it calls :meth:`close`.

    Attributes:
        tool_calls: where the ToolRouter's audit rows go (None: no audit, so the router runs no tool).
        transcripts: the stored transcripts (None: not stored).
        retention_s: how long a stored voice session is kept.
        memory: long-term memory, opened and checked (None: off, nothing read or written).
        memory_top_k: memories given to the model per turn.
    """

    engine: Engine
    tool_calls: ToolCallLog | None = None
    transcripts: TranscriptStore | None = None
    retention_s: float | None = None
    memory: LongTermMemory | None = None
    memory_top_k: int = default_of(StoreSettings, "memory_top_k")

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        self.engine.dispose()


def tools_audited(settings: Settings) -> bool:
    """Whether a session may call tools and so needs their audit log: the router is on, and speech is
    transcribed (tools are called only by the spoken dialogue, which needs transcripts; a bot that
    transcribes nothing calls no tool and opens no database for one)."""
    return settings.tool_router_enabled and settings.transcription_enabled


def vectors_path(settings: Settings) -> Path:
    """The memory's vector file: ``OPENAB_MEMORY_VECTORS_PATH``, else beside the SQLite store."""
    return settings.memory_vectors_path or settings.data_dir.expanduser() / "memory-vectors.bin"


def _memory(settings: Settings, engine: Engine, clock: Clock) -> LongTermMemory:
    return LongTermMemory(
        MemoryRows(engine),
        load_minilm(),
        path=vectors_path(settings),
        clock=clock,
        min_score=settings.memory_min_score,
    )


def build_record_parts(settings: Settings, *, clock: Clock | None = None) -> RecordParts | None:
    """The database (SQLite in the data directory by default) migrated to head, when something
    records; None when nothing does. Long-term memory is opened and checked here: a failed check is
    logged as an error and leaves the memory returning nothing until it is rebuilt.

    Raises:
        StoreError: the database is unreachable or cannot be migrated.
        ProviderUnavailable: memory is on but its embedder or faiss-cpu is not installed.
    """
    audited = tools_audited(settings)
    if not (audited or settings.transcript_store or settings.memory_enabled):
        return None
    url = resolve_url(settings)
    upgrade(url)
    engine = open_engine(url)
    memory = None
    if settings.memory_enabled:
        memory = _memory(settings, engine, clock or SystemClock())
        health = memory.open()
        if health.ok:
            log.info("memory: %s in %.2f s", health.reason, health.seconds)
        else:
            log.error(
                "memory: %s (%s); nothing is recalled until `openab-voice memory rebuild`",
                health.reason,
                health.code,
            )
    return RecordParts(
        engine=engine,
        tool_calls=ToolCallLog(engine) if audited else None,
        transcripts=TranscriptStore(engine) if settings.transcript_store else None,
        retention_s=settings.transcript_retention_days * 86_400.0,
        memory=memory,
        memory_top_k=settings.memory_top_k,
    )


def rebuild_memory(settings: Settings) -> Health:
    """``openab-voice memory rebuild``: re-embed every verified record and rewrite the vector file.

    Raises:
        StoreError: the database is unreachable or cannot be migrated.
        ProviderUnavailable: the embedder or faiss-cpu is not installed.
    """
    url = resolve_url(settings)
    upgrade(url)
    engine = open_engine(url)
    try:
        memory = _memory(settings, engine, SystemClock())
        try:
            return memory.rebuild()
        finally:
            memory.close()
    finally:
        engine.dispose()
