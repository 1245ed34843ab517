"""Honest results (issue 10, finding 5), through the real executor and the scripted agent, on both
databases. Before this fix a write refused under a ``read_only`` ceiling ended ``succeeded`` and the
voice said "The task is done.", neither the text nor the voice saying that the agent was refused.
"""

from __future__ import annotations

from pathlib import Path

from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import SystemClock
from openab_voice.jobs import EffectCeiling, JobStatus
from tests.fakes.actions import OPERATOR, PlaneRig, plane_rig, request


async def run(rig: PlaneRig, effect: EffectCeiling) -> str:
    outcome = await rig.broker.propose(request("write the notes", effect=effect))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=rig.channel.message_ids[action_id]
    )
    assert clicked.ok, clicked
    await rig.executor.wait_idle()
    return action_id


async def test_a_write_refused_under_read_only_is_not_reported_as_done(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        action_id = await run(rig, EffectCeiling.READ_ONLY)

        record = rig.store.require(action_id)
        assert record.status is JobStatus.SUCCEEDED  # the agent did end its turn
        assert not (rig.workspace(action_id).path / "RESULT.md").exists()
        [result] = rig.channel.results()
        assert "its permission request was refused under the read_only ceiling" in result
        assert "Refused: 'Write RESULT.md' (edit, needs workspace_write)" in result
        [speech] = rig.log.said()
        assert "done" not in speech and "its permission request was refused" in speech


async def test_one_of_two_requests_refused_is_done_but_says_which(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="mixed") as rig:
        action_id = await run(rig, EffectCeiling.WORKSPACE_WRITE)

        assert (rig.workspace(action_id).path / "RESULT.md").exists()
        [result] = rig.channel.results()
        assert result.startswith(
            f"Action `{action_id}` succeeded, but 1 of its 2 permission requests was refused "
            "(ceiling workspace_write)."
        )
        assert "Refused: 'curl https://example.com' (execute, needs external)" in result
        [speech] = rig.log.said()
        assert speech.startswith("The task is done, but 1 of its 2 permission requests was refused.")
