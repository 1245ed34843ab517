"""The ACP client of one run: output collection, permission answers, nothing else offered."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, start_tool_call, update_agent_message_text, update_tool_call
from acp.schema import DeniedOutcome, PermissionOption, ToolCallLocation, ToolCallUpdate

from openab_voice.acp.client import ActionClient
from openab_voice.acp.types import PermissionDecision
from openab_voice.jobs import EffectCeiling

SID = "s-1"


def once() -> list[PermissionOption]:
    return [
        PermissionOption(option_id="always", name="Always", kind="allow_always"),
        PermissionOption(option_id="yes", name="Yes", kind="allow_once"),
        PermissionOption(option_id="no", name="No", kind="reject_once"),
    ]


@pytest.fixture
def client(tmp_path: Path) -> ActionClient:
    seen: list[PermissionDecision] = []
    c = ActionClient(ceiling=EffectCeiling.WORKSPACE_WRITE, workspace=tmp_path, on_decision=seen.append)
    c.session_id = SID
    return c


async def test_collects_text_of_our_session_only(client: ActionClient) -> None:
    await client.session_update(SID, update_agent_message_text("Hello "))
    await client.session_update("other", update_agent_message_text("ignored "))
    await client.session_update(SID, update_agent_message_text("world"))
    assert client.output == "Hello world"


async def test_output_is_bounded(tmp_path: Path) -> None:
    c = ActionClient(ceiling=EffectCeiling.READ_ONLY, workspace=tmp_path, max_output_chars=5)
    c.session_id = SID
    await c.session_update(SID, update_agent_message_text("abc"))
    await c.session_update(SID, update_agent_message_text("defgh"))
    await c.session_update(SID, update_agent_message_text("more"))
    assert c.output == "abcde\n[output truncated]"


async def test_announced_kind_and_locations_complete_a_bare_request(
    client: ActionClient, tmp_path: Path
) -> None:
    announce = start_tool_call(
        "tc", "Write", kind="edit", locations=[ToolCallLocation(path=str(tmp_path / "a"))]
    )
    await client.session_update(SID, announce)
    await client.session_update(SID, update_tool_call("tc", status="in_progress"))
    response = await client.request_permission(SID, ToolCallUpdate(tool_call_id="tc"), once())
    assert response.outcome.outcome == "selected"
    decision = client.decisions[-1]
    assert (decision.kind, decision.needed, decision.option_kind) == (
        "edit",
        EffectCeiling.WORKSPACE_WRITE,
        "allow_once",
    )
    assert decision.title == "Write"
    record = client.tool_calls[0]
    assert (record.kind, record.status, record.locations) == ("edit", "in_progress", (str(tmp_path / "a"),))


async def test_a_location_from_either_place_must_pass(client: ActionClient, tmp_path: Path) -> None:
    await client.session_update(
        SID, start_tool_call("tc", "Write", kind="edit", locations=[ToolCallLocation(path="/etc/passwd")])
    )
    request = ToolCallUpdate(tool_call_id="tc", locations=[ToolCallLocation(path=str(tmp_path / "a"))])
    await client.request_permission(SID, request, once())
    assert client.decisions[-1].option_kind == "reject_once"


async def test_another_session_or_no_session_is_cancelled(client: ActionClient, tmp_path: Path) -> None:
    response = await client.request_permission(
        "intruder", ToolCallUpdate(tool_call_id="x", kind="read"), once()
    )
    assert response.outcome == DeniedOutcome(outcome="cancelled")
    fresh = ActionClient(ceiling=EffectCeiling.EXTERNAL, workspace=tmp_path)
    response = await fresh.request_permission(SID, ToolCallUpdate(tool_call_id="x", kind="read"), once())
    assert response.outcome == DeniedOutcome(outcome="cancelled")


async def test_after_begin_cancel_everything_is_cancelled(client: ActionClient) -> None:
    client.begin_cancel()
    response = await client.request_permission(SID, ToolCallUpdate(tool_call_id="x", kind="read"), once())
    assert response.outcome == DeniedOutcome(outcome="cancelled")
    assert "cancel is in progress" in client.decisions[-1].reason


async def test_every_decision_reaches_the_hook_in_order(tmp_path: Path) -> None:
    seen: list[PermissionDecision] = []
    c = ActionClient(ceiling=EffectCeiling.READ_ONLY, workspace=tmp_path, on_decision=seen.append)
    c.session_id = SID
    for kind in ("read", "execute"):
        await c.request_permission(SID, ToolCallUpdate(tool_call_id=kind, kind=kind), once())  # type: ignore[arg-type]
    assert [d.option_kind for d in seen] == ["allow_once", "reject_once"]
    assert c.decisions == tuple(seen)


async def test_fs_and_terminal_are_not_offered(client: ActionClient) -> None:
    calls = [
        client.read_text_file(SID, "/etc/passwd"),
        client.write_text_file(SID, "/tmp/x", "data"),
        client.create_terminal(SID, "sh"),
        client.terminal_output(SID, "t"),
        client.release_terminal(SID, "t"),
        client.wait_for_terminal_exit(SID, "t"),
        client.kill_terminal(SID, "t"),
        client.ext_method("anything", {}),
    ]
    for coro in calls:
        with pytest.raises(RequestError) as caught:
            await coro
        assert caught.value.code == -32601
