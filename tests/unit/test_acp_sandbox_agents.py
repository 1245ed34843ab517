"""Agents installed anywhere start in the sandbox, or fail naming the missing path; their throwaway
HOME does not outlive the action (issue 28: held against claude-code-acp and Codex)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from openab_voice.acp.sandbox import Sandbox, build_containment, command_paths, find_bwrap
from openab_voice.clock import SystemClock
from openab_voice.errors import AcpError
from openab_voice.jobs import JobStatus
from tests.fakes.actions import PlaneRig, agent_command, plane_rig, propose_and_confirm

AGENT_KEY = "codex-auth-never-left-behind"


def sandbox_for(data_dir: Path) -> Sandbox:
    if find_bwrap() is None:
        pytest.fail("bubblewrap is not installed: run scripts/setup.sh", pytrace=False)
    sandbox = build_containment("bwrap", data_dir=data_dir, environ={}).sandbox
    assert sandbox is not None
    return sandbox


def npm_like_install(root: Path) -> Path:
    """An npm-style tree: ``.bin/openab-agent`` links into its package, whose script loads a sibling."""
    package = root / "node_modules" / "@scope" / "agent"
    (package / "dist").mkdir(parents=True)
    (package / "lib").mkdir()
    (package / "lib" / "helper.py").write_text(
        "def run():\n    from openab_voice.testing.acp_agent import main\n    main(['--mode', 'normal'])\n"
    )
    script = package / "dist" / "agent.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))\n"
        "import helper\n"
        "helper.run()\n"
    )
    script.chmod(0o755)
    bin_dir = root / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "openab-agent").symlink_to(Path("..") / "@scope" / "agent" / "dist" / "agent.py")
    return bin_dir


async def run_one(rig: PlaneRig) -> str:
    action_id = await propose_and_confirm(rig, "write a haiku")
    await rig.executor.wait_idle()
    return action_id


def test_the_sandbox_sees_where_an_npm_bin_link_points_and_its_whole_tree(tmp_path: Path) -> None:
    bin_dir = npm_like_install(tmp_path / "project")
    needed = command_paths([str(bin_dir / "openab-agent")], None)
    assert tmp_path / "project" / "node_modules" in needed  # the package's siblings, not only .bin
    assert bin_dir in needed
    on_path = command_paths(["openab-agent"], f"/nonexistent:{bin_dir}")
    assert tmp_path / "project" / "node_modules" in on_path
    with pytest.raises(AcpError, match=r"'no-such-agent' is not on the agent's PATH \(/nowhere\)"):
        command_paths(["no-such-agent"], "/nowhere")


@pytest.mark.parametrize("how", ["absolute", "on-path"])
async def test_a_symlinked_npm_agent_starts_in_the_sandbox(db_url: str, tmp_path: Path, how: str) -> None:
    bin_dir = npm_like_install(tmp_path / "project")
    command = (str(bin_dir / "openab-agent"),) if how == "absolute" else ("openab-agent",)
    environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        command=command,
        sandbox=sandbox_for(tmp_path / "ws"),
        environ=environ,
        env_allowlist=("PATH",),
    ) as rig:
        action_id = await run_one(rig)
        record = rig.store.require(action_id)
        assert record.status is JobStatus.SUCCEEDED, record.detail
        assert (rig.workspace(action_id).path / "RESULT.md").is_file()  # noqa: ASYNC240


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing", "is not on the agent's PATH"),
        ("data-dir", "which is inside"),
    ],
)
async def test_an_agent_the_sandbox_cannot_see_fails_naming_the_path(
    db_url: str, tmp_path: Path, where: str, message: str
) -> None:
    data_dir = tmp_path / "ws"
    if where == "missing":
        command: tuple[str, ...] = ("no-such-agent",)
    else:
        hidden = data_dir / "agents" / "agent.py"
        hidden.parent.mkdir(parents=True)
        hidden.write_text("print('never')\n")
        command = (sys.executable, str(hidden))
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), command=command, sandbox=sandbox_for(data_dir)
    ) as rig:
        action_id = await run_one(rig)
        record = rig.store.require(action_id)
        assert (record.status, record.error_code) == (JobStatus.FAILED, "ACP_SPAWN_FAILED")
        assert message in (record.detail or "")
        if where == "data-dir":
            assert str(data_dir) in (record.detail or "")


@pytest.mark.parametrize("mode", ["normal", "crash"])
async def test_the_agents_home_and_the_key_it_wrote_there_are_gone_when_it_settles(
    db_url: str, tmp_path: Path, mode: str
) -> None:
    # Like Codex: the agent writes its key under $HOME (.codex/auth.json) and a shell snapshot.
    keep_key = (
        'mkdir -p "$HOME/.codex" "$HOME/.codex/shell_snapshots" && '
        f'echo {AGENT_KEY} > "$HOME/.codex/auth.json" && echo snap > "$HOME/.codex/shell_snapshots/s.sh" && '
        f'echo scratch > "$TMPDIR/scratch" && exec "$@"'
    )
    command = ("/bin/sh", "-c", keep_key, "agent", *agent_command(mode))
    async with plane_rig(
        db_url, tmp_path, clock=SystemClock(), command=command, sandbox=sandbox_for(tmp_path / "ws")
    ) as rig:
        action_id = await run_one(rig)
        record = rig.store.require(action_id)
        workspace = rig.workspace(action_id)
        expected = JobStatus.SUCCEEDED if mode == "normal" else JobStatus.OUTCOME_UNKNOWN
        assert record.status is expected, record.detail
        leftovers = await asyncio.to_thread(
            lambda: [p for root in (workspace.home, workspace.tmp) if root.exists() for p in root.rglob("*")]
        )
        assert leftovers == [], leftovers
        # What stays: the working tree (quarantined when unknown) and our logs.
        assert workspace.path.is_dir() and workspace.logs.is_dir()  # noqa: ASYNC240
        if mode == "crash":
            assert rig.workspaces.quarantine_reason(workspace) is not None
        assert AGENT_KEY not in (record.result_text or "") + (record.detail or "")
