"""The in-process executor under leases, on SQLite and PostgreSQL: it leases what it starts, renews
it, stops an agent whose lease another process reaped, and a restart leaves live leases alone."""

from __future__ import annotations

import uuid
from pathlib import Path

from openab_voice.acp.workspace import QUARANTINE_MARKER
from openab_voice.actions.events import AgentProcessStarted, AgentPromptSent
from openab_voice.actions.leases import LeaseSettings
from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import FakeClock, SystemClock
from openab_voice.jobs import EffectCeiling, JobEvent, JobStatus
from openab_voice.store.database import open_engine
from openab_voice.store.job_leases import LEASE_EXPIRED_REASON
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import NewAction, WorkspaceState
from tests.fakes.actions import GUILD, OPERATOR, TEXT_CHANNEL, PlaneRig, group_alive, plane_rig, request

LEASES = LeaseSettings(node="bot-0", lease_s=30.0, heartbeat_s=10.0)


async def confirmed(rig: PlaneRig, goal: str = "refactor the parser") -> str:
    outcome = await rig.broker.propose(request(goal, call_id=f"turn-1:{goal}"))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=rig.channel.message_ids[action_id]
    )
    assert clicked.ok, clicked
    return action_id


async def test_a_started_job_is_leased_to_this_process_and_renewed(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), mode="slow", turn_timeout_s=30.0, leases=LEASES
    ) as rig:
        keeper = rig.plane.leases
        assert keeper.owner.startswith("local:bot-0/")
        action_id = await confirmed(rig)
        await rig.until_published(AgentPromptSent, action_id)
        started = rig.store.require(action_id)
        assert started.status is JobStatus.RUNNING and started.lease_owner == keeper.owner
        assert started.lease_until is not None and keeper.held == {action_id}

        assert await keeper.tick() == []
        renewed = rig.store.require(action_id)
        assert renewed.lease_until is not None and renewed.lease_until >= started.lease_until
        assert renewed.version == started.version
        [me] = rig.store.workers(node="bot-0")
        assert (me.id, me.running) == (keeper.owner, 1)

        rig.executor.cancel(action_id)
        await rig.executor.wait_idle()
        assert rig.store.require(action_id).status is JobStatus.CANCELLED
        assert keeper.held == frozenset()


async def test_an_agent_whose_lease_was_reaped_elsewhere_is_stopped_and_the_verdict_stands(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), mode="hang", turn_timeout_s=60.0, leases=LEASES
    ) as rig:
        action_id = await confirmed(rig)
        await rig.until_published(AgentPromptSent, action_id)
        [spawned] = rig.published(AgentProcessStarted)
        # Another process whose clock is past our lease: our heartbeat missed a whole lease.
        later = FakeClock(wall_start=SystemClock().wall() + LEASES.lease_s + 1)
        other = JobStore(open_engine(db_url), later)
        try:
            [reaped] = other.reap_expired_leases(actor="reaper:executor:pod-z/1")
        finally:
            other.close()
        assert (reaped.id, reaped.status) == (action_id, JobStatus.OUTCOME_UNKNOWN)

        await rig.plane.leases.tick()  # our renewal finds the lease gone: the agent is stopped
        await rig.executor.wait_idle()

        final = rig.store.require(action_id)
        assert final == reaped  # the reaper's verdict, not rewritten by the stopped agent
        [*_, last] = rig.store.transitions(action_id)
        assert (last.event, last.reason) == (JobEvent.LOSE, LEASE_EXPIRED_REASON)
        assert not group_alive(spawned.pid)
        row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
        assert row is not None and row.state is WorkspaceState.QUARANTINED
        assert (rig.workspace(action_id).private / QUARANTINE_MARKER).is_file()


async def test_a_cancel_requested_through_the_store_reaches_the_lease_holder(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), mode="slow", turn_timeout_s=30.0, leases=LEASES
    ) as rig:
        action_id = await confirmed(rig)
        await rig.until_published(AgentPromptSent, action_id)
        await rig.plane.leases.tick()
        assert rig.store.require(action_id).status is JobStatus.RUNNING  # nothing asked yet

        assert rig.store.request_cancel(action_id, actor="bot-of-another-process")
        await rig.plane.leases.tick()  # the heartbeat reads it and cancels the agent per ACP
        await rig.executor.wait_idle()

        final = rig.store.require(action_id)
        assert (final.status, final.stop_reason) == (JobStatus.CANCELLED, "cancelled")
        assert not rig.store.request_cancel(action_id, actor="late")  # settled: nothing to ask
        assert rig.plane.leases.held == frozenset()


def previous_run(store: JobStore, *, owner: str) -> str:
    """A job that process ``owner`` started, with a lease live for five more minutes."""
    clock = SystemClock()
    record, _ = store.create(
        NewAction(
            id=f"a-{uuid.uuid4().hex[:8]}",
            goal="left running",
            effect_hint=EffectCeiling.WORKSPACE_WRITE,
            guild_id=GUILD,
            text_channel_id=TEXT_CHANNEL,
            session_generation=1,
            proposed_by=OPERATOR,
            expires_at=clock.wall() + 300,
        )
    )
    for event in (JobEvent.DELIVER, JobEvent.CONFIRM):
        record = store.apply(record.id, event, actor="test")
    store.apply(record.id, JobEvent.START, actor=owner, lease_owner=owner, lease_until=clock.wall() + 300)
    return record.id


async def test_a_restart_loses_its_own_previous_jobs_and_leaves_a_live_workers_alone(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), leases=LEASES) as rig:
        alive = previous_run(rig.store, owner="executor:pod-a/1")
        own_old = previous_run(rig.store, owner="local:bot-0/dead")

        await rig.plane.start()

        assert rig.store.require(alive).status is JobStatus.RUNNING
        assert rig.store.require(own_old).status is JobStatus.OUTCOME_UNKNOWN
        assert not rig.plane.leases.owner.endswith("/dead")  # a new incarnation
