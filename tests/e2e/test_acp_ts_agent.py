"""A third-party ACP agent as a real action: the official TypeScript SDK's example agent (issue 10).

``@agentclientprotocol/sdk@1.9.0``'s ``dist/examples/agent.js`` (installed by ``scripts/setup.sh``
into ``.cache/acp-ts-agent`` beside ``zod@3``) runs a scripted ~5 s turn: text, a read, then a
permission request to edit ``/home/user/project/config.json``, outside any workspace, offering
``allow_once`` and ``reject_once``. So the fail-closed resolver must answer ``allow_once`` under an
``external`` ceiling and ``reject_once`` under ``workspace_write``. Cancelled at that pending
permission (answered ``cancelled``) it ends its turn with ``end_turn``, not ``cancelled``: that proves
nothing, so the action is ``outcome_unknown`` (``shared/notes/acp-agents.md``).

Skipped, saying why, only where ``node`` is absent; with node but without the package the tests fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from openab_voice.actions.events import AgentProcessStarted, AgentToolCall, PermissionDecided
from openab_voice.actions.ports import CONFIRM, CONFIRM_EXTERNAL
from openab_voice.clock import SystemClock
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.store.records import ActionRecord
from tests.fakes.actions import OPERATOR, PlaneRig, group_alive, plane_rig, request

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
AGENT_JS = Path(
    os.environ.get("TEST_ACP_TS_AGENT")
    or ROOT / ".cache/acp-ts-agent/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js"
)
NODE = shutil.which("node")


@pytest.fixture
def ts_agent() -> tuple[str, ...]:
    if NODE is None:
        pytest.skip("node is not installed: the TypeScript SDK's example agent cannot run")
    if not AGENT_JS.is_file():
        pytest.fail(f"{AGENT_JS} is missing: run scripts/setup.sh (it installs it with npm)", pytrace=False)
    return (NODE, str(AGENT_JS))


async def confirm(rig: PlaneRig, effect: EffectCeiling) -> str:
    outcome = await rig.broker.propose(request("update the database host in the config", effect=effect))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        # external comes only from its own button (a plain Confirm grants at most workspace_write).
        decision=CONFIRM_EXTERNAL if effect is EffectCeiling.EXTERNAL else CONFIRM,
        action_id=action_id,
        user_id=OPERATOR,
        message_id=rig.channel.message_ids[action_id],
    )
    assert clicked.ok, clicked
    return action_id


def decisions(rig: PlaneRig) -> list[dict[str, object]]:
    return [dict(event.decision) for event in rig.published(PermissionDecided)]


def assert_stopped(rig: PlaneRig, record: ActionRecord) -> None:
    assert record.detail is None or "NOT quiescent" not in record.detail
    [started] = rig.published(AgentProcessStarted)
    assert not group_alive(started.pid)


@pytest.mark.parametrize(
    ("effect", "option", "said"),
    [
        (EffectCeiling.EXTERNAL, "allow_once", "successfully updated the configuration"),
        (EffectCeiling.WORKSPACE_WRITE, "reject_once", "skip the configuration update"),
    ],
    ids=["external-allows", "workspace_write-rejects"],
)
async def test_the_example_agent_is_answered_within_the_ceiling(
    ts_agent: tuple[str, ...], db_url: str, tmp_path: Path, effect: EffectCeiling, option: str, said: str
) -> None:
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        command=ts_agent,
        max_effect=EffectCeiling.EXTERNAL,
        turn_timeout_s=30.0,
    ) as rig:
        action_id = await confirm(rig, effect)
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.effect_ceiling is effect
        assert (record.status, record.stop_reason) == (JobStatus.SUCCEEDED, "end_turn"), record.detail
        [decision] = decisions(rig)
        assert (decision["kind"], decision["option_kind"], decision["outcome"]) == (
            "edit",
            option,
            "selected",
        )
        assert decision["offered"] == ["allow_once", "reject_once"]
        assert record.result_text is not None and said in record.result_text
        if option == "reject_once":
            [result] = rig.channel.results()
            assert "its permission request was refused under the workspace_write ceiling" in result
        assert_stopped(rig, record)


async def test_a_cancel_at_its_pending_permission_is_outcome_unknown(
    ts_agent: tuple[str, ...], db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), command=ts_agent, turn_timeout_s=30.0, cancel_grace_s=5.0
    ) as rig:
        cancels: list[object] = []

        def at_the_edit(event: AgentToolCall) -> None:
            # The agent sends its permission request right after announcing this edit: cancel now,
            # synchronously, so that request finds the cancel in progress (answered `cancelled`).
            if event.kind == "edit" and not cancels:
                cancels.append(rig.executor.cancel(event.action_id))

        rig.bus.subscribe(AgentToolCall, at_the_edit)
        action_id = await confirm(rig, EffectCeiling.WORKSPACE_WRITE)
        await rig.executor.wait_idle()

        assert [str(c) for c in cancels] == ["accepted"]
        [decision] = decisions(rig)
        assert (decision["outcome"], decision["option_kind"]) == ("cancelled", None)
        record = rig.store.require(action_id)
        # It answered end_turn instead of cancelled: neither completion nor a stop is proven.
        assert (record.status, record.stop_reason) == (JobStatus.OUTCOME_UNKNOWN, "end_turn"), record.detail
        assert record.error_code == "ACP_CANCEL_UNCONFIRMED"
        row = rig.store.workspace(rig.workspaces.workspace_id(action_id))
        assert row is not None and row.state.value == "quarantined"
        assert_stopped(rig, record)
