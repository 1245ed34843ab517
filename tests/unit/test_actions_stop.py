"""Every stop settles (issue 10, finding 3), on SQLite and PostgreSQL.

When shutdown, the demo's end or a closing loop cancels an action's task, the action is settled by
the same rule as any TurnCompletion: ``outcome_unknown`` with its workspace quarantined (in the store
and on disk) once the prompt was sent, ``cancelled`` with the workspace freed before. The
``CancelledError`` is never swallowed. Before this fix ``_run_agent`` caught only ``Exception``: the
job stayed ``running`` and the workspace ``busy`` until the next start-up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openab_voice.acp.workspace import QUARANTINE_MARKER
from openab_voice.actions.events import AgentProcessStarted, AgentPromptSent
from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.records import WorkspaceState
from tests.fakes.actions import OPERATOR, PlaneRig, group_alive, plane_rig, request
from tests.fakes.gates import GatedStore


async def confirmed(rig: PlaneRig) -> str:
    outcome = await rig.broker.propose(request("refactor the parser"))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=rig.channel.message_ids[action_id]
    )
    assert clicked.ok, clicked
    return action_id


def action_task(action_id: str) -> asyncio.Task[object]:
    [task] = [t for t in asyncio.all_tasks() if t.get_name() == f"action-{action_id}"]
    return task


async def test_task_cancelled_after_the_prompt_is_outcome_unknown_and_quarantined(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="slow", turn_timeout_s=30.0) as rig:
        action_id = await confirmed(rig)
        await rig.until_published(AgentPromptSent, action_id)
        task = action_task(action_id)

        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # never swallowed
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.OUTCOME_UNKNOWN, (record.status, record.detail)
        assert record.error_code == "ACTION_STOPPED"
        row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
        assert row is not None and row.state is WorkspaceState.QUARANTINED
        assert (rig.workspace(action_id).private / QUARANTINE_MARKER).is_file()
        [started] = rig.published(AgentProcessStarted)
        assert not group_alive(started.pid)
        [result] = rig.channel.results()
        assert "UNKNOWN outcome" in result


async def test_task_cancelled_before_the_running_write_is_cancelled_and_frees_the_workspace(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), store_class=GatedStore) as rig:
        assert isinstance(rig.store, GatedStore)
        starting = rig.store.before(JobEvent.START)
        action_id = await confirmed(rig)
        await starting.reached()
        task = action_task(action_id)

        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        starting.open()  # the held `running` write now loses to the settled cancel
        await starting.finished()
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.CANCELLED, (record.status, record.detail)
        row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
        assert row is None or row.state is WorkspaceState.FREE, row
        assert rig.published(AgentProcessStarted) == []


async def test_shutdown_settles_a_running_action_that_ignores_the_cancel(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), mode="hang", turn_timeout_s=30.0, cancel_grace_s=0.3
    ) as rig:
        action_id = await confirmed(rig)
        await rig.until_published(AgentPromptSent, action_id)

        await rig.plane.aclose()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.OUTCOME_UNKNOWN, (record.status, record.detail)
        row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
        assert row is not None and row.state is WorkspaceState.QUARANTINED
        [started] = rig.published(AgentProcessStarted)
        assert not group_alive(started.pid)
