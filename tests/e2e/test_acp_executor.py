"""The ACP turn driver against the scripted agent: real subprocesses, no mocks."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from openab_voice.acp.driver import AgentRun
from openab_voice.acp.types import DeliveryOutcome, ExecutionOutcome, TurnCompletion, TurnRequest, Workspace
from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.clock import Clock, FakeClock, SystemClock
from openab_voice.jobs import EffectCeiling
from tests.fakes.git import empty_repo
from tests.fakes.waiting import until

GOAL = "add a greeting to the project"
TURN_TIMEOUT_S = 1.5
GRACE_S = 0.5
# Where the agent is expected to answer the cancel: room for a loaded CI machine; unused time is not waited.
ANSWER_GRACE_S = 3.0


class Recorder:
    """Collects ``on_event`` calls and lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []
        self._seen: dict[str, asyncio.Event] = {}

    def __call__(self, kind: str, data: dict[str, object]) -> None:
        self.events.append((kind, data))
        self._flag(kind).set()

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def first(self, kind: str) -> dict[str, object]:
        return next(data for k, data in self.events if k == kind)

    async def wait(self, kind: str) -> None:
        await asyncio.wait_for(self._flag(kind).wait(), 10)

    def _flag(self, kind: str) -> asyncio.Event:
        return self._seen.setdefault(kind, asyncio.Event())


@pytest.fixture
async def workspace(tmp_path: Path) -> Workspace:
    return await WorkspaceManager(tmp_path / "workspaces", clock=SystemClock()).prepare("act-1")


def agent(mode: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "openab_voice.testing.acp_agent", "--mode", mode)


def request(
    workspace: Workspace,
    mode: str,
    *,
    ceiling: EffectCeiling = EffectCeiling.WORKSPACE_WRITE,
    environ: dict[str, str] | None = None,
    allow: tuple[str, ...] = (),
    turn_timeout_s: float = TURN_TIMEOUT_S,
    cancel_grace_s: float = GRACE_S,
    command: tuple[str, ...] | None = None,
) -> TurnRequest:
    return TurnRequest(
        action_id="act-1",
        goal=GOAL,
        effect_ceiling=ceiling,
        workspace=workspace,
        command=command or agent(mode),
        env_allowlist=allow,
        environ=environ or {},
        turn_timeout_s=turn_timeout_s,
        cancel_grace_s=cancel_grace_s,
        startup_timeout_s=10.0,
    )


async def run_turn(
    req: TurnRequest,
    *,
    clock: Clock | None = None,
    during: Callable[[AgentRun, Recorder], Awaitable[None]] | None = None,
) -> tuple[TurnCompletion, Recorder]:
    events = Recorder()
    run = AgentRun(req, clock=clock or SystemClock(), on_event=events)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(run.run())
        if during is not None:
            await during(run, events)
    completion = task.result()
    if "process_started" in events.kinds():
        assert not _alive(int(str(events.first("process_started")["pid"]))), "the agent outlived its run"
    return completion, events


async def cancel_after_prompt(run: AgentRun, events: Recorder) -> None:
    await events.wait("prompt_sent")
    await run.cancel()


async def test_normal_turn_succeeds_and_writes_within_the_ceiling(workspace: Workspace) -> None:
    completion, events = await run_turn(request(workspace, "normal"))
    assert completion.execution is ExecutionOutcome.SUCCEEDED
    assert (completion.stop_reason, completion.error_code) == ("end_turn", None)
    assert completion.prompt_sent and not completion.quarantined
    assert completion.delivery is DeliveryOutcome.NOT_ATTEMPTED
    assert f"Wrote RESULT.md: {GOAL}" in completion.output
    assert GOAL in (workspace.path / "RESULT.md").read_text()
    [decision] = completion.permission_decisions
    assert decision.offered == ("allow_once", "reject_once", "allow_always")
    assert (decision.option_kind, decision.kind, decision.needed) == (
        "allow_once",
        "edit",
        EffectCeiling.WORKSPACE_WRITE,
    )
    assert "process group quiescent" in completion.detail
    kinds = events.kinds()
    for earlier, later in [
        ("process_started", "initialized"),
        ("session_created", "prompt_sent"),
        ("permission", "stopped"),
    ]:
        assert kinds.index(earlier) < kinds.index(later)
    assert events.first("stopped")["quiescent"] is True


