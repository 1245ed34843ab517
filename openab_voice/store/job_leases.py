"""Leases: which process holds a confirmed or running job, and what happens when nobody does.

A running job holds a lease its executor renews (its heartbeat); if the executor dies, the lease
expires and the reaper (or restart reconciliation of the same process) marks the job
``outcome_unknown`` instead of running it twice. Executor workers claim queued jobs by lease, report
themselves in the worker registry, and hear cancels asked of the jobs they hold; the bot hears what
they settled and delivers the results nobody delivered yet.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from sqlalchemy import ColumnElement, and_, or_, select

from openab_voice.errors import ErrorCode, StaleTransition
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.shards import ShardRange
from openab_voice.store import action_rows, lease_rows
from openab_voice.store.convert import action_record
from openab_voice.store.job_transitions import JobTransitions
from openab_voice.store.models import Action
from openab_voice.store.notify import CANCEL_CHANNEL, SettledListener
from openab_voice.store.records import ActionRecord, WorkerRecord, WorkerState

RESTART_REASON = "process restarted while running"
LEASE_EXPIRED_REASON = "its executor stopped renewing the lease while it was running"


class JobLeases(JobTransitions):
    """Claims, lease renewal and reaping, restart reconciliation, cancel requests and the worker registry."""

    def claim_next(self, *, worker_id: str, lease_s: float) -> ActionRecord | None:
        """Lease the oldest ``confirmed`` action whose lease is empty or expired to ``worker_id``.

        The lease only reserves the job; the worker still moves it with ``apply(START)`` using the
        returned version. Returns None when no job is waiting.
        """
        with self._transaction() as session:
            return action_rows.claim(session, now=self._clock.wall(), worker_id=worker_id, lease_s=lease_s)

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
                        error_code=ErrorCode.ACTION_NOT_STARTED,
                    )
                )
            except StaleTransition:
                continue
        return lost + unstarted + self.expire_overdue(actor=actor, shards=shards)

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
