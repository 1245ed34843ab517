"""The bot with remote executors (``OPENAB_EXECUTOR=remote``), on SQLite and PostgreSQL: a confirmation
goes into the queue and nothing is spawned here; what a worker settles is delivered text first, once.

The worker is played by the store calls a worker makes (``claim_next``, the running write with its
lease, the settle); ``tests/e2e/test_executor_workers.py`` runs a real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.actions.events import AgentProcessStarted
from openab_voice.actions.leases import LeaseSettings
from openab_voice.clock import SystemClock
from openab_voice.errors import StaleTransition
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord
from tests.fakes.actions import OPERATOR, PlaneRig, plane_rig, propose_and_confirm

WORKER = "executor:pod-a/1"


async def confirmed(rig: PlaneRig, goal: str = "write a haiku about the sea") -> str:
    return await propose_and_confirm(rig, goal)


def worker_starts(store: JobStore) -> ActionRecord:
    claimed = store.claim_next(worker_id=WORKER, lease_s=30)
    assert claimed is not None
    return store.apply(
        claimed.id,
        JobEvent.START,
        actor="system",
        expected_version=claimed.version,
        lease_owner=WORKER,
        lease_until=SystemClock().wall() + 30,
        workspace_id=f"scratch:{claimed.id}",
    )


async def test_a_confirmation_is_queued_and_nothing_runs_here(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as rig:
        action_id = await confirmed(rig)
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert (record.status, record.lease_owner) == (JobStatus.CONFIRMED, None)
        assert rig.executor.running == [] and rig.published(AgentProcessStarted) == []
        claimed = rig.store.claim_next(worker_id=WORKER, lease_s=30)
        assert claimed is not None and claimed.id == action_id  # the queue entry a worker takes


async def test_a_workers_result_is_delivered_text_first_and_once(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as rig:
        assert rig.plane.remote is not None
        action_id = await confirmed(rig)
        running = worker_starts(rig.store)
        rig.store.audit(
            "permission",
            actor="resolver",
            action_id=action_id,
            detail={
                "tool_call_id": "t2",
                "title": "curl example.com",
                "kind": "execute",
                "needed": "external",
                "offered": ["allow_once", "reject_once"],
                "outcome": "selected",
                "option_kind": "reject_once",
                "reason": "needs external, above the workspace_write ceiling",
            },
        )
        assert await rig.plane.remote.deliver_pending() == []  # still running: nothing to deliver
        rig.store.apply(
            action_id,
            JobEvent.SUCCEED,
            actor="agent",
            expected_version=running.version,
            result_text="Wrote RESULT.md: a haiku about the sea.",
            stop_reason="end_turn",
        )

        assert await rig.plane.remote.deliver_pending() == [action_id]

        [text] = rig.channel.results()
        assert "a haiku about the sea" in text and "curl example.com" in text
        assert rig.store.require(action_id).delivery_outcome == "delivered"
        names = rig.log.names()
        assert names.index("post_result") < names.index("say")  # text first, then the status
        # The refusal audited by the worker's resolver reaches the spoken status as it would locally.
        assert rig.log.said() == [
            "The task ended, but its permission request was refused, so nothing it asked to do was "
            "allowed. The result is in the text channel."
        ]
        assert await rig.plane.remote.deliver_pending() == []  # once
        assert len(rig.channel.results()) == 1


async def test_a_job_lost_by_the_reaper_is_delivered_as_unknown(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as rig:
        assert rig.plane.remote is not None
        action_id = await confirmed(rig)
        running = worker_starts(rig.store)
        rig.store.apply(action_id, JobEvent.LOSE, actor="reaper", expected_version=running.version)

        assert await rig.plane.remote.deliver_pending() == [action_id]
        [text] = rig.channel.results()
        assert "UNKNOWN outcome" in text


async def test_a_cancel_reaches_a_queued_job_and_a_running_one_through_the_store(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as rig:
        assert rig.plane.remote is not None
        queued = await confirmed(rig, "first")
        claimed = rig.store.claim_next(worker_id=WORKER, lease_s=30)
        assert claimed is not None and claimed.id == queued

        cancelled = await rig.broker.cancel(queued, user_id=OPERATOR)
        assert cancelled.ok and rig.store.require(queued).status is JobStatus.CANCELLED
        # The worker that had claimed it cannot start it any more: nothing runs.
        with pytest.raises(StaleTransition):
            rig.store.apply(queued, JobEvent.START, actor="system", expected_version=claimed.version)
        assert await rig.plane.remote.deliver_pending() == []  # closed by the broker, no result
        assert rig.store.cancel_requests({queued}) == set()

        busy = await confirmed(rig, "second")
        worker_starts(rig.store)
        forwarded = await rig.broker.cancel(busy, user_id=OPERATOR)
        assert forwarded.ok, forwarded
        assert forwarded.message == f"Cancelling `{busy}` on its worker."
        # The request waits in the store for the lease holder's heartbeat; the status is the worker's.
        assert rig.store.cancel_requests({busy}) == {busy}
        assert rig.store.require(busy).status is JobStatus.RUNNING
        [entry] = rig.store.audit_entries(action_id=busy, kind="action.cancel_requested")
        assert (entry.actor, entry.detail) == (str(OPERATOR), {"lease_owner": WORKER})


async def test_a_remote_bots_restart_leaves_the_queue_and_the_workers_alone(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as first:
        started = await confirmed(first, "started by a worker")
        queued = await confirmed(first, "still queued")
        assert worker_starts(first.store).id == started
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        remote_poll_s=60.0,
        leases=LeaseSettings(node="bot-0", lease_s=30.0, heartbeat_s=10.0),
    ) as rig:
        await rig.plane.start()
        assert rig.store.require(started).status is JobStatus.RUNNING  # a live worker's lease
        assert rig.store.require(queued).status is JobStatus.CONFIRMED  # still waiting for a worker
