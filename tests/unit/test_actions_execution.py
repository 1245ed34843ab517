"""Confirmed actions run in a fresh scripted ACP agent (a real subprocess) on a real store.

Every test runs on SQLite and PostgreSQL. The agent waits on the injected clock, so these use the
:class:`SystemClock` with short timeouts; the Discord ports are the fakes of ``tests/fakes/actions``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from openab_voice.acp.workspace import QUARANTINE_MARKER
from openab_voice.actions.events import (
    ActionResultPosted,
    AgentProcessStarted,
    AgentPromptSent,
    PermissionDecided,
)
from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobStatus
from openab_voice.store.records import ActionRecord, WorkspaceState
from tests.fakes.actions import (
    OPERATOR,
    STRANGER,
    CallLog,
    FakeControlChannel,
    PlaneRig,
    alive,
    group_alive,
    plane_rig,
    request,
)
from tests.fakes.git import empty_repo

GOAL = "write a haiku about the sea"
UNTRUSTED_SPEECH = "The task is done. The result is in the text channel."


async def propose(rig: PlaneRig, goal: str = GOAL, call_id: str = "t1:c1") -> str:
    outcome = await rig.broker.propose(request(goal, call_id=call_id))
    assert outcome.ok and outcome.action is not None, outcome
    return outcome.action.id


async def confirm(rig: PlaneRig, action_id: str) -> None:
    outcome = await rig.broker.click(
        decision=CONFIRM,
        action_id=action_id,
        user_id=OPERATOR,
        message_id=rig.channel.message_ids[action_id],
    )
    assert outcome.ok, outcome


async def run_to_end(rig: PlaneRig, goal: str = GOAL, call_id: str = "t1:c1") -> ActionRecord:
    action_id = await propose(rig, goal, call_id)
    await confirm(rig, action_id)
    await rig.executor.wait_idle()
    return rig.store.require(action_id)


async def agent_started(rig: PlaneRig, action_id: str) -> int:
    """Wait until the action's agent has the prompt; returns the agent's pid (its process group)."""
    started = await rig.until_published(AgentProcessStarted, action_id)
    # The cancel must land mid-turn, not during session set-up (that is a different, plain cancel).
    await rig.until_published(AgentPromptSent, action_id)
    return started.pid


def permission_audits(rig: PlaneRig, action_id: str) -> list[dict[str, object]]:
    return [dict(e.detail) for e in rig.store.audit_entries(action_id=action_id, kind="permission")]


@pytest.mark.parametrize(
    ("listeners", "trusted", "all_trusted"),
    [
        (frozenset({OPERATOR, STRANGER}), frozenset({OPERATOR}), False),
        (frozenset({OPERATOR, STRANGER}), frozenset({OPERATOR, STRANGER}), True),
    ],
    ids=["stranger-listening", "all-trusted"],
)
async def test_confirmed_action_runs_posts_the_result_then_speaks(
    db_url: str, tmp_path: Path, listeners: frozenset[int], trusted: frozenset[int], all_trusted: bool
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), listeners=listeners, trusted=trusted) as rig:
        record = await run_to_end(rig)

        assert record.status is JobStatus.SUCCEEDED
        assert (record.confirmed_by, record.effect_ceiling) == (OPERATOR, "workspace_write")
        assert (record.stop_reason, record.error_code) == ("end_turn", None)
        assert record.delivery_outcome == "delivered"
        assert record.result_text is not None and f"Wrote RESULT.md: {GOAL}" in record.result_text
        assert GOAL in (rig.workspace(record.id).path / "RESULT.md").read_text()
        assert [(t.from_status, t.to_status) for t in rig.store.transitions(record.id)] == [
            (None, JobStatus.PROPOSED),
            (JobStatus.PROPOSED, JobStatus.DELIVERED),
            (JobStatus.DELIVERED, JobStatus.CONFIRMED),
            (JobStatus.CONFIRMED, JobStatus.RUNNING),
            (JobStatus.RUNNING, JobStatus.SUCCEEDED),
        ]

        # Text is the record: the full result is posted before the voice says anything.
        assert rig.log.names() == ["post_proposal", "pin", "close_proposal", "post_result", "say"]
        [result] = rig.channel.results()
        assert f"Action `{record.id}` succeeded." in result and f"Wrote RESULT.md: {GOAL}" in result
        [speech] = rig.log.said()
        if all_trusted:
            assert speech.startswith("The task is done. ") and GOAL in speech
            assert speech.endswith("The full result is in the text channel.")
        else:
            assert speech == UNTRUSTED_SPEECH

        [decision] = permission_audits(rig, record.id)
        assert (decision["outcome"], decision["option_kind"], decision["kind"]) == (
            "selected",
            "allow_once",
            "edit",
        )
        workspace = rig.store.workspace(f"scratch:{record.id}")
        assert workspace is not None and workspace.state is WorkspaceState.FREE
        [started] = rig.published(AgentProcessStarted)
        assert not group_alive(started.pid), "the agent outlived its action"
        [posted] = rig.published(ActionResultPosted)
        assert (posted.execution, posted.delivered, posted.messages) == ("succeeded", True, 1)


async def test_replayed_and_racing_confirmations_run_the_agent_once(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        action_id = await propose(rig)
        message_id = rig.channel.message_ids[action_id]

        clicks = await asyncio.gather(
            *(
                rig.broker.click(
                    decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=message_id
                )
                for _ in range(2)
            )
        )
        replay = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=message_id
        )
        await rig.executor.wait_idle()
        late_replay = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=message_id
        )

        assert sorted(c.ok for c in clicks) == [False, True]
        assert [c.code for c in clicks if not c.ok] == ["ACTION_ALREADY_DECIDED"]
        assert (replay.code, late_replay.code) == ("ACTION_ALREADY_DECIDED", "ACTION_ALREADY_DECIDED")
        assert rig.store.require(action_id).status is JobStatus.SUCCEEDED
        assert len(rig.published(AgentProcessStarted)) == 1
        assert [t.event for t in rig.store.transitions(action_id)].count("confirm") == 1
        assert len(rig.log.of("post_result")) == 1 and len(rig.log.said()) == 1


async def test_only_persistent_options_offered_means_no_choice(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="always-only") as rig:
        record = await run_to_end(rig)

        [decision] = permission_audits(rig, record.id)
        assert decision["offered"] == ["allow_always", "reject_always"]
        assert (decision["outcome"], decision["option_kind"]) == ("cancelled", None)
        for event in rig.published(PermissionDecided):
            assert not str(event.decision.get("option_kind")).endswith("_always")
        for entry in rig.store.audit_entries():
            assert not str(entry.detail.get("option_kind")).endswith("_always")
        assert not (rig.workspace(record.id).path / "RESULT.md").exists()
        assert record.status is JobStatus.SUCCEEDED  # the agent ended its turn, having written nothing
        assert "Permission refused: RESULT.md not written." in rig.channel.results()[0]


async def test_agent_crash_mid_prompt_is_outcome_unknown_and_quarantined(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="crash") as rig:
        record = await run_to_end(rig)

        assert record.status is JobStatus.OUTCOME_UNKNOWN
        assert record.error_code == "ACP_AGENT_EXITED"
        assert [t.to_status for t in rig.store.transitions(record.id)][-2:] == [
            JobStatus.RUNNING,
            JobStatus.OUTCOME_UNKNOWN,
        ]
        row = rig.store.workspace(f"scratch:{record.id}")
        assert row is not None and (row.state, row.action_id) == (WorkspaceState.QUARANTINED, record.id)
        workspace = rig.workspace(record.id)
        assert (workspace.private / QUARANTINE_MARKER).is_file()
        assert rig.workspaces.quarantine_reason(workspace) is not None
        assert [e.action_id for e in rig.store.audit_entries(kind="workspace.quarantined")] == [record.id]

        # Still reported, in text first: UNKNOWN, with what the agent said before it died.
        assert record.delivery_outcome == "delivered"
        [result] = rig.channel.results()
        assert "UNKNOWN" in result and "Starting, then crashing." in result
        assert rig.log.names()[-2:] == ["post_result", "say"]
        assert rig.log.said() == [
            "The task ended without a known outcome. The result is in the text channel."
        ]


async def test_operator_cancel_mid_turn_confirmed_by_the_agent_is_cancelled(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="slow", cancel_grace_s=3.0) as rig:
        action_id = await propose(rig)
        await confirm(rig, action_id)
        pid = await agent_started(rig, action_id)

        refused = await rig.broker.cancel(action_id, user_id=STRANGER)
        assert refused.code == "ACTION_NOT_OPERATOR"
        outcome = await rig.broker.cancel(action_id, user_id=OPERATOR)
        assert outcome.ok, outcome
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.CANCELLED
        assert record.stop_reason == "cancelled" and "the agent confirmed" in (record.detail or "")
        row = rig.store.workspace(f"scratch:{action_id}")
        assert row is not None and row.state is WorkspaceState.FREE
        assert not (rig.workspace(action_id).private / QUARANTINE_MARKER).exists()
        assert not group_alive(pid)
        assert "was cancelled" in rig.channel.results()[0]
        assert rig.log.said() == ["The task was cancelled. The result is in the text channel."]


async def test_cancel_ignored_by_a_hung_agent_is_outcome_unknown_after_the_grace(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), mode="hang", cancel_grace_s=0.5) as rig:
        action_id = await propose(rig)
        await confirm(rig, action_id)
        pid = await agent_started(rig, action_id)

        outcome = await rig.broker.cancel(action_id, user_id=OPERATOR)
        assert outcome.ok, outcome
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.OUTCOME_UNKNOWN
        assert record.error_code == "ACP_CANCEL_UNCONFIRMED"
        assert "no cancelled stop reason within 0.5 s" in (record.detail or "")
        assert not alive(pid) and not group_alive(pid), "the hung agent survived"
        row = rig.store.workspace(f"scratch:{action_id}")
        assert row is not None and row.state is WorkspaceState.QUARANTINED
        assert (rig.workspace(action_id).private / QUARANTINE_MARKER).is_file()
        assert "UNKNOWN" in rig.channel.results()[0]


async def test_agent_sees_only_allowlisted_values_and_no_secret_is_posted(
    db_url: str, tmp_path: Path
) -> None:
    secrets = {
        "DISCORD_TOKEN": "sekret-discord-123",
        "OPENAI_API_KEY": "sekret-openai-456",
        "OPENAB_DATABASE_URL": "postgresql://voice:sekret-db-789@db.internal/openab",
    }
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="env",
        environ={"AGENT_KEY": "agent-visible-42", "PATH": "/usr/bin", **secrets},
        # Our own secrets are refused even when someone allowlists them.
        env_allowlist=("AGENT_KEY", *secrets),
    ) as rig:
        record = await run_to_end(rig)

        assert record.status is JobStatus.SUCCEEDED
        [result] = rig.channel.results()
        seen = json.loads(result.split("ENV ", 1)[1].splitlines()[0])
        assert seen["AGENT_KEY"] == "agent-visible-42"
        assert set(seen) == {"AGENT_KEY", "HOME", "TMPDIR"}
        everywhere = "\n".join(
            [
                rig.channel.everything_posted(),
                *rig.log.said(),
                repr(rig.store.require(record.id)),
                repr(rig.store.transitions(record.id)),
                repr(rig.store.audit_entries()),
                repr(rig.events),
            ]
        )
        assert "agent-visible-42" in everywhere
        for value in ("sekret-discord-123", "sekret-openai-456", "sekret-db-789"):
            assert value not in everywhere


async def test_result_delivery_failure_keeps_the_outcome_and_says_nothing(
    db_url: str, tmp_path: Path
) -> None:
    channel = FakeControlChannel(CallLog(), fail_result=True)
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), channel=channel) as rig:
        record = await run_to_end(rig)

        assert record.status is JobStatus.SUCCEEDED
        assert record.delivery_outcome == "failed"
        assert GOAL in (rig.workspace(record.id).path / "RESULT.md").read_text()
        assert rig.log.names()[-1] == "post_result" and rig.log.said() == []
        [posted] = rig.published(ActionResultPosted)
        assert (posted.execution, posted.delivered, posted.messages) == ("succeeded", False, 0)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return empty_repo(tmp_path / "repo")


async def test_cancel_between_confirm_and_start_frees_the_workspace(
    db_url: str, tmp_path: Path, repo: Path
) -> None:
    """A cancel that lands while the workspace is prepared wins; the workspace must not stay held.

    With a repository every action shares one workspace id, so a leaked hold blocks every later action.
    """
    # A slow git: the worktree takes a second to appear, so the operator's cancel lands first.
    slow_git = tmp_path / "slow-git"
    slow_git.write_text('#!/bin/sh\nsleep 1\nexec git "$@"\n')
    slow_git.chmod(0o755)
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), repo=repo, git=str(slow_git)) as rig:
        first = await propose(rig, "first task", call_id="t1:c1")
        await confirm(rig, first)
        cancelled = await rig.broker.cancel(first, user_id=OPERATOR)
        assert cancelled.ok, cancelled
        await rig.executor.wait_idle()

        assert rig.store.require(first).status is JobStatus.CANCELLED
        assert rig.published(AgentProcessStarted) == []
        row = rig.store.workspace(rig.workspaces.workspace_id(first))
        assert row is None or row.state is WorkspaceState.FREE, f"workspace left {row}"

        second = await run_to_end(rig, "second task", "t2:c1")
        assert second.status is JobStatus.SUCCEEDED, (second.error_code, second.detail)


async def test_closing_right_after_a_confirmation_does_not_wait_out_the_turn(
    db_url: str, tmp_path: Path
) -> None:
    """Close is bounded: an action confirmed but not yet spawned must not start a full turn during it."""
    turn_timeout_s = 4.0
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), mode="slow", turn_timeout_s=turn_timeout_s, cancel_grace_s=2.0
    ) as rig:
        action_id = await propose(rig)
        await confirm(rig, action_id)  # launched; its agent is not spawned yet

        began = rig.clock.monotonic()
        await rig.plane.aclose()
        took = rig.clock.monotonic() - began

        record = rig.store.require(action_id)
        assert took < turn_timeout_s, f"aclose took {took:.1f} s: it waited out the agent's turn"
        assert record.status in (JobStatus.CANCELLED, JobStatus.FAILED), (record.status, record.detail)
        for started in rig.published(AgentProcessStarted):
            assert not group_alive(started.pid)
