"""Throwaway git repositories for the workspace tests (a fixed, fake committer identity)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """Run ``git -C repo args...`` as a throwaway committer; its stdout."""
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def empty_repo(path: Path) -> Path:
    """A new repository at ``path`` with one empty root commit."""
    path.mkdir()
    git(path, "init", "-q")
    git(path, "commit", "-q", "--allow-empty", "-m", "root")
    return path
