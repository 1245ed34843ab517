"""The job repository: actions, their transitions, workspaces and the audit log.

Every status change is a compare-and-set UPDATE (``WHERE id = ? AND status = ? AND version = ?``)
committed together with its transition row *before* the caller performs the effect (write-ahead). A
running job holds a lease its executor renews; if the executor dies, the lease expires and the reaper
(or restart reconciliation of the same process) marks the job ``outcome_unknown`` instead of running
it twice. Of two racing writers only one UPDATE matches; the
other raises :class:`~openab_voice.errors.StaleTransition` with nothing written.

:class:`JobStore` is synchronous and thread-safe (one engine, one short transaction per call); async
callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Unpack

from sqlalchemy import ColumnElement, Engine, and_, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from openab_voice.clock import Clock
from openab_voice.config import ShardRange
from openab_voice.errors import StaleTransition, StoreError
from openab_voice.jobs import AWAITING_CONFIRMATION, JobEvent, JobStatus
from openab_voice.store import action_rows, lease_rows, workspace_rows
from openab_voice.store.audit_rows import add_audit, audit_entries
from openab_voice.store.convert import action_record, transition_record
from openab_voice.store.database import translate_errors
from openab_voice.store.models import Action, ActionTransition
from openab_voice.store.notify import CANCEL_CHANNEL, SettledListener
from openab_voice.store.records import (
    ActionFields,
    ActionRecord,
    AuditRecord,
    NewAction,
    TransitionRecord,
    WorkerRecord,
    WorkerState,
    WorkspaceRecord,
)

RESTART_REASON = "process restarted while running"
LEASE_EXPIRED_REASON = "its executor stopped renewing the lease while it was running"
EXPIRY_REASON = "not confirmed before it expired"


class JobStore:
    """Durable actions with compare-and-set transitions, on SQLite or PostgreSQL.

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

    # --- actions ---

    def create(self, new: NewAction) -> tuple[ActionRecord, bool]:
        """Record a proposal in status ``proposed``.

        Returns:
            The action and True, or the action already created with ``new.idempotency_key`` and False.

        Raises:
            StoreError: ``STORE_DUPLICATE`` when ``new.id`` exists under another idempotency key.
        """
        try:
            with self._transaction() as session:
                if new.idempotency_key is not None:
                    existing = action_rows.find_by_key(session, new.idempotency_key)
                    if existing is not None:
                        return existing, False
                return action_rows.insert(session, new, now=self._clock.wall()), True
        except IntegrityError:
            # PostgreSQL: a concurrent create with the same key committed first; our insert waited on
            # the unique index and then failed. (SQLite serializes writers, so the check above sees it.)
            existing = None
            if new.idempotency_key is not None:
                with self._transaction() as session:
                    existing = action_rows.find_by_key(session, new.idempotency_key)
            if existing is None:
                raise StoreError(f"action {new.id} already exists", code="STORE_DUPLICATE") from None
            return existing, False

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

    def apply(
        self,
        action_id: str,
        event: JobEvent,
        *,
        actor: str,
        reason: str = "",
        expected_version: int | None = None,
        **fields: Unpack[ActionFields],
    ) -> ActionRecord:
        """Move the action by ``event`` and set ``fields``, with its transition row, in one transaction.

        Pass ``expected_version`` (from the record the decision was based on) to turn a concurrent
        change into :class:`StaleTransition` rather than judging ``event`` against the newer status.

        Raises:
            ActionError: ``ACTION_UNKNOWN``, or ``ACTION_ILLEGAL_TRANSITION`` when the current status
                does not accept ``event``; nothing is written.
            StaleTransition: the action changed since ``expected_version`` or during this call.
        """
        values = action_rows.column_values(fields)
        with self._transaction() as session:
            return action_rows.apply_event(
                session,
                action_id,
                event,
                now=self._clock.wall(),
                actor=actor,
                reason=reason,
                expected_version=expected_version,
                values=values,
            )

    def update(
        self, action_id: str, *, expected_version: int, **fields: Unpack[ActionFields]
    ) -> ActionRecord:
        """Set ``fields`` without changing the status (e.g. the delivery outcome of a posted result).

        Raises:
            ActionError: ``ACTION_UNKNOWN``.
            StaleTransition: the action is no longer at ``expected_version``; nothing is written.
        """
        values = action_rows.column_values(fields)
        with self._transaction() as session:
            row = action_rows.compare_and_set(
                session,
                action_id,
                now=self._clock.wall(),
                version=expected_version,
                status=None,
                values=values,
            )
            if row is None:
                _, found = action_rows.status_and_version(session, action_id)
                raise action_rows.stale(action_id, expected_version, found)
            return action_record(row)

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

    # --- executor workers ---

    def claim_next(self, *, worker_id: str, lease_s: float) -> ActionRecord | None:
        """Lease the oldest ``confirmed`` action whose lease is empty or expired to ``worker_id``.

        The lease only reserves the job; the worker still moves it with ``apply(START)`` using the
        returned version. Returns None when no job is waiting.
        """
        with self._transaction() as session:
            return action_rows.claim(session, now=self._clock.wall(), worker_id=worker_id, lease_s=lease_s)

    # --- leases, restart and expiry ---

    def renew_leases(self, owner: str, action_ids: Collection[str], *, lease_s: float) -> set[str]:
        """Extend ``owner``'s leases on ``action_ids`` by ``lease_s`` from now (its heartbeat).

        Returns the ids renewed; an id missing from it was lost (reaped, or finished elsewhere), and
        its agent must be stopped. Does not move the jobs' versions.
        """
        with self._transaction() as session:
            return lease_rows.renew(
                session, now=self._clock.wall(), owner=owner, action_ids=action_ids, lease_s=lease_s
            )

    def reap_expired_leases(self, *, actor: str, exclude_owner: str | None = None) -> list[ActionRecord]:
        """Lose every ``running`` job whose lease expired: ``outcome_unknown``, its workspace quarantined.

        Each in its own transaction, and only if the lease is still expired when the UPDATE runs: a
        renewal that commits first keeps the job. ``exclude_owner`` (the caller's own owner id) is
        never reaped: the caller knows its own jobs are alive. Returns the jobs it lost.
        """
        now = self._clock.wall()
        with self._transaction() as session:
            candidates = lease_rows.expired_running(session, now=now, exclude_owner=exclude_owner)
        lost = []
        for job_id, version in candidates:
            record = self._lose(
                job_id, version, actor, LEASE_EXPIRED_REASON, where=lease_rows.still_expired(now)
            )
            if record is not None:
                lost.append(record)
        return lost

    def reconcile_after_restart(
        self,
        *,
        actor: str = "startup",
        own_lease_prefix: str | None = None,
        fail_unleased_confirmed: bool = True,
        shards: ShardRange | None = None,
    ) -> list[ActionRecord]:
        """After a restart: lose dead ``running`` jobs, fail dead confirmed ones, expire overdue proposals.

        Leases decide, not the restart. A job is dead when it has no lease (written before leases), its
        lease has expired, or its lease's owner starts with ``own_lease_prefix`` (a previous incarnation
        of the restarting process). A job whose lease another live process holds is left alone. A dead
        running job becomes ``outcome_unknown`` (never re-run: nobody knows what the agent did) and its
        workspace is quarantined, in one transaction. A dead confirmed job that never started becomes
        ``failed`` (``ACTION_NOT_STARTED``: nothing ran; its confirmation belonged to a voice session
        that is gone) when ``fail_unleased_confirmed``; a bot whose executors are remote passes False,
        since its confirmed jobs wait in the queue for a worker. Returns the actions it changed; a
        second call changes nothing. With ``shards`` (a bot pod's), confirmed jobs and proposals of
        other pods' guilds are theirs to settle: only running jobs are reconciled for every guild (a
        dead lease is dead whoever reads it).
        """
        now = self._clock.wall()
        with self._transaction() as session:
            running = lease_rows.dead_after_restart(
                session, now=now, status=JobStatus.RUNNING, owner_prefix=own_lease_prefix
            )
            confirmed = (
                lease_rows.dead_after_restart(
                    session,
                    now=now,
                    status=JobStatus.CONFIRMED,
                    owner_prefix=own_lease_prefix,
                    where=action_rows.in_shards(shards),
                )
                if fail_unleased_confirmed
                else []
            )
        lost = [
            record
            for job_id, version in running
            if (record := self._lose(job_id, version, actor, RESTART_REASON))
        ]
        unstarted = []
        for job_id, version in confirmed:
            try:
                unstarted.append(
                    self.apply(
                        job_id,
                        JobEvent.FAIL,
                        actor=actor,
                        reason="process restarted before it started; nothing ran",
                        expected_version=version,
                        error_code="ACTION_NOT_STARTED",
                    )
                )
            except StaleTransition:
                continue
        return lost + unstarted + self.expire_overdue(actor=actor, shards=shards)

    def expire_overdue(self, *, actor: str, shards: ShardRange | None = None) -> list[ActionRecord]:
        """Expire every ``proposed`` or ``delivered`` action (of the guilds on ``shards`` if given)
        whose ``expires_at`` has passed."""
        now = self._clock.wall()
        expired = []
        for job in self.in_status(*AWAITING_CONFIRMATION, shards=shards):
            if job.expires_at > now:
                continue
            try:
                expired.append(
                    self.apply(
                        job.id,
                        JobEvent.EXPIRE,
                        actor=actor,
                        reason=EXPIRY_REASON,
                        expected_version=job.version,
                    )
                )
            except StaleTransition:
                continue  # confirmed, rejected or expired by someone else meanwhile: that stands
        return expired

    def request_cancel(self, action_id: str, *, actor: str) -> bool:
        """Ask the process holding ``action_id``'s lease to cancel it (durable, audited).

        On PostgreSQL the write also notifies :data:`~openab_voice.store.notify.CANCEL_CHANNEL` at
        commit, so a listening holder cancels at once; its heartbeat reads the request
        (:meth:`cancel_requests`) either way, the fallback. The holder cancels the agent the ACP way;
        the job's status is its to write. False, with nothing written, when the job is not running.
        """
        with self._transaction() as session:
            return lease_rows.request_cancel(session, action_id, now=self._clock.wall(), actor=actor)

    def cancel_requests(self, action_ids: Collection[str]) -> set[str]:
        """Which of ``action_ids`` someone asked to cancel (:meth:`request_cancel`)."""
        with self._transaction() as session:
            return lease_rows.cancel_requests(session, action_ids)

    def listen_settled(self, on_settled: Callable[[str], None]) -> SettledListener | None:
        """A listener (not started) calling ``on_settled`` with each settled job's id, from its thread;
        None on SQLite, which has no notifications (poll instead)."""
        if self._engine.url.get_backend_name() != "postgresql":
            return None
        return SettledListener(self._engine.url, on_settled)

    def listen_cancels(self, on_cancel: Callable[[str], None]) -> SettledListener | None:
        """A listener (not started) calling ``on_cancel`` with the id of each job someone asked to
        cancel (:meth:`request_cancel`), from its thread; None on SQLite (the heartbeat reads them)."""
        if self._engine.url.get_backend_name() != "postgresql":
            return None
        return SettledListener(self._engine.url, on_cancel, channel=CANCEL_CHANNEL)

    def undelivered_results(
        self, *, owner_prefix: str, limit: int = 50, shards: ShardRange | None = None
    ) -> list[ActionRecord]:
        """Settled jobs run by owners starting with ``owner_prefix`` whose result nobody delivered yet.

        The bot with remote executors delivers these (oldest settlement first); a bot pod only those
        of its own guilds (``shards``). A job the broker itself cancelled before it ran (no
        ``detail``; its proposal was closed instead) is not one.
        """
        settled = [s.value for s in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.OUTCOME_UNKNOWN)]
        query = (
            select(Action)
            .where(
                Action.delivery_outcome.is_(None),
                Action.lease_owner.startswith(owner_prefix, autoescape=True),
                action_rows.in_shards(shards),
                or_(
                    Action.status.in_(settled),
                    and_(Action.status == JobStatus.CANCELLED.value, Action.detail.is_not(None)),
                ),
            )
            .order_by(Action.updated_at, Action.id)
            .limit(limit)
        )
        with self._transaction() as session:
            return [action_record(row) for row in session.scalars(query)]

    # --- executor workers' registry ---

    def report_worker(self, worker_id: str, *, node: str, state: WorkerState, running: int) -> None:
        """Record that ``worker_id`` is alive in ``state`` with ``running`` actions (its heartbeat)."""
        with self._transaction() as session:
            lease_rows.report_worker(
                session, now=self._clock.wall(), worker_id=worker_id, node=node, state=state, running=running
            )

    def workers(self, *, node: str | None = None) -> list[WorkerRecord]:
        """The registered workers (of ``node`` if given), the most recent heartbeat first."""
        with self._transaction() as session:
            return lease_rows.workers(session, node=node)

    # --- audit ---

    def audit(
        self,
        kind: str,
        *,
        actor: str,
        action_id: str | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> None:
        """Append an audit entry; ``detail`` must be JSON-serializable."""
        with self._transaction() as session:
            add_audit(
                session, now=self._clock.wall(), kind=kind, actor=actor, action_id=action_id, detail=detail
            )

    def audit_entries(self, *, action_id: str | None = None, kind: str | None = None) -> list[AuditRecord]:
        """Audit entries matching the filters given, oldest first."""
        with self._transaction() as session:
            return audit_entries(session, action_id=action_id, kind=kind)

    # --- workspaces ---

    def acquire_workspace(self, workspace_id: str, *, path: str, action_id: str) -> bool:
        """Hold the workspace for ``action_id``; False when it is busy or quarantined."""
        try:
            with self._transaction() as session:
                return workspace_rows.acquire(
                    session, now=self._clock.wall(), workspace_id=workspace_id, path=path, action_id=action_id
                )
        except IntegrityError:
            return False  # another action created the row first (PostgreSQL), so it holds the workspace

    def release_workspace(self, workspace_id: str, *, action_id: str) -> bool:
        """Free the workspace if ``action_id`` holds it; False otherwise (a quarantine stays)."""
        with self._transaction() as session:
            return workspace_rows.release(
                session, now=self._clock.wall(), workspace_id=workspace_id, action_id=action_id
            )

    def quarantine_workspace(
        self, workspace_id: str, *, action_id: str, reason: str, actor: str = "executor"
    ) -> None:
        """Block the workspace until :meth:`reconcile_workspace` (its contents are unknown); audited."""
        with self._transaction() as session:
            workspace_rows.quarantine(
                session,
                now=self._clock.wall(),
                workspace_id=workspace_id,
                action_id=action_id,
                reason=reason,
                actor=actor,
            )

    def reconcile_workspace(self, workspace_id: str, *, actor: str) -> bool:
        """Free a quarantined workspace once ``actor`` has checked it; audited. False if not quarantined."""
        with self._transaction() as session:
            return workspace_rows.reconcile(
                session, now=self._clock.wall(), workspace_id=workspace_id, actor=actor
            )

    def workspace(self, workspace_id: str) -> WorkspaceRecord | None:
        """The workspace, or None if the store has never seen it."""
        with self._transaction() as session:
            return workspace_rows.get(session, workspace_id)

    def quarantined_workspaces(self) -> list[WorkspaceRecord]:
        """Every quarantined workspace, oldest quarantine first."""
        with self._transaction() as session:
            return workspace_rows.quarantined(session)

    # --- internals ---

    @contextmanager
    def _transaction(self) -> Iterator[Session]:
        # Commits on normal exit, rolls back on any exception: a refused transition writes nothing.
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            yield session

    def _lose(
        self,
        job_id: str,
        version: int,
        actor: str,
        reason: str,
        *,
        where: Sequence[ColumnElement[bool]] = (),
    ) -> ActionRecord | None:
        try:
            with self._transaction() as session:
                return lease_rows.lose(
                    session,
                    job_id,
                    version=version,
                    now=self._clock.wall(),
                    actor=actor,
                    reason=reason,
                    where=where,
                )
        except StaleTransition:
            return None  # renewed, finished or reconciled by another process first: that stands
