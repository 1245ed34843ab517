"""Writing the job store: proposals, compare-and-set transitions, expiry, workspaces and the audit log.

Every status change is a compare-and-set UPDATE (``WHERE id = ? AND status = ? AND version = ?``)
committed together with its transition row *before* the caller performs the effect (write-ahead). Of
two racing writers only one UPDATE matches; the other raises
:class:`~openab_voice.errors.StaleTransition` with nothing written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from sqlalchemy.exc import IntegrityError

from openab_voice.errors import ErrorCode, StaleTransition, StoreError
from openab_voice.jobs import AWAITING_CONFIRMATION, JobEvent
from openab_voice.shards import ShardRange
from openab_voice.store import action_rows, workspace_rows
from openab_voice.store.audit_rows import add_audit
from openab_voice.store.convert import action_record
from openab_voice.store.job_queries import JobQueries
from openab_voice.store.records import ActionFields, ActionRecord, NewAction

EXPIRY_REASON = "not confirmed before it expired"


class JobTransitions(JobQueries):
    """The store's writes, each in one transaction: an action's status and fields, its workspace, its audit."""

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
                raise StoreError(f"action {new.id} already exists", code=ErrorCode.STORE_DUPLICATE) from None
            return existing, False

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