async def test_read_only_ceiling_rejects_the_edit(workspace: Workspace) -> None:
    completion, _ = await run_turn(request(workspace, "normal", ceiling=EffectCeiling.READ_ONLY))
    assert completion.execution is ExecutionOutcome.SUCCEEDED  # the agent ended its turn normally
    assert completion.permission_decisions[0].option_kind == "reject_once"
    assert "Permission refused" in completion.output
    assert not (workspace.path / "RESULT.md").exists()


async def test_only_persistent_options_are_answered_cancelled(workspace: Workspace) -> None:
    completion, _ = await run_turn(request(workspace, "always-only"))
    [decision] = completion.permission_decisions
    assert decision.offered == ("allow_always", "reject_always")
    assert (decision.outcome, decision.option_id, decision.option_kind) == ("cancelled", None, None)
    assert not (workspace.path / "RESULT.md").exists()


async def test_external_effect_under_workspace_write_is_rejected(workspace: Workspace) -> None:
    completion, _ = await run_turn(request(workspace, "external"))
    [decision] = completion.permission_decisions
    assert (decision.kind, decision.needed, decision.option_kind) == (
        "execute",
        EffectCeiling.EXTERNAL,
        "reject_once",
    )
    assert "Not allowed." in completion.output


async def test_crash_after_the_prompt_is_outcome_unknown(workspace: Workspace) -> None:
    completion, _ = await run_turn(request(workspace, "crash"))
    assert completion.execution is ExecutionOutcome.OUTCOME_UNKNOWN
    assert completion.error_code == "ACP_AGENT_EXITED"
    assert completion.prompt_sent and completion.quarantined
    assert "Starting, then crashing." in completion.output, "partial output is kept"


async def test_hung_turn_times_out_as_outcome_unknown(workspace: Workspace) -> None:
    completion, events = await run_turn(request(workspace, "hang"))
    assert completion.execution is ExecutionOutcome.OUTCOME_UNKNOWN
    assert completion.error_code == "ACP_TURN_TIMEOUT"
    assert completion.prompt_sent and completion.quarantined
    assert events.first("cancel_sent")["reason"] == "turn timeout"
    assert "process group quiescent" in completion.detail


async def test_turn_timeout_runs_on_the_injected_clock(workspace: Workspace) -> None:
    clock = FakeClock()

    async def autojump(run: AgentRun, events: Recorder) -> None:
        await events.wait("prompt_sent")
        clock.advance(899.0)  # nothing happens before the 900 s deadline...
        while "stopped" not in events.kinds():
            clock.advance(0.05)  # ...then small steps, so the killed agent has real time to die
            await asyncio.sleep(0.005)  # real time: the killed agent dies in real time, not the fake clock's

    completion, _ = await run_turn(
        request(workspace, "hang", turn_timeout_s=900.0), clock=clock, during=autojump
    )
    assert completion.error_code == "ACP_TURN_TIMEOUT"
    assert "900 s" in completion.detail


async def test_cancel_confirmed_by_the_agent_is_cancelled(workspace: Workspace) -> None:
    completion, events = await run_turn(
        request(workspace, "slow", cancel_grace_s=ANSWER_GRACE_S), during=cancel_after_prompt
    )
    assert completion.execution is ExecutionOutcome.CANCELLED
    assert (completion.stop_reason, completion.error_code) == ("cancelled", None)
    assert not completion.quarantined
    assert events.first("cancel_sent")["reason"] == "operator"


async def test_unanswered_cancel_kills_the_group_and_is_outcome_unknown(workspace: Workspace) -> None:
    completion, _ = await run_turn(request(workspace, "hang"), during=cancel_after_prompt)
    assert completion.execution is ExecutionOutcome.OUTCOME_UNKNOWN
    assert completion.error_code == "ACP_CANCEL_UNCONFIRMED"
    assert completion.quarantined
    assert "no cancelled stop reason within 0.5 s" in completion.detail


