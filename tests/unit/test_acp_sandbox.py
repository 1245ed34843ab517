"""The agent sandbox and the workspace_exec ceiling (issue 10, finding 6).

bubblewrap is a real dependency here (``scripts/setup.sh`` installs it): without it these tests fail,
as the PostgreSQL ones do, except the one that checks how its absence is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from openab_voice.acp.containment import ContainmentMode
from openab_voice.acp.sandbox import Sandbox, build_containment, find_bwrap
from openab_voice.acp.types import Workspace
from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.actions.events import AgentProcessStarted, AgentPromptSent
from openab_voice.actions.ports import CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL
from openab_voice.actions.requests import BrokerSettings, Outcome
from openab_voice.clock import FakeClock, SystemClock
from openab_voice.errors import AcpError
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.testing.acp_agent import SETSID_MARKER
from tests.fakes.actions import OPERATOR, PlaneRig, group_alive, plane_rig, request
from tests.fakes.git import git
from tests.fakes.waiting import until

SECRET = "discord-token-never-visible"


@pytest.fixture
def bwrap() -> str:
    found = find_bwrap()
    if found is None:
        pytest.fail(
            "bubblewrap is not installed: run scripts/setup.sh (it installs `bubblewrap`)", pytrace=False
        )
    return found


def sandbox_for(data_dir: Path, environ: dict[str, str] | None = None) -> Sandbox:
    containment = build_containment("bwrap", data_dir=data_dir, environ=environ or {})
    assert containment.sandbox is not None, containment.reason
    return containment.sandbox


def inside(sandbox: Sandbox, workspace: Workspace, script: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(workspace.home), "TMPDIR": str(workspace.tmp)}
    argv = sandbox.command(["sh", "-c", script], workspace)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)


async def test_the_workspace_is_the_only_writable_path_and_ours_are_invisible(
    bwrap: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    manager = WorkspaceManager(data_dir / "workspaces", clock=FakeClock())
    mine, other = await manager.prepare("a-mine"), await manager.prepare("a-other")
    (other.path / "their-work.txt").write_text("not yours")
    (data_dir / "store.db").write_text("the job store")
    token = tmp_path / "secrets" / "discord.token"
    token.parent.mkdir()
    token.write_text(SECRET)
    outside = Path.home() / f".openab-sandbox-test-{os.getpid()}"
    sandbox = sandbox_for(data_dir, {"DISCORD_TOKEN_FILE": str(token)})

    done = inside(
        sandbox,
        mine,
        f"""
        echo edited > {mine.path}/file.txt && echo WROTE-WORKSPACE
        echo h > "$HOME/h" && echo WROTE-HOME
        echo t > /tmp/t && echo WROTE-TMP
        echo x > /etc/openab-sandbox-test 2>/dev/null || echo REFUSED-ETC
        echo x > {outside} 2>/dev/null || echo REFUSED-HOME-DIR
        cat {data_dir}/store.db 2>/dev/null || echo NO-STORE
        ls {other.path} 2>/dev/null || echo NO-OTHER-WORKSPACE
        ls {mine.logs} 2>/dev/null || echo NO-LOGS
        cat {token}; echo END-TOKEN
        """,
    )

    out = done.stdout
    for seen in ("WROTE-WORKSPACE", "WROTE-HOME", "WROTE-TMP", "REFUSED-ETC", "REFUSED-HOME-DIR"):
        assert seen in out, (seen, out, done.stderr)
    for hidden in ("NO-STORE", "NO-OTHER-WORKSPACE", "NO-LOGS"):
        assert hidden in out, (hidden, out)
    assert SECRET not in out and "the job store" not in out and "not yours" not in out
    assert (mine.path / "file.txt").read_text() == "edited\n"
    assert_nothing_written_outside(outside)


def assert_nothing_written_outside(outside: Path) -> None:
    assert not outside.exists() and not os.path.exists("/etc/openab-sandbox-test")
    assert not os.path.exists("/tmp/t"), "the sandbox's /tmp is private"


def setsid_children(marker_dir: Path) -> list[int]:
    """Live processes of the scripted agent's setsid sleeper started in ``marker_dir``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text()
        except OSError:
            continue
        if SETSID_MARKER.encode() in argv and str(marker_dir).encode() in argv and ") Z" not in state:
            found.append(int(entry.name))
    return found


