"""Leases decide, not restarts: renewal, the reaper, and restart reconciliation, on both databases.

The race between a heartbeat's renewal and the reaper is put at an exact point with a gate inside
the reaper's write (between reading the expired candidates and its compare-and-set), no sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import ColumnElement

from openab_voice.clock import FakeClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.database import open_engine
from openab_voice.store.job_leases import LEASE_EXPIRED_REASON, RESTART_REASON
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction, WorkerState, WorkspaceState
from tests.fakes.gates import Gate

MakeProposal = Callable[..., NewAction]
LEASE_S = 30.0


def running(
    store: JobStore,
    make_proposal: MakeProposal,
    clock: FakeClock,
    *,
    owner: str,
    workspace: str | None = None,
) -> ActionRecord:
    """A job started by ``owner`` with a fresh lease, holding ``workspace`` if given."""
    record, _ = store.create(make_proposal(workspace_id=workspace))
    for event in (JobEvent.DELIVER, JobEvent.CONFIRM):
        record = store.apply(record.id, event, actor="test", expected_version=record.version)
    if workspace is not None:
        assert store.acquire_workspace(workspace, path=f"/srv/{workspace}", action_id=record.id)
    return store.apply(
        record.id,
        JobEvent.START,
        actor=owner,
        expected_version=record.version,
        lease_owner=owner,
        lease_until=clock.wall() + LEASE_S,
    )


def test_a_heartbeat_renews_only_its_own_live_leases_and_keeps_the_version(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    mine = running(job_store, make_proposal, store_clock, owner="executor:pod-a/1")
    theirs = running(job_store, make_proposal, store_clock, owner="executor:pod-b/1")
    store_clock.advance(20)

    renewed = job_store.renew_leases("executor:pod-a/1", {mine.id, theirs.id}, lease_s=LEASE_S)

    assert renewed == {mine.id}
    after = job_store.require(mine.id)
    assert after.lease_until == store_clock.wall() + LEASE_S
    assert after.version == mine.version  # an executor settles with the version it started with
    assert job_store.require(theirs.id).lease_until == theirs.lease_until
    assert job_store.renew_leases("executor:pod-a/1", set(), lease_s=LEASE_S) == set()


def test_the_reaper_loses_a_running_job_whose_lease_expired_and_quarantines_its_workspace(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    dead = running(job_store, make_proposal, store_clock, owner="executor:pod-a/1", workspace="ws-a")
    alive = running(job_store, make_proposal, store_clock, owner="executor:pod-b/1", workspace="ws-b")
    store_clock.advance(LEASE_S - 1)
    assert job_store.reap_expired_leases(actor="reaper") == []  # not expired yet
    assert job_store.renew_leases("executor:pod-b/1", {alive.id}, lease_s=LEASE_S) == {alive.id}
    store_clock.advance(1)

    [lost] = job_store.reap_expired_leases(actor="reaper:executor:pod-c/1")

    assert (lost.id, lost.status, lost.error_code) == (dead.id, JobStatus.OUTCOME_UNKNOWN, "ACTION_LOST")
    last = job_store.transitions(dead.id)[-1]
    assert (last.event, last.actor, last.reason) == (
        JobEvent.LOSE,
        "reaper:executor:pod-c/1",
        LEASE_EXPIRED_REASON,
    )
    workspace = job_store.workspace("ws-a")
    assert workspace is not None and (workspace.state, workspace.action_id) == (
        WorkspaceState.QUARANTINED,
        dead.id,
    )
    assert job_store.require(alive.id).status is JobStatus.RUNNING
    ws_b = job_store.workspace("ws-b")
    assert ws_b is not None and ws_b.state is WorkspaceState.BUSY
    # Its owner comes back too late: the renewal says the lease is gone, and nothing is rewritten.
    assert job_store.renew_leases("executor:pod-a/1", {dead.id}, lease_s=LEASE_S) == set()
    assert job_store.require(dead.id) == lost
    assert job_store.reap_expired_leases(actor="reaper") == []  # a second pass finds nothing


def test_the_reaper_never_reaps_its_own_owner(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    job = running(job_store, make_proposal, store_clock, owner="local:bot-0/1")
    store_clock.advance(LEASE_S + 1)
    assert job_store.reap_expired_leases(actor="reaper", exclude_owner="local:bot-0/1") == []
    assert job_store.require(job.id).status is JobStatus.RUNNING


class GatedReaper(JobStore):
    """Holds the reaper between reading its candidates and its compare-and-set."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = Gate("reaper-cas")

    def _lose(
        self, job_id: str, version: int, actor: str, reason: str, *, where: Sequence[ColumnElement[bool]] = ()
    ) -> ActionRecord | None:
        self.gate.pass_through()
        return super()._lose(job_id, version, actor, reason, where=where)


