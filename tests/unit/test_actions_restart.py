"""Restart reconciliation: a job the previous process left ``running`` is lost, never re-run.

Runs on SQLite and PostgreSQL. The previous process is simulated by writing the job's history
straight into the store (as the executor would have, write-ahead); a new plane then starts on the
same database.
"""

from __future__ import annotations

from pathlib import Path

from openab_voice.acp.workspace import QUARANTINE_MARKER, WorkspaceManager
from openab_voice.actions.events import ActionChanged, AgentProcessStarted
from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import SystemClock
from openab_voice.jobs import EffectCeiling, JobEvent, JobStatus
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.job_leases import RESTART_REASON
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction, WorkspaceState
from tests.fakes.actions import (
    GENERATION,
    GUILD,
    OPERATOR,
    TEXT_CHANNEL,
    VOICE_CHANNEL,
    plane_rig,
)


def new_action(action_id: str, *, expires_at: float) -> NewAction:
    return NewAction(
        id=action_id,
        idempotency_key=f"tool:{GUILD}:{GENERATION}:{action_id}",
        goal="write a haiku about the sea",
        effect_hint=EffectCeiling.WORKSPACE_WRITE,
        guild_id=GUILD,
        voice_channel_id=VOICE_CHANNEL,
        text_channel_id=TEXT_CHANNEL,
        session_generation=GENERATION,
        proposed_by=OPERATOR,
        expires_at=expires_at,
    )


async def previous_process(url: str, root: Path) -> tuple[ActionRecord, ActionRecord, ActionRecord]:
    """A running job (workspace prepared and held), an overdue proposal and a fresh one."""
    clock = SystemClock()
    upgrade(url)
    store = JobStore(open_engine(url), clock)
    try:
        workspaces = WorkspaceManager(root / "ws", None, clock=clock)
        running, _ = store.create(new_action("a-running1", expires_at=clock.wall() + 300))
        store.apply(running.id, JobEvent.DELIVER, actor="system", proposal_message_id=555_000_000_000_000_001)
        store.apply(
            running.id,
            JobEvent.CONFIRM,
            actor=str(OPERATOR),
            confirmed_by=OPERATOR,
            effect_ceiling=EffectCeiling.WORKSPACE_WRITE,
        )
        workspace = await workspaces.prepare(running.id)
        assert store.acquire_workspace(workspace.id, path=str(workspace.path), action_id=running.id)
        running = store.apply(running.id, JobEvent.START, actor="system", workspace_id=workspace.id)
        overdue, _ = store.create(new_action("a-overdue1", expires_at=clock.wall() - 1))
        overdue = store.apply(overdue.id, JobEvent.DELIVER, actor="system")
        fresh, _ = store.create(new_action("a-fresh001", expires_at=clock.wall() + 300))
        fresh = store.apply(fresh.id, JobEvent.DELIVER, actor="system")
    finally:
        store.close()
    assert running.status is JobStatus.RUNNING
    return running, overdue, fresh


async def test_restart_loses_the_running_job_and_never_reruns_it(db_url: str, tmp_path: Path) -> None:
    running, overdue, fresh = await previous_process(db_url, tmp_path)

    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        await rig.plane.start()

        lost = rig.store.require(running.id)
        assert lost.status is JobStatus.OUTCOME_UNKNOWN
        [*_, last] = rig.store.transitions(running.id)
        assert (last.from_status, last.to_status, last.actor, last.reason) == (
            JobStatus.RUNNING,
            JobStatus.OUTCOME_UNKNOWN,
            "startup",
            RESTART_REASON,
        )
        row = rig.store.workspace(running.workspace_id or "")
        assert row is not None and (row.state, row.action_id) == (WorkspaceState.QUARANTINED, running.id)
        workspace = rig.workspace(running.id)
        assert (workspace.private / QUARANTINE_MARKER).is_file()
        assert not (workspace.path / "RESULT.md").exists()

        assert rig.store.require(overdue.id).status is JobStatus.EXPIRED
        assert rig.store.require(fresh.id).status is JobStatus.DELIVERED
        changed = {(e.action_id, e.status) for e in rig.published(ActionChanged)}
        assert changed == {(running.id, "outcome_unknown"), (overdue.id, "expired")}

        # Never re-run: no agent was spawned, and a late click cannot start it either.
        click = await rig.broker.click(
            decision=CONFIRM, action_id=running.id, user_id=OPERATOR, message_id=None
        )
        assert click.code == "ACTION_ALREADY_DECIDED"
        assert rig.executor.running == []
        assert rig.published(AgentProcessStarted) == []

    # A second restart finds nothing left to reconcile.
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as again:
        await again.plane.start()
        assert again.published(ActionChanged) == []
        assert again.store.require(running.id) == lost


async def test_restart_resolves_a_job_confirmed_but_never_started(db_url: str, tmp_path: Path) -> None:
    """Confirmed, then the process died before ``start`` was written: nothing ran, and nothing will
    launch it again (the broker launches only on a click). It must not stay ``confirmed`` forever
    (its proposal says "running"); like a stale session's click, it ends without running."""
    clock = SystemClock()
    upgrade(db_url)
    store = JobStore(open_engine(db_url), clock)
    try:
        confirmed, _ = store.create(new_action("a-confirm1", expires_at=clock.wall() + 300))
        store.apply(
            confirmed.id, JobEvent.DELIVER, actor="system", proposal_message_id=555_000_000_000_000_001
        )
        confirmed = store.apply(confirmed.id, JobEvent.CONFIRM, actor=str(OPERATOR), confirmed_by=OPERATOR)
    finally:
        store.close()

    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        await rig.plane.start()
        await rig.executor.wait_idle()

        record = rig.store.require(confirmed.id)
        assert record.status is JobStatus.FAILED, f"left {record.status} after the restart"
        assert rig.published(AgentProcessStarted) == []
