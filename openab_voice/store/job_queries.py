"""Reading the job store: actions, their transitions, workspaces and audit entries as frozen records.

:class:`JobQueries` also owns what every part of :class:`~openab_voice.store.jobs.JobStore` shares:
the engine, the clock and one short transaction per call (committed on normal exit, rolled back on
any exception, so a refused write leaves nothing behind).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from openab_voice.clock import Clock
from openab_voice.jobs import JobStatus
from openab_voice.shards import ShardRange
from openab_voice.store import action_rows, workspace_rows
from openab_voice.store.audit_rows import audit_entries
from openab_voice.store.convert import action_record, transition_record
from openab_voice.store.database import translate_errors
from openab_voice.store.models import Action, ActionTransition
from openab_voice.store.records import ActionRecord, AuditRecord, TransitionRecord, WorkspaceRecord


class JobQueries:
    """The store's reads, and its engine, clock and transactions.

    Args:
        engine: From :func:`openab_voice.store.database.open_engine`, migrated to head.
        clock: Source of every timestamp (``wall``) the store writes.
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def close(self) -> None:
        """Release the engine's connections (the store is unusable afterwards). Idempotent."""
        self._engine.dispose()

    def get(self, action_id: str) -> ActionRecord | None:
        """The action, or None if there is none with this id."""
        with self._transaction() as session:
            row = session.get(Action, action_id)
            return None if row is None else action_record(row)

    def require(self, action_id: str) -> ActionRecord:
        """The action.

        Raises:
            ActionError: ``ACTION_UNKNOWN`` if there is none with this id.
        """
        record = self.get(action_id)
        if record is None:
            raise action_rows.unknown(action_id)
        return record

    def recent(self, *, guild_id: int | None = None, limit: int = 10) -> list[ActionRecord]:
        """The newest actions, of one guild if ``guild_id`` is given, newest first."""
        query = select(Action).order_by(Action.created_at.desc(), Action.id.desc()).limit(limit)
        if guild_id is not None:
            query = query.where(Action.guild_id == guild_id)
        with self._transaction() as session:
            return [action_record(row) for row in session.scalars(query)]

    def in_status(self, *statuses: JobStatus, shards: ShardRange | None = None) -> list[ActionRecord]:
        """Actions in any of ``statuses`` (of the guilds on ``shards`` if given), oldest first."""
        query = (
            select(Action)
            .where(Action.status.in_([status.value for status in statuses]), action_rows.in_shards(shards))
            .order_by(Action.created_at, Action.id)
        )
        with self._transaction() as session:
            return [action_record(row) for row in session.scalars(query)]

    def transitions(self, action_id: str) -> list[TransitionRecord]:
        """The action's status changes in the order they were written (creation first)."""
        query = (
            select(ActionTransition)
            .where(ActionTransition.action_id == action_id)
            .order_by(ActionTransition.id)
        )
        with self._transaction() as session:
            return [transition_record(row) for row in session.scalars(query)]

    def audit_entries(self, *, action_id: str | None = None, kind: str | None = None) -> list[AuditRecord]:
        """Audit entries matching the filters given, oldest first."""
        with self._transaction() as session:
            return audit_entries(session, action_id=action_id, kind=kind)

    def workspace(self, workspace_id: str) -> WorkspaceRecord | None:
        """The workspace, or None if the store has never seen it."""
        with self._transaction() as session:
            return workspace_rows.get(session, workspace_id)

    def quarantined_workspaces(self) -> list[WorkspaceRecord]:
        """Every quarantined workspace, oldest quarantine first."""
        with self._transaction() as session:
            return workspace_rows.quarantined(session)

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        # Commits on normal exit, rolls back on any exception: a refused transition writes nothing.
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            yield session
