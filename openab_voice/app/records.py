"""The record plane's long-lived parts: the job store's database opened (and migrated) for what the
bot records outside the action plane: the ToolRouter's audit (``OPENAB_TOOL_ROUTER_ENABLED``) and the
voice sessions' transcripts (``OPENAB_TRANSCRIPT_STORE``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from openab_voice.config import Settings
from openab_voice.store.database import open_engine, resolve_url, upgrade
from openab_voice.store.tool_calls import ToolCallLog
from openab_voice.store.transcripts import TranscriptStore
from openab_voice.tools.router import RouterSettings

__all__ = ["RecordParts", "build_record_parts", "router_settings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordParts:
    """What :func:`build_record_parts` made; whoever built it calls :meth:`close`.

    Attributes:
        router: the ToolRouter's budgets (None: tool calls go to the registry directly).
        tool_calls: where the router's audit rows go.
        transcripts: the stored transcripts (None: not stored).
        retention_s: how long a stored voice session is kept.
    """

    engine: Engine
    router: RouterSettings | None = None
    tool_calls: ToolCallLog | None = None
    transcripts: TranscriptStore | None = None
    retention_s: float | None = None

    def close(self) -> None:
        self.engine.dispose()


def router_settings(settings: Settings) -> RouterSettings:
    return RouterSettings(
        max_calls_per_turn=settings.tool_max_calls_per_turn,
        max_proposals_per_turn=settings.tool_max_proposals_per_turn,
        max_runtime_s_per_turn=settings.tool_max_runtime_s_per_turn,
        max_output_chars=settings.tool_max_output_chars,
    )


def build_record_parts(settings: Settings) -> RecordParts | None:
    """The database (SQLite in the data directory by default) migrated to head, when something
    records; None when nothing does.

    Raises:
        StoreError: the database is unreachable or cannot be migrated.
    """
    if not (settings.tool_router_enabled or settings.transcript_store):
        return None
    url = resolve_url(settings)
    upgrade(url)
    engine = open_engine(url)
    routed = settings.tool_router_enabled
    return RecordParts(
        engine=engine,
        router=router_settings(settings) if routed else None,
        tool_calls=ToolCallLog(engine) if routed else None,
        transcripts=TranscriptStore(engine) if settings.transcript_store else None,
        retention_s=settings.transcript_retention_days * 86_400.0,
    )
