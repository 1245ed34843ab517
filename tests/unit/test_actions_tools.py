"""The semantic action tools through the real ToolRegistry: propose, look up, cancel; never approve.

Runs on SQLite and PostgreSQL. Nothing is confirmed, so time is a :class:`FakeClock`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openab_voice.actions.tools import (
    CANCEL_AGENT_TASK,
    GET_AGENT_TASK,
    START_AGENT_TASK,
    register_action_tools,
)
from openab_voice.clock import FakeClock
from openab_voice.errors import ErrorCode
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.providers.chat import ToolCall
from openab_voice.tools.registry import ToolContext, ToolRegistry, ToolResult
from tests.fakes.actions import (
    FACTS,
    OPERATOR,
    STRANGER,
    PlaneRig,
    plane_rig,
)


def tools(rig: PlaneRig) -> ToolRegistry:
    registry = ToolRegistry(rig.clock)
    register_action_tools(registry, rig.broker, FACTS)
    return registry


def context(speaker: int | None = OPERATOR, turn: str = "turn-3") -> ToolContext:
    return ToolContext(session_id="s1", turn_id=turn, speaker_id=None if speaker is None else str(speaker))


async def call(
    registry: ToolRegistry, name: str, arguments: dict[str, Any], ctx: ToolContext, call_id: str = "call_1"
) -> ToolResult:
    return await registry.call(ToolCall(id=call_id, name=name, arguments=json.dumps(arguments)), ctx)


async def test_only_the_three_semantic_tools_are_offered(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        names = [spec.name for spec in tools(rig).specs()]
        assert names == [START_AGENT_TASK, GET_AGENT_TASK, CANCEL_AGENT_TASK]


async def test_same_provider_call_id_twice_is_one_action(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        registry = tools(rig)
        arguments = {"goal": "write a haiku about the sea", "effect_hint": "read_only"}

        first = await call(registry, START_AGENT_TASK, arguments, context())
        retry = await call(registry, START_AGENT_TASK, arguments, context())

        assert first.ok and retry.ok
        assert first.content["status"] == retry.content["status"] == "delivered"
        assert retry.content["action_id"] == first.content["action_id"]
        assert "refused" not in first.content
        assert [p.action_id for p in rig.channel.proposals()] == [first.content["action_id"]]
        [record] = rig.store.recent()
        assert record.id == first.content["action_id"] and record.status is JobStatus.DELIVERED
        assert (record.proposed_by, record.effect_hint) == (OPERATOR, EffectCeiling.READ_ONLY)

        # The key is the turn and the call: the same provider id in a later turn is a new request.
        later = await call(registry, START_AGENT_TASK, arguments, context(turn="turn-4"))
        assert later.ok and later.content["action_id"] != first.content["action_id"]
        assert len(rig.channel.proposals()) == 2


async def test_requested_effect_is_capped_by_policy(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        result = await call(
            tools(rig), START_AGENT_TASK, {"goal": "deploy it", "effect_hint": "external"}, context()
        )

        assert result.ok
        record = rig.store.require(result.content["action_id"])
        assert record.effect_hint is EffectCeiling.WORKSPACE_WRITE
        assert rig.channel.proposals()[0].effect_ceiling == "workspace_write"


async def test_call_without_an_attributed_speaker_stores_nothing(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        registry = tools(rig)
        unattributed = await call(registry, START_AGENT_TASK, {"goal": "write a haiku"}, context(None))
        stranger = await call(registry, START_AGENT_TASK, {"goal": "write a haiku"}, context(STRANGER))

        assert unattributed.ok and stranger.ok  # the model reads the refusal as the tool's result
        assert (unattributed.content["ok"], unattributed.content["refused"]) == (False, "ACTION_UNATTRIBUTED")
        assert (stranger.content["ok"], stranger.content["refused"]) == (False, "ACTION_NOT_OPERATOR")
        assert "action_id" not in unattributed.content and "action_id" not in stranger.content
        assert rig.store.recent() == [] and rig.log.calls == []
        codes = [e.detail["code"] for e in rig.store.audit_entries(kind="request_refused")]
        assert codes == ["ACTION_UNATTRIBUTED", "ACTION_NOT_OPERATOR"]


async def test_invalid_arguments_are_rejected_before_the_broker(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        registry = tools(rig)
        empty = await call(registry, START_AGENT_TASK, {"goal": "   "}, context())
        bad_effect = await call(registry, START_AGENT_TASK, {"goal": "x", "effect_hint": "root"}, context())
        smuggled = await call(registry, START_AGENT_TASK, {"goal": "x", "approved": True}, context())

        for result in (empty, bad_effect, smuggled):
            assert not result.ok and result.error_code == ErrorCode.TOOL_ARGUMENTS_INVALID
        assert rig.store.recent() == [] and rig.log.calls == []


async def test_get_and_cancel_by_the_proposer(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        registry = tools(rig)
        started = await call(registry, START_AGENT_TASK, {"goal": "write a haiku about the sea"}, context())
        action_id = started.content["action_id"]

        status = await call(registry, GET_AGENT_TASK, {"action_id": action_id}, context(), "call_2")
        assert status.ok and status.content == {
            "action_id": action_id,
            "status": "delivered",
            "goal": "write a haiku about the sea",
        }
        unknown = await call(registry, GET_AGENT_TASK, {"action_id": "a-00000000"}, context(), "call_3")
        assert not unknown.ok and unknown.reason == "no such action"

        by_stranger = await call(registry, CANCEL_AGENT_TASK, {"action_id": action_id}, context(STRANGER))
        assert by_stranger.content["refused"] == "ACTION_NOT_OPERATOR"
        assert rig.store.require(action_id).status is JobStatus.DELIVERED

        cancelled = await call(registry, CANCEL_AGENT_TASK, {"action_id": action_id}, context(), "call_4")
        assert cancelled.ok and cancelled.content["ok"] is True
        assert cancelled.content["status"] == "cancelled"
        assert rig.store.require(action_id).status is JobStatus.CANCELLED
        [close] = rig.log.of("close_proposal")
        assert f"Cancelled by <@{OPERATOR}>" in close.data["note"]

        after = await call(registry, GET_AGENT_TASK, {"action_id": action_id}, context(), "call_5")
        assert after.content["status"] == "cancelled"
        assert rig.executor.running == []
