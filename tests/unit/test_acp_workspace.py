"""Workspaces: fresh directories and git worktrees, quarantine, cleanup."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from openab_voice.acp.workspace import QUARANTINE_MARKER, WorkspaceManager
from openab_voice.clock import FakeClock
from openab_voice.errors import AcpError
from tests.fakes.git import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first")
    return path.resolve()


async def test_fresh_workspace_layout(tmp_path: Path) -> None:
    manager = WorkspaceManager(tmp_path / "ws", clock=FakeClock())
    ws = await manager.prepare("act-1")
    assert ws.id == "scratch:act-1" == manager.workspace_id("act-1")
    assert ws.path == tmp_path / "ws" / "act-1" / "work"
    assert list(ws.path.iterdir()) == []
    for folder in (ws.home, ws.tmp, ws.logs):
        assert folder.is_dir() and folder.is_relative_to(ws.private)
    assert not ws.private.is_relative_to(ws.path), "the agent's working tree must not contain our files"
    assert stat.S_IMODE(ws.private.parent.stat().st_mode) == 0o700
    assert manager.locate("act-1") == ws


async def test_a_workspace_is_never_reused(tmp_path: Path) -> None:
    manager = WorkspaceManager(tmp_path, clock=FakeClock())
    await manager.prepare("act-1")
    with pytest.raises(AcpError) as caught:
        await manager.prepare("act-1")
    assert caught.value.code == "ACP_WORKSPACE_EXISTS"


@pytest.mark.parametrize("action_id", ["../x", "a/b", "", ".", "-rf"])
async def test_unsafe_action_ids_are_refused(action_id: str, tmp_path: Path) -> None:
    with pytest.raises(AcpError) as caught:
        await WorkspaceManager(tmp_path, clock=FakeClock()).prepare(action_id)
    assert caught.value.code == "ACP_WORKSPACE_INVALID"


async def test_quarantine_blocks_cleanup_until_released(tmp_path: Path) -> None:
    clock = FakeClock(wall_start=1_700_000_123.0)
    manager = WorkspaceManager(tmp_path, clock=clock)
    ws = await manager.prepare("act-1")
    (ws.path / "half-done.txt").write_text("partial")
    manager.quarantine(ws, "outcome unknown: turn timeout")
    record = json.loads((ws.private / QUARANTINE_MARKER).read_text())
    assert record == {"action_id": "act-1", "reason": "outcome unknown: turn timeout", "at": 1_700_000_123.0}
    assert manager.quarantine_reason(ws) == "outcome unknown: turn timeout"
    with pytest.raises(AcpError) as caught:
        await manager.cleanup(ws)
    assert caught.value.code == "ACP_WORKSPACE_QUARANTINED"
    assert (ws.path / "half-done.txt").read_text() == "partial", "a quarantined tree is left untouched"
    manager.release(ws)
    assert manager.quarantine_reason(ws) is None
    await manager.cleanup(ws)
    assert not ws.private.parent.exists()


async def test_an_unreadable_marker_still_quarantines(tmp_path: Path) -> None:
    manager = WorkspaceManager(tmp_path, clock=FakeClock())
    ws = await manager.prepare("act-1")
    (ws.private / QUARANTINE_MARKER).write_text("garbage")
    assert manager.quarantine_reason(ws) == "unreadable quarantine marker"


async def test_cleanup_removes_read_only_trees(tmp_path: Path) -> None:
    manager = WorkspaceManager(tmp_path, clock=FakeClock())
    ws = await manager.prepare("act-1")
    locked = ws.path / "pkg" / "mod"
    locked.mkdir(parents=True)
    (locked / "f.go").write_text("package x")
    os.chmod(locked, 0o500)
    os.chmod(locked.parent, 0o500)
    await manager.cleanup(ws)
    assert not ws.private.parent.exists()


async def test_git_worktree_workspace(tmp_path: Path, repo: Path) -> None:
    manager = WorkspaceManager(tmp_path / "ws", repo, clock=FakeClock())
    first = await manager.prepare("act-1")
    second = await manager.prepare("act-2")
    assert first.id == second.id == f"repo:{repo}", "one id per repo: one running action per repo"
    assert first.repo == repo
    assert (first.path / "README.md").read_text() == "hello\n"
    assert git(first.path, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")
    assert str(first.path) in git(repo, "worktree", "list")
    (first.path / "new.txt").write_text("untracked work")
    (first.path / "README.md").write_text("dirty")
    await manager.cleanup(first)
    assert not first.private.parent.exists()
    listing = git(repo, "worktree", "list")
    assert str(first.path) not in listing and str(second.path) in listing
    assert (repo / "README.md").read_text() == "hello\n", "the repository itself is untouched"


async def test_worktree_cleanup_after_the_tree_vanished(tmp_path: Path, repo: Path) -> None:
    manager = WorkspaceManager(tmp_path / "ws", repo, clock=FakeClock())
    ws = await manager.prepare("act-1")
    shutil.rmtree(ws.path)
    await manager.cleanup(ws)
    assert str(ws.path) not in git(repo, "worktree", "list")


async def test_not_a_repository_fails_and_leaves_nothing(tmp_path: Path) -> None:
    not_repo = tmp_path / "plain"
    not_repo.mkdir()
    manager = WorkspaceManager(tmp_path / "ws", not_repo, clock=FakeClock())
    with pytest.raises(AcpError) as caught:
        await manager.prepare("act-1")
    assert caught.value.code == "ACP_WORKSPACE_FAILED"
    assert not (tmp_path / "ws" / "act-1").exists()
