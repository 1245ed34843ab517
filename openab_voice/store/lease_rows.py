"""Leases inside a caller's transaction: renewal, expiry, losing a job, and the worker registry.

A job's lease (``actions.lease_owner``, ``actions.lease_until``) is written when it is claimed or
started and renewed by its owner's heartbeat. Renewal does not move the job's ``version``: the version
is the compare-and-set token of status changes, and an executor settles with the version it started
with. The race between a renewal and the reaper is decided by the rows' own conditions instead: the
reaper's UPDATE requires ``lease_until <= now`` and a renewal requires the status still ``running`` (or
``confirmed``), so whichever commits first wins and the other matches no row (PostgreSQL re-reads the
row after the first commit under READ COMMITTED; SQLite's ``BEGIN IMMEDIATE`` runs them one at a time).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from openab_voice.errors import ErrorCode
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store import action_rows, workspace_rows
from openab_voice.store.audit_rows import add_audit
from openab_voice.store.models import Action, AuditEntry, ExecutorWorker
from openab_voice.store.notify import notify_cancel_requested
from openab_voice.store.records import ActionRecord, WorkerRecord, WorkerState

_LEASED = (JobStatus.CONFIRMED.value, JobStatus.RUNNING.value)
# The audit kind of a cancel asked of whoever holds a running job's lease: the request is durable, and
# its holder's heartbeat reads it.
CANCEL_REQUESTED = "action.cancel_requested"


def renew(
    session: Session, *, now: float, owner: str, action_ids: Collection[str], lease_s: float
) -> set[str]:
    """Extend ``owner``'s leases on ``action_ids``; the ids renewed (a missing one was lost)."""
    if not action_ids:
        return set()
    renewed = session.scalars(
        update(Action)
        .where(
            Action.id.in_(list(action_ids)),
            Action.lease_owner == owner,
            Action.status.in_(_LEASED),
        )
        .values(lease_until=now + lease_s)
        .returning(Action.id)
    )
    return set(renewed)


def expired_running(session: Session, *, now: float, exclude_owner: str | None) -> list[tuple[str, int]]:
    """``(id, version)`` of every running job whose lease has expired (not ``exclude_owner``'s)."""
    conditions: list[ColumnElement[bool]] = [
        Action.status == JobStatus.RUNNING.value,
        Action.lease_until.is_not(None),
        Action.lease_until <= now,
    ]
    if exclude_owner is not None:
        conditions.append(Action.lease_owner != exclude_owner)
    query = select(Action.id, Action.version).where(*conditions).order_by(Action.created_at, Action.id)
    return [(row.id, row.version) for row in session.execute(query)]


def dead_after_restart(
    session: Session,
    *,
    now: float,
    status: JobStatus,
    owner_prefix: str | None,
    where: ColumnElement[bool] | None = None,
) -> list[tuple[str, int]]:
    """``(id, version)`` of jobs in ``status`` that no live process holds after a restart.

    Those are the jobs without a lease (written before leases, or confirmed and never started here),
    whose lease has expired, or whose lease belongs to a previous incarnation of the restarting process
    (``owner_prefix``): it is gone, whatever its lease says.
    """
    dead: list[ColumnElement[bool]] = [Action.lease_owner.is_(None), Action.lease_until <= now]
    if owner_prefix is not None:
        dead.append(Action.lease_owner.startswith(owner_prefix, autoescape=True))
    query = (
        select(Action.id, Action.version)
        .where(Action.status == status.value, or_(*dead))
        .order_by(Action.created_at, Action.id)
    )
    if where is not None:
        query = query.where(where)
    return [(row.id, row.version) for row in session.execute(query)]


def lose(
    session: Session,
    action_id: str,
    *,
    version: int,
    now: float,
    actor: str,
    reason: str,
    where: Sequence[ColumnElement[bool]] = (),
) -> ActionRecord:
    """``running → outcome_unknown`` and quarantine its workspace, in the caller's transaction.

    Raises:
        StaleTransition: the job changed since ``version`` or no longer meets ``where``.
    """
    record = action_rows.apply_event(
        session,
        action_id,
        JobEvent.LOSE,
        now=now,
        actor=actor,
        reason=reason,
        expected_version=version,
        values={"error_code": ErrorCode.ACTION_LOST, "detail": reason},
        where=where,
    )
    if record.workspace_id is not None:
        workspace_rows.quarantine(
            session,
            now=now,
            workspace_id=record.workspace_id,
            action_id=record.id,
            reason=reason,
            actor=actor,
        )
    return record


def still_expired(now: float) -> list[ColumnElement[bool]]:
    """The reaper's compare-and-set conditions: the lease it judged expired has not been renewed."""
    return [Action.lease_until.is_not(None), Action.lease_until <= now]


def request_cancel(session: Session, action_id: str, *, now: float, actor: str) -> bool:
    """Record a cancel for the holder of ``action_id``'s lease; False (nothing written) unless running."""
    found = session.execute(
        select(Action.status, Action.lease_owner).where(Action.id == action_id)
    ).one_or_none()
    if found is None or found.status != JobStatus.RUNNING.value:
        return False
    add_audit(
        session,
        now=now,
        kind=CANCEL_REQUESTED,
        actor=actor,
        action_id=action_id,
        detail={"lease_owner": found.lease_owner},
    )
    notify_cancel_requested(session, action_id)  # at commit: the holder cancels at once, not next beat
    return True


def cancel_requests(session: Session, action_ids: Collection[str]) -> set[str]:
    """Which of ``action_ids`` someone asked to cancel."""
    if not action_ids:
        return set()
    found = session.scalars(
        select(AuditEntry.action_id)
        .where(AuditEntry.kind == CANCEL_REQUESTED, AuditEntry.action_id.in_(list(action_ids)))
        .distinct()
    )
    return {action_id for action_id in found if action_id is not None}


def report_worker(
    session: Session, *, now: float, worker_id: str, node: str, state: WorkerState, running: int
) -> None:
    """Insert or update ``worker_id``'s row (its id is unique to one process: no concurrent insert)."""
    found = session.execute(
        update(ExecutorWorker)
        .where(ExecutorWorker.id == worker_id)
        .values(state=state.value, heartbeat_at=now, running=running)
        .returning(ExecutorWorker.id)
    ).scalar_one_or_none()
    if found is None:
        session.add(
            ExecutorWorker(
                id=worker_id, node=node, state=state.value, started_at=now, heartbeat_at=now, running=running
            )
        )


def workers(session: Session, *, node: str | None) -> list[WorkerRecord]:
    """Workers (of ``node`` if given), the most recent heartbeat first."""
    query = select(ExecutorWorker).order_by(ExecutorWorker.heartbeat_at.desc(), ExecutorWorker.id)
    if node is not None:
        query = query.where(ExecutorWorker.node == node)
    return [
        WorkerRecord(
            id=row.id,
            node=row.node,
            state=WorkerState(row.state),
            started_at=row.started_at,
            heartbeat_at=row.heartbeat_at,
            running=row.running,
        )
        for row in session.scalars(query)
    ]
