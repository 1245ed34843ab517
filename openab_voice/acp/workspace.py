"""Workspaces: a fresh directory (or git worktree) per action, quarantine, and cleanup.

Layout under the manager's root, one folder per action (never reused)::

    <root>/<action id>/work/      the working tree: the agent's cwd (a worktree when a repo is set)
    <root>/<action id>/private/   ours: home/ and tmp/ (the agent's throwaway HOME and TMPDIR, deleted
                                  once the agent stopped), logs/agent-stderr.log, and the QUARANTINED marker

The private folder sits beside the working tree, not in it, so ``workspace_write`` (writes inside the
working tree) cannot touch the marker or the logs. A quarantined workspace is left exactly as the
agent left it for the operator to inspect; :meth:`WorkspaceManager.cleanup` refuses it until
:meth:`WorkspaceManager.release` is called. Clean up only after the agent's process group is
quiescent (``AgentRun.run`` returns only then).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from openab_voice.acp.types import Workspace
from openab_voice.clock import Clock
from openab_voice.errors import AcpError, ErrorCode

QUARANTINE_MARKER = "QUARANTINED"
# Action ids become folder names: refuse anything that could climb out of the root.
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class Workspaces(Protocol):
    """Where actions' workspaces come from: local folders (:class:`WorkspaceManager`) or, with action
    pods, volume claims (:class:`~openab_voice.acp.pod_workspace.PodWorkspaces`)."""

    def workspace_id(self, action_id: str) -> str: ...
    def locate(self, action_id: str) -> Workspace: ...
    async def prepare(self, action_id: str) -> Workspace: ...
    def quarantine(self, workspace: Workspace, reason: str) -> None: ...
    def quarantine_reason(self, workspace: Workspace) -> str | None: ...
    def release(self, workspace: Workspace) -> None: ...
    async def cleanup(self, workspace: Workspace) -> None: ...
    async def discard_scratch(self, workspace: Workspace) -> None:
        """Delete the agent's throwaway ``HOME`` and ``TMPDIR`` (keys it wrote there) once it stopped."""

    async def finished(self, workspace: Workspace) -> None:
        """The action settled and its workspace is not quarantined: give back what it held."""


