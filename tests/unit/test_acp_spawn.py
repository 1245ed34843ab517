"""Containment: allowlisted environment, own process group, stderr to a file, group kill."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from openab_voice.acp.spawn import AgentProcess, agent_environment
from openab_voice.acp.types import Workspace
from openab_voice.clock import SystemClock
from openab_voice.errors import AcpError

# A leader that starts a grandchild in its group, both ignoring SIGTERM and stdin closing.
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"  # real time: lives until killed
    "print(child.pid, flush=True)\n"
    "print('to stderr', file=sys.stderr, flush=True)\n"
    "time.sleep(600)\n"  # real time: the stubborn leader lives until its group is killed
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace(id="scratch:a", action_id="a", path=tmp_path / "work", private=tmp_path / "private")
    for folder in (ws.path, ws.home, ws.tmp, ws.logs):
        folder.mkdir(parents=True)
    return ws


def test_environment_is_the_allowlist_plus_throwaway_home_and_tmp(ws: Workspace) -> None:
    environ = {
        "PATH": "/bin",
        "AGENT_KEY": "k",
        "HOME": "/root",
        "TMPDIR": "/tmp",
        "DISCORD_TOKEN": "secret",
        "OPENAI_API_KEY": "secret",
        "OPENAB_DATABASE_URL": "postgresql://u:pw@h/db",
        "OPENAB_DATABASE_URL_FILE": "/run/secret",
        "OPENAB_OPERATOR_USER_ID": "1",
    }
    allow = (
        "PATH",
        "AGENT_KEY",
        "MISSING",
        "HOME",
        "DISCORD_TOKEN",
        "OPENAB_DATABASE_URL_FILE",
        "OPENAB_OPERATOR_USER_ID",
    )
    env = agent_environment(allow, environ, ws)
    assert env == {"PATH": "/bin", "AGENT_KEY": "k", "HOME": str(ws.home), "TMPDIR": str(ws.tmp)}


async def test_unspawnable_command_is_spawn_failed(ws: Workspace) -> None:
    with pytest.raises(AcpError) as caught:
        await AgentProcess.start(
            ("/nonexistent/agent",), env={}, cwd=ws.path, stderr_log=ws.logs / "e.log", clock=SystemClock()
        )
    assert caught.value.code == "ACP_SPAWN_FAILED"
    assert "/nonexistent/agent" in caught.value.message


async def test_stop_kills_the_whole_group_including_stubborn_grandchildren(ws: Workspace) -> None:
    log = ws.logs / "e.log"
    process = await AgentProcess.start(
        (sys.executable, "-c", STUBBORN), env={}, cwd=ws.path, stderr_log=log, clock=SystemClock()
    )
    try:
        grandchild = int(await process.stdout.readline())
        assert os.getpgid(grandchild) == process.pgid == process.pid
        assert os.getsid(process.pid) == process.pid, "the agent leads its own session"
        assert not process.quiescent()
        assert await process.stop(0.2, kill_wait_s=5.0)
        assert process.quiescent()
        assert process.returncode == -signal.SIGKILL, "SIGTERM was ignored, so SIGKILL had to follow"
        assert not _alive(grandchild)
        assert "to stderr" in log.read_text()
    finally:
        process.kill_now()


async def test_stop_of_an_already_exited_agent(ws: Workspace) -> None:
    process = await AgentProcess.start(
        (sys.executable, "-c", "pass"), env={}, cwd=ws.path, stderr_log=ws.logs / "e.log", clock=SystemClock()
    )
    assert await process.stdout.read() == b""  # EOF: it exited on its own
    assert await process.stop(1.0)
    assert process.returncode == 0


def _alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return state[state.rfind(")") + 2] != "Z"
