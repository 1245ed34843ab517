"""The tool-call audit: one ``tool_calls`` row per call the ToolRouter saw, in the job store's database.

:class:`ToolCallLog` is the router's :class:`~openab_voice.tools.router.ToolAuditLog`. Synchronous and
thread-safe like :class:`~openab_voice.store.jobs.JobStore` (the router writes from a worker thread).
"""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import sessionmaker

from openab_voice.store.database import translate_errors
from openab_voice.store.models import ToolCallRow
from openab_voice.tools.router import Confirmation, ToolCallAudit, ToolRisk

__all__ = ["ToolCallLog"]


class ToolCallLog:
    """Audit rows of tool calls.

    Args:
        engine: from :func:`openab_voice.store.database.open_engine`, migrated to head. The caller
            owns it.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def record(self, entry: ToolCallAudit) -> None:
        """Write one audit row.

        Raises:
            StoreError: ``STORE_UNAVAILABLE`` when the database cannot be reached.
        """
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            session.add(
                ToolCallRow(
                    at=entry.at,
                    session_id=entry.session_id,
                    turn_id=entry.turn_id,
                    call_id=entry.call_id,
                    tool=entry.tool,
                    risk=None if entry.risk is None else entry.risk.value,
                    speaker_id=entry.speaker_id,
                    confirmation=entry.confirmation.value,
                    outcome=entry.outcome,
                    duration_ms=entry.duration_ms,
                    truncated=entry.truncated,
                    summary=entry.summary,
                )
            )

    def entries(self, *, session_id: str | None = None, limit: int = 1000) -> list[ToolCallAudit]:
        """Audit rows, oldest first (of one voice session when given)."""
        query = select(ToolCallRow).order_by(ToolCallRow.id).limit(limit)
        if session_id is not None:
            query = query.where(ToolCallRow.session_id == session_id)
        with translate_errors(self._engine.url), self._sessions() as session:
            return [_entry(row) for row in session.scalars(query)]


def _entry(row: ToolCallRow) -> ToolCallAudit:
    return ToolCallAudit(
        at=row.at,
        session_id=row.session_id,
        turn_id=row.turn_id,
        call_id=row.call_id,
        tool=row.tool,
        risk=None if row.risk is None else ToolRisk(row.risk),
        speaker_id=row.speaker_id,
        confirmation=Confirmation(row.confirmation),
        outcome=row.outcome,
        duration_ms=row.duration_ms,
        truncated=row.truncated,
        summary=dict(row.summary),
    )