async def test_a_renewal_that_commits_first_beats_the_reaper(
    db_url: str, job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    job = running(job_store, make_proposal, store_clock, owner="executor:pod-a/1")
    store_clock.advance(LEASE_S + 5)  # expired: the reaper will pick it
    reaper = GatedReaper(open_engine(db_url), store_clock)
    try:
        reaping = asyncio.ensure_future(asyncio.to_thread(reaper.reap_expired_leases, actor="reaper"))
        await reaper.gate.reached()  # it read the job as expired

        assert job_store.renew_leases("executor:pod-a/1", {job.id}, lease_s=LEASE_S) == {job.id}
        reaper.gate.open()

        assert await reaping == []
        assert job_store.require(job.id).status is JobStatus.RUNNING
    finally:
        reaper.close()


async def test_a_reaper_that_commits_first_makes_the_renewal_report_the_lease_lost(
    db_url: str, job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    job = running(job_store, make_proposal, store_clock, owner="executor:pod-a/1")
    store_clock.advance(LEASE_S + 5)
    reaper = GatedReaper(open_engine(db_url), store_clock)
    try:
        reaper.gate.open()
        [lost] = await asyncio.to_thread(reaper.reap_expired_leases, actor="reaper")
        assert lost.id == job.id
        assert job_store.renew_leases("executor:pod-a/1", {job.id}, lease_s=LEASE_S) == set()
    finally:
        reaper.close()


def test_a_restart_touches_no_job_whose_lease_another_process_holds(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    worker_job = running(job_store, make_proposal, store_clock, owner="executor:pod-a/1", workspace="ws-w")
    # A previous incarnation of the restarting bot: gone, whatever its lease says.
    own_old = running(job_store, make_proposal, store_clock, owner="local:bot-0/old", workspace="ws-o")
    store_clock.advance(LEASE_S - 10)
    live = running(job_store, make_proposal, store_clock, owner="executor:pod-b/1")
    claimed, _ = job_store.create(make_proposal())
    job_store.apply(claimed.id, JobEvent.DELIVER, actor="test")
    job_store.apply(claimed.id, JobEvent.CONFIRM, actor="test")
    assert job_store.claim_next(worker_id="executor:pod-c/1", lease_s=LEASE_S) is not None
    store_clock.advance(15)  # the first two leases expired 5 s ago; the later ones are live

    changed = job_store.reconcile_after_restart(actor="startup", own_lease_prefix="local:bot-0/")

    assert {(r.id, r.status) for r in changed} == {
        (worker_job.id, JobStatus.OUTCOME_UNKNOWN),
        (own_old.id, JobStatus.OUTCOME_UNKNOWN),
    }
    assert job_store.require(live.id).status is JobStatus.RUNNING
    # Claimed by a live worker but not started yet: not failed, the worker will start it.
    assert job_store.require(claimed.id).status is JobStatus.CONFIRMED
    assert job_store.transitions(own_old.id)[-1].reason == RESTART_REASON
    assert {w.id for w in job_store.quarantined_workspaces()} == {"ws-w", "ws-o"}


def test_a_restart_loses_its_own_live_leases_at_once(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    own = running(job_store, make_proposal, store_clock, owner="local:bot-0/old")
    # Live leases of other processes, one whose node name starts like ours: not ours.
    others = [
        running(job_store, make_proposal, store_clock, owner=owner)
        for owner in ("local:bot-1/x", "local:bot-00/x", "executor:bot-0/x")
    ]
    [lost] = job_store.reconcile_after_restart(own_lease_prefix="local:bot-0/")
    assert (lost.id, lost.status) == (own.id, JobStatus.OUTCOME_UNKNOWN)
    assert {job_store.require(other.id).status for other in others} == {JobStatus.RUNNING}


def test_a_remote_bot_leaves_queued_confirmed_jobs_to_the_workers(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    queued, _ = job_store.create(make_proposal())
    job_store.apply(queued.id, JobEvent.DELIVER, actor="test")
    job_store.apply(queued.id, JobEvent.CONFIRM, actor="test")
    assert job_store.reconcile_after_restart(fail_unleased_confirmed=False) == []
    assert job_store.require(queued.id).status is JobStatus.CONFIRMED
    [failed] = job_store.reconcile_after_restart()  # the local default: nothing will start it
    assert (failed.id, failed.error_code) == (queued.id, "ACTION_NOT_STARTED")


def test_workers_report_themselves(job_store: JobStore, store_clock: FakeClock) -> None:
    job_store.report_worker("executor:pod-a/1", node="pod-a", state=WorkerState.RUNNING, running=0)
    store_clock.advance(10)
    job_store.report_worker("executor:pod-a/1", node="pod-a", state=WorkerState.DRAINING, running=2)
    job_store.report_worker("executor:pod-b/1", node="pod-b", state=WorkerState.RUNNING, running=1)

    [a] = job_store.workers(node="pod-a")
    assert (a.state, a.running, a.heartbeat_at - a.started_at) == (WorkerState.DRAINING, 2, 10.0)
    assert [w.id for w in job_store.workers()] == ["executor:pod-a/1", "executor:pod-b/1"]  # same beat