async def test_group_kill_reaches_the_grandchild(workspace: Workspace) -> None:
    pid_file = workspace.path / "CHILD.pid"

    async def cancel_once_child_runs(run: AgentRun, events: Recorder) -> None:
        await events.wait("prompt_sent")
        await until(lambda: pid_file.exists() and pid_file.read_text(), "the grandchild's pid file")
        assert _alive(int(pid_file.read_text()))
        await run.cancel()

    completion, _ = await run_turn(request(workspace, "spawn-child"), during=cancel_once_child_runs)
    assert completion.execution is ExecutionOutcome.OUTCOME_UNKNOWN
    assert not _alive(int(pid_file.read_text())), "the grandchild survived the group kill"


async def test_cancel_answered_with_end_turn_is_not_trusted(workspace: Workspace) -> None:
    completion, _ = await run_turn(
        request(workspace, "cancel-end-turn", cancel_grace_s=ANSWER_GRACE_S), during=cancel_after_prompt
    )
    assert completion.execution is ExecutionOutcome.OUTCOME_UNKNOWN
    assert (completion.stop_reason, completion.error_code) == ("end_turn", "ACP_CANCEL_UNCONFIRMED")
    assert completion.quarantined
    [decision] = completion.permission_decisions
    assert decision.outcome == "cancelled" and "cancel is in progress" in decision.reason


async def test_authentication_failure_before_the_prompt_is_failed(workspace: Workspace) -> None:
    completion, events = await run_turn(request(workspace, "auth"))
    assert completion.execution is ExecutionOutcome.FAILED
    assert completion.error_code == "ACP_AUTH_REQUIRED"
    assert not completion.prompt_sent and not completion.quarantined
    assert "-32000" in completion.detail
    assert "prompt_sent" not in events.kinds()


async def test_agent_sees_only_the_allowlist_and_throwaway_home(workspace: Workspace) -> None:
    environ = {
        "AGENT_KEY": "agent-credential",
        "DISCORD_TOKEN": "discord-secret",
        "OPENAI_API_KEY": "openai-secret",
        "OPENAB_DATABASE_URL": "postgresql://user:db-secret@host/db",
        "HOME": "/root",
    }
    completion, _ = await run_turn(
        request(workspace, "env", environ=environ, allow=("AGENT_KEY", "DISCORD_TOKEN"))
    )
    seen = json.loads(completion.output.removeprefix("ENV "))
    assert seen == {
        "AGENT_KEY": "agent-credential",
        "HOME": str(workspace.home),
        "TMPDIR": str(workspace.tmp),
    }
    for secret in ("discord-secret", "openai-secret", "db-secret"):
        assert secret not in completion.output


async def test_unspawnable_command_fails_before_anything_runs(workspace: Workspace) -> None:
    completion, events = await run_turn(
        request(workspace, "normal", command=("/nonexistent/agent-cli", "--acp"))
    )
    assert completion.execution is ExecutionOutcome.FAILED
    assert completion.error_code == "ACP_SPAWN_FAILED"
    assert not completion.prompt_sent and not completion.quarantined
    assert events.kinds() == []


async def test_cancel_before_the_run_starts_spawns_nothing(workspace: Workspace) -> None:
    events = Recorder()
    run = AgentRun(request(workspace, "normal"), clock=SystemClock(), on_event=events)
    await run.cancel()
    completion = await run.run()
    assert completion.execution is ExecutionOutcome.CANCELLED
    assert not completion.prompt_sent and events.kinds() == []
    with pytest.raises(RuntimeError):
        await run.run()


async def test_cancelling_the_caller_task_still_kills_the_agent(workspace: Workspace) -> None:
    events = Recorder()
    run = AgentRun(request(workspace, "hang", turn_timeout_s=60.0), clock=SystemClock(), on_event=events)
    task = asyncio.create_task(run.run())
    await events.wait("prompt_sent")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(int(str(events.first("process_started")["pid"])))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return empty_repo(tmp_path / "repo")


async def test_turn_in_a_git_worktree(tmp_path: Path, repo: Path) -> None:
    manager = WorkspaceManager(tmp_path / "ws", repo, clock=SystemClock())
    ws = await manager.prepare("act-1")
    completion, _ = await run_turn(request(ws, "normal"))
    assert completion.execution is ExecutionOutcome.SUCCEEDED
    assert (ws.path / "RESULT.md").exists() and not (repo / "RESULT.md").exists()
    await manager.cleanup(ws)


def _alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return state[state.rfind(")") + 2] != "Z"