async def test_a_setsid_child_dies_with_the_run(bwrap: str, db_url: str, tmp_path: Path) -> None:
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="setsid-child",
        sandbox=sandbox_for(tmp_path / "ws"),
        cancel_grace_s=0.3,
    ) as rig:
        action_id = await confirmed(rig, "start a helper")
        work = rig.workspace(action_id).path
        await until(lambda: setsid_children(work), "the agent's setsid child")
        [child] = setsid_children(work)
        assert os.getpgid(child) != os.getpgid(agent_pid(rig, action_id)), "it left the agent's group"

        assert (await rig.broker.cancel(action_id, user_id=OPERATOR)).ok
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.OUTCOME_UNKNOWN  # it ignored the cancel: killed
        assert record.detail is not None and "process group quiescent" in record.detail
        assert setsid_children(work) == [], "the setsid child outlived the run"
        assert not group_alive(agent_pid(rig, action_id))


def agent_pid(rig: PlaneRig, action_id: str) -> int:
    [started] = [e for e in rig.published(AgentProcessStarted) if e.action_id == action_id]
    return started.pid


async def confirmed(rig: PlaneRig, goal: str, decision: str = CONFIRM) -> str:
    outcome = await rig.broker.propose(request(goal))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        decision=decision,
        action_id=action_id,
        user_id=OPERATOR,
        message_id=rig.channel.message_ids[action_id],
    )
    assert clicked.ok, clicked
    await until(
        lambda: (
            any(e.action_id == action_id for e in rig.published(AgentPromptSent)) or not rig.executor.running
        ),
        "the prompt sent, or the run over",
    )
    return action_id


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A throwaway git repository with a bug and a failing test."""
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "test_calc.py").write_text(
        "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "buggy")
    yield repo


@pytest.fixture
async def project_rig(bwrap: str, db_url: str, tmp_path: Path, project: Path) -> AsyncIterator[PlaneRig]:
    """A plane whose agent edits ``project`` and runs its tests, in the sandbox."""
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="run-tests",
        repo=project,
        sandbox=sandbox_for(tmp_path / "ws"),
    ) as rig:
        yield rig


async def test_a_task_edits_a_repository_and_runs_its_tests_under_workspace_exec(
    project_rig: PlaneRig, project: Path
) -> None:
    goal = "fix the add function and run the tests"
    action_id = await confirmed(project_rig, goal, CONFIRM_EXEC)
    await project_rig.executor.wait_idle()

    [proposal] = project_rig.channel.proposals()
    assert proposal.offers_exec and proposal.exec_note is None
    record = project_rig.store.require(action_id)
    assert (record.status, record.effect_ceiling) == (JobStatus.SUCCEEDED, EffectCeiling.WORKSPACE_EXEC)
    assert record.result_text is not None and "TESTS exit=0" in record.result_text, record.result_text
    assert "OK" in record.result_text
    assert "return a + b" in (project_rig.workspace(action_id).path / "calc.py").read_text()
    assert "return a - b" in (project / "calc.py").read_text(), "the repository itself is untouched"
    [result] = project_rig.channel.results()
    assert "refused" not in result.splitlines()[0]


async def test_without_the_exec_button_the_command_is_refused(project_rig: PlaneRig) -> None:
    action_id = await confirmed(project_rig, "fix the add function and run the tests", CONFIRM)
    await project_rig.executor.wait_idle()

    record = project_rig.store.require(action_id)
    assert record.effect_ceiling is EffectCeiling.WORKSPACE_WRITE
    assert record.result_text is not None and "Not allowed to run the tests." in record.result_text
    [result] = project_rig.channel.results()
    assert "1 of its 2 permission requests was refused (ceiling workspace_write)" in result


async def test_without_bubblewrap_workspace_exec_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no bwrap to be found
    containment = build_containment("auto", data_dir=tmp_path, environ={})
    assert containment.mode is ContainmentMode.UNAVAILABLE and containment.sandbox is None
    assert containment.refusal is not None and "bubblewrap" in containment.refusal
    with pytest.raises(AcpError) as caught:
        build_containment("bwrap", data_dir=tmp_path, environ={})
    assert caught.value.code == "ACP_SANDBOX_UNAVAILABLE"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")

    async with plane_rig(db_url, tmp_path, clock=SystemClock()) as rig:
        outcome = await rig.broker.propose(request("run the test suite"))
        assert outcome.action is not None
        [proposal] = rig.channel.proposals()
        assert not proposal.offers_exec and proposal.exec_note is not None
        assert "sandbox" in proposal.exec_note

        clicked = await rig.broker.click(
            decision=CONFIRM_EXEC, action_id=outcome.action.id, user_id=OPERATOR, message_id=None
        )
        assert (clicked.ok, clicked.code) == (False, "ACTION_EXEC_UNAVAILABLE")
        assert "sandbox" in clicked.message
        assert rig.store.require(outcome.action.id).status is JobStatus.DELIVERED  # still the operator's call


@pytest.mark.parametrize("max_effect", [EffectCeiling.EXTERNAL, EffectCeiling.WORKSPACE_EXEC])
async def test_the_plain_confirm_never_grants_exec_and_max_effect_caps_it(
    bwrap: str, db_url: str, tmp_path: Path, max_effect: EffectCeiling
) -> None:
    """Issue 29: with ``OPENAB_ACTION_MAX_EFFECT=external`` the plain Confirm granted ``external``.

    A goal that asks to run something, hinted ``external``: the plain Confirm grants
    ``workspace_write`` whatever the policy allows; the external button is offered only where the
    policy allows ``external``, and a click on it where it was not offered is refused.
    """
    capped = BrokerSettings(
        operator_user_id=1, exec_unavailable=None, max_effect=EffectCeiling.WORKSPACE_WRITE
    )
    assert capped.exec_refusal() is not None
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), sandbox=sandbox_for(tmp_path / "ws"), max_effect=max_effect
    ) as rig:
        outcome = await rig.broker.propose(
            request("fetch the fixtures and run the tests", effect=EffectCeiling.EXTERNAL)
        )
        assert outcome.ok and outcome.action is not None, outcome
        action_id = outcome.action.id
        [proposal] = rig.channel.proposals()
        assert proposal.effect_ceiling == "workspace_write" and proposal.offers_exec
        assert proposal.offers_external is (max_effect is EffectCeiling.EXTERNAL)

        if not proposal.offers_external:
            refused = await click(rig, action_id, CONFIRM_EXTERNAL)
            assert (refused.ok, refused.code) == (False, "ACTION_DECISION_NOT_OFFERED")
        clicked = await click(rig, action_id, CONFIRM)
        assert clicked.ok, clicked
        await rig.executor.wait_idle()
        record = rig.store.require(action_id)
        assert record.effect_hint is min(max_effect, EffectCeiling.EXTERNAL, key=lambda c: c.rank)
        assert record.effect_ceiling is EffectCeiling.WORKSPACE_WRITE


async def click(rig: PlaneRig, action_id: str, decision: str) -> Outcome:
    """The operator's click on ``decision`` on the proposal's own message."""
    return await rig.broker.click(
        decision=decision,
        action_id=action_id,
        user_id=OPERATOR,
        message_id=rig.channel.message_ids[action_id],
    )


async def test_an_agent_installed_under_tmp_still_runs_and_nothing_else_of_tmp_shows(
    bwrap: str, tmp_path: Path
) -> None:
    """A CI clone or a throwaway venv under /tmp: the private /tmp must not hide the agent itself."""
    data_dir = tmp_path / "data"
    manager = WorkspaceManager(data_dir / "workspaces", clock=FakeClock())
    workspace = await manager.prepare("a-runtime")
    runtime = tmp_path / "venv"
    (runtime / "bin").mkdir(parents=True)
    agent = runtime / "bin" / "agent.sh"
    agent.write_text("echo AGENT-RAN\n")
    neighbour = tmp_path / "neighbour.txt"
    neighbour.write_text("someone else's temp file")
    base = build_containment("bwrap", data_dir=data_dir, environ={}).sandbox
    assert base is not None
    sandbox = Sandbox(bwrap=base.bwrap, hidden_dirs=base.hidden_dirs, runtime_dirs=(runtime,))
    done = inside(sandbox, workspace, f"sh {agent}")
    assert "AGENT-RAN" in done.stdout, done.stderr
    peek = inside(
        sandbox, workspace, f"cat {neighbour} 2>/dev/null || echo NO-NEIGHBOUR; echo > {agent} || echo RO"
    )
    assert "NO-NEIGHBOUR" in peek.stdout and "RO" in peek.stdout, peek
    assert agent.read_text() == "echo AGENT-RAN\n"