class WorkspaceManager:
    """Prepares, quarantines and cleans up per-action workspaces under ``root``.

    Args:
        root: Where workspaces live (created on demand).
        repo: A git repository; when set each workspace is a detached worktree of its ``HEAD``.
        clock: Stamps quarantine markers.
        git: The git executable.
    """

    def __init__(self, root: Path, repo: Path | None = None, *, clock: Clock, git: str = "git") -> None:
        self._root = Path(os.path.abspath(root))
        self._repo = Path(os.path.realpath(repo)) if repo is not None else None
        self._clock = clock
        self._git = git

    def workspace_id(self, action_id: str) -> str:
        """The id a workspace for ``action_id`` will have: the unit of "one running action per workspace".

        With a repository every action shares one id (``repo:<path>``), so the caller can refuse a
        second running action on the same repo; without one each action has its own directory.
        """
        return f"repo:{self._repo}" if self._repo is not None else f"scratch:{_checked(action_id)}"

    def locate(self, action_id: str) -> Workspace:
        """The :class:`Workspace` for ``action_id`` (for reconciliation after a restart); no disk access."""
        base = self._root / _checked(action_id)
        return Workspace(
            id=self.workspace_id(action_id),
            action_id=action_id,
            path=base / "work",
            private=base / "private",
            repo=self._repo,
        )

    async def prepare(self, action_id: str) -> Workspace:
        """Create a fresh workspace for ``action_id``.

        Raises:
            AcpError: ``ACP_WORKSPACE_INVALID`` for an unusable action id, ``ACP_WORKSPACE_EXISTS`` when
                the action already had one (workspaces are never reused), ``ACP_WORKSPACE_FAILED`` when
                the directory or worktree cannot be created.
        """
        ws = self.locate(action_id)
        base = ws.private.parent
        make_action_dir(self._root, base)
        try:
            for folder in (ws.private, ws.home, ws.tmp, ws.logs):
                folder.mkdir(mode=0o700)
            if self._repo is None:
                ws.path.mkdir(mode=0o755)
            else:
                await self._run_git("worktree", "add", "--detach", str(ws.path), "HEAD")
        except BaseException:
            await asyncio.to_thread(remove_tree, base)
            raise
        return ws

    def quarantine(self, workspace: Workspace, reason: str) -> None:
        """Mark ``workspace`` quarantined: left untouched, refused by :meth:`cleanup` until released."""
        marker = workspace.private / QUARANTINE_MARKER
        partial = marker.with_suffix(".partial")
        record = {"action_id": workspace.action_id, "reason": reason, "at": self._clock.wall()}
        partial.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(partial, marker)  # atomic: a reader sees no marker or a whole one

    def quarantine_reason(self, workspace: Workspace) -> str | None:
        """Why ``workspace`` is quarantined, or None when it is not."""
        try:
            text = (workspace.private / QUARANTINE_MARKER).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return str(json.loads(text)["reason"])
        except (ValueError, KeyError, TypeError):
            return "unreadable quarantine marker"  # still quarantined: fail closed

    def release(self, workspace: Workspace) -> None:
        """Lift the quarantine after an operator reconciled the workspace."""
        (workspace.private / QUARANTINE_MARKER).unlink(missing_ok=True)

    async def discard_scratch(self, workspace: Workspace) -> None:
        """Empty the agent's throwaway ``HOME`` and ``TMPDIR`` once its process group is quiescent.

        Agents keep their keys and shell history there (Codex ``$HOME/.codex/auth.json`` and a shell
        snapshot): nothing of that outlives the action, quarantined or not. The working tree, the
        logs and a quarantine marker stay.
        """
        for folder in (workspace.home, workspace.tmp):
            await asyncio.to_thread(remove_tree, folder)

    async def finished(self, workspace: Workspace) -> None:
        """Nothing: a local working tree stays where the operator can read what the agent left."""

    async def cleanup(self, workspace: Workspace) -> None:
        """Remove ``workspace`` (and its worktree registration). Call only once the agent is quiescent.

        Raises:
            AcpError: ``ACP_WORKSPACE_QUARANTINED`` while it is quarantined; ``ACP_WORKSPACE_FAILED``
                when git refuses to drop the worktree.
        """
        reason = self.quarantine_reason(workspace)
        if reason is not None:
            raise AcpError(
                f"workspace of action {workspace.action_id} is quarantined: {reason}",
                code=ErrorCode.ACP_WORKSPACE_QUARANTINED,
            )
        if workspace.repo is not None:
            if workspace.path.exists():
                # Twice --force: also drops a worktree the agent locked or left dirty.
                await self._run_git("worktree", "remove", "--force", "--force", str(workspace.path))
            else:
                await self._run_git("worktree", "prune")
        await asyncio.to_thread(remove_tree, workspace.private.parent)

    async def _run_git(self, *args: str) -> None:
        assert self._repo is not None
        # Hooks off: creating or removing our worktree must not run repository code.
        argv = (self._git, "-C", str(self._repo), "-c", "core.hooksPath=/dev/null", *args)
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise AcpError(f"cannot run git: {exc.strerror}", code=ErrorCode.ACP_WORKSPACE_FAILED) from None
        _, err = await proc.communicate()
        if proc.returncode != 0:
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise AcpError(
                f"git {args[0]} {args[1] if len(args) > 1 else ''} failed: {message[-1] if message else '?'}",
                code=ErrorCode.ACP_WORKSPACE_FAILED,
            )


def make_action_dir(root: Path, base: Path) -> None:
    """Create an action's own folder ``base`` under ``root``; never an existing one (no reuse).

    Raises:
        AcpError: ``ACP_WORKSPACE_EXISTS`` when it exists, ``ACP_WORKSPACE_FAILED`` when it cannot be made.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
        base.mkdir(mode=0o700)
    except FileExistsError:
        raise AcpError(f"workspace {base.name} already exists", code=ErrorCode.ACP_WORKSPACE_EXISTS) from None
    except OSError as exc:
        raise AcpError(
            f"cannot create workspace: {exc.strerror}", code=ErrorCode.ACP_WORKSPACE_FAILED
        ) from None


def _checked(action_id: str) -> str:
    if not _SAFE_ID.fullmatch(action_id) or action_id in {".", ".."}:
        raise AcpError(
            f"action id {action_id!r} cannot name a workspace", code=ErrorCode.ACP_WORKSPACE_INVALID
        )
    return action_id


def remove_tree(path: Path) -> None:
    """``rm -rf`` that also removes read-only folders (Go's module cache, for one)."""

    def make_writable_and_retry(_func: Callable[..., Any], failed: str, _exc: Any) -> None:
        if not os.path.lexists(failed):
            return  # already removed by a retry below
        _add_owner_rwx(os.path.dirname(failed))
        if os.path.isdir(failed) and not os.path.islink(failed):
            _add_owner_rwx(failed)
            shutil.rmtree(failed, onerror=make_writable_and_retry)
        else:
            os.unlink(failed)

    if path.exists():
        shutil.rmtree(path, onerror=make_writable_and_retry)


def _add_owner_rwx(path: str) -> None:
    os.chmod(path, os.stat(path).st_mode | stat.S_IRWXU)
