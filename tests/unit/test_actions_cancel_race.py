"""A cancel right after the Confirm click always wins (issue 10, finding 1), on SQLite and PostgreSQL.

The race harness (``tests/fakes/gates.py``) stops the store's writes at exact points between the
confirmation, the ``running`` write and the spawn, and the test sends the operator's cancel there. On
each of them the cancel must be accepted (no "try again", no "another worker") and the action must end
``cancelled`` with no agent ever spawned. Before this fix the cancel lost at two of these points: the
broker's compare-and-set failed against the executor's ``running`` write ("it changed meanwhile; try
again"), or it found the job ``running`` before the executor had registered the run ("it is running
in another worker"), and the task then ran to completion.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from openab_voice.actions.events import AgentProcessStarted, AgentPromptSent, PermissionDecided
from openab_voice.actions.ports import CONFIRM
from openab_voice.actions.requests import Outcome
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.records import WorkspaceState
from tests.fakes.actions import OPERATOR, PlaneRig, group_alive, plane_rig, request
from tests.fakes.gates import GatedStore


async def proposed(rig: PlaneRig) -> str:
    outcome = await rig.broker.propose(request("write the release notes"))
    assert outcome.ok and outcome.action is not None, outcome
    return outcome.action.id


def click(rig: PlaneRig, action_id: str) -> asyncio.Task[Outcome]:
    return asyncio.create_task(
        rig.broker.click(
            decision=CONFIRM,
            action_id=action_id,
            user_id=OPERATOR,
            message_id=rig.channel.message_ids[action_id],
        )
    )


def store_of(rig: PlaneRig) -> GatedStore:
    assert isinstance(rig.store, GatedStore)
    return rig.store


def assert_cancelled_and_nothing_ran(rig: PlaneRig, action_id: str) -> None:
    record = rig.store.require(action_id)
    assert record.status is JobStatus.CANCELLED, (record.status, record.detail)
    assert rig.published(AgentProcessStarted) == [], "an agent was spawned for a cancelled action"
    assert rig.published(AgentPromptSent) == []
    assert not (rig.workspace(action_id).path / "RESULT.md").exists()
    row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
    assert row is None or row.state is WorkspaceState.FREE, row


async def test_cancel_after_the_running_write_before_the_executor_resumes(
    db_url: str, tmp_path: Path
) -> None:
    """The store already says ``running``; the executor has not spawned (nor registered a run) yet."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), store_class=GatedStore) as rig:
        action_id = await proposed(rig)
        started = store_of(rig).after(JobEvent.START)
        assert (await click(rig, action_id)).ok
        await started.reached()
        assert rig.store.require(action_id).status is JobStatus.RUNNING

        outcome = await rig.broker.cancel(action_id, user_id=OPERATOR)
        started.open()
        await rig.executor.wait_idle()

        assert outcome.ok, outcome
        assert_cancelled_and_nothing_ran(rig, action_id)
        assert [t.to_status for t in rig.store.transitions(action_id)][-2:] == [
            JobStatus.RUNNING,
            JobStatus.CANCELLED,
        ]


async def test_cancel_before_the_running_write(db_url: str, tmp_path: Path) -> None:
    """Confirmed and launched; the executor is about to write ``running``."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), store_class=GatedStore) as rig:
        action_id = await proposed(rig)
        starting = store_of(rig).before(JobEvent.START)
        assert (await click(rig, action_id)).ok
        await starting.reached()

        outcome = await rig.broker.cancel(action_id, user_id=OPERATOR)
        starting.open()
        await rig.executor.wait_idle()

        assert outcome.ok, outcome
        assert_cancelled_and_nothing_ran(rig, action_id)


async def test_cancel_whose_compare_and_set_loses_to_the_confirmation(db_url: str, tmp_path: Path) -> None:
    """The cancel read ``delivered``; the confirmation commits before the cancel's compare-and-set."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), store_class=GatedStore) as rig:
        action_id = await proposed(rig)
        store = store_of(rig)
        confirming, confirmed, cancelling = (
            store.before(JobEvent.CONFIRM),
            store.after(JobEvent.CONFIRM),
            store.before(JobEvent.CANCEL),
        )
        clicked = click(rig, action_id)
        await confirming.reached()
        cancel = asyncio.create_task(rig.broker.cancel(action_id, user_id=OPERATOR))
        await cancelling.reached()  # it read `delivered` and is about to write `cancelled`
        confirming.open()
        await confirmed.reached()  # the confirmation is committed; the executor is not launched yet
        cancelling.open()  # the cancel's compare-and-set now fails on the version
        outcome = await cancel
        confirmed.open()
        await clicked
        await rig.executor.wait_idle()

        assert outcome.ok, outcome
        assert_cancelled_and_nothing_ran(rig, action_id)


async def test_cancel_while_the_agent_process_starts_goes_through_the_cancel_path(
    db_url: str, tmp_path: Path
) -> None:
    """After the spawn a cancel is never lost: the agent is stopped, and the group is gone."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        action_id = await proposed(rig)
        outcomes: list[asyncio.Task[Outcome]] = []

        def on_spawn(event: AgentProcessStarted) -> None:
            outcomes.append(asyncio.create_task(rig.broker.cancel(event.action_id, user_id=OPERATOR)))

        rig.bus.subscribe(AgentProcessStarted, on_spawn)
        assert (await click(rig, action_id)).ok
        await rig.executor.wait_idle()

        [cancel] = outcomes
        assert (await cancel).ok
        record = rig.store.require(action_id)
        # Before the prompt: cancelled; had the prompt been sent, an unconfirmed stop is unknown. Never
        # a success that ran despite the cancel.
        assert record.status in (JobStatus.CANCELLED, JobStatus.OUTCOME_UNKNOWN), record.detail
        assert not (rig.workspace(action_id).path / "RESULT.md").exists()
        [started] = rig.published(AgentProcessStarted)
        assert not group_alive(started.pid)


async def test_a_cancel_accepted_while_the_turn_ends_is_never_reported_as_success(
    db_url: str, tmp_path: Path
) -> None:
    """Accepted at the agent's permission request, just before it ends its turn with ``end_turn``:
    whichever of the two the driver sees first, the outcome is unknown (the agent did not confirm
    the cancel), never ``succeeded`` after the operator was told "Cancelling"."""
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        action_id = await proposed(rig)
        replies: list[str] = []

        def at_the_permission(event: PermissionDecided) -> None:
            if not replies:
                replies.append(str(rig.executor.cancel(event.action_id)))

        rig.bus.subscribe(PermissionDecided, at_the_permission)
        assert (await click(rig, action_id)).ok
        await rig.executor.wait_idle()

        assert replies == ["accepted"]
        record = rig.store.require(action_id)
        assert record.status is JobStatus.OUTCOME_UNKNOWN, (record.status, record.detail)
        assert record.stop_reason == "end_turn"
