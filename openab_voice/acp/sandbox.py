"""The agent's sandbox: bubblewrap around every agent process (docs/adr/0007-agent-sandbox.md).

Inside, the agent sees the system read-only, its working tree as the only writable path (plus a
private ``/tmp`` and its throwaway ``HOME``/``TMPDIR``), nothing of the data directory (the store,
other workspaces, agent logs, quarantine markers) and none of our secrets files. It runs in its own
PID namespace with ``--die-with-parent``: when the bubblewrap process we started dies (we kill its
process group), the namespace's first process dies with it and the kernel kills every process left
in the namespace, so a process that called ``setsid`` to leave our process group no longer escapes.
The network is not unshared: the agent needs its model's API.

This is what makes running commands safe enough to grant: the ``workspace_exec`` ceiling exists only
while a sandbox does, and without bubblewrap it is refused with the reason from :func:`probe`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from openab_voice.acp.types import Workspace
from openab_voice.config import SECRET_ENV
from openab_voice.errors import AcpError

# Wall-clock: the probe is a real bubblewrap process, started synchronously at start-up or self-test.
_PROBE_TIMEOUT_S = 10.0
_OUR_SECRET_NAMES = tuple(SECRET_ENV.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Sandbox:
    """How to wrap an agent command in bubblewrap.

    Attributes:
        bwrap: The bubblewrap executable.
        hidden_dirs: Directories replaced by an empty tmpfs (the data directory: workspaces live in it,
            and the agent's own working tree is bound back on top).
        hidden_files: Files replaced by ``/dev/null`` (our secrets files: ``DISCORD_TOKEN_FILE``...).
        runtime_dirs: What the agent needs to run that the private ``/tmp`` would hide, bound back
            read-only: our interpreter's prefixes and the checkout we run from, when they live under
            ``/tmp`` (a CI clone, a throwaway venv), and the directories of the command's own files.
    """

    bwrap: str
    hidden_dirs: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()
    runtime_dirs: tuple[Path, ...] = ()

    def command(self, command: Sequence[str], workspace: Workspace) -> list[str]:
        """``command`` wrapped so that it runs inside the sandbox, in ``workspace``'s working tree."""
        argv = [
            self.bwrap,
            "--die-with-parent",  # our bwrap process dies -> the namespace's first process dies
            "--unshare-pid",  # ... and with it every process in the namespace, setsid or not
            "--unshare-ipc",
            "--unshare-uts",
            "--new-session",  # no TIOCSTI into a terminal we might have
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",  # a /proc of the new PID namespace: no view of our processes or their environments
            "--tmpfs",
            "/tmp",
        ]
        for directory in (*self.runtime_dirs, *_command_dirs(command)):
            if _under(directory, _TMP) and directory.is_dir():
                argv += ["--ro-bind", str(directory), str(directory)]  # before the hiding mounts below
        for directory in self.hidden_dirs:
            argv += ["--tmpfs", str(directory)]
        for path in self.hidden_files:
            if path.exists():
                argv += ["--ro-bind", "/dev/null", str(path)]
        # Writable, bound after the hiding tmpfs mounts (later mounts win): the working tree and the
        # agent's private HOME and TMPDIR. Nothing else of the workspace's private area (logs, marker).
        for path in (workspace.path, workspace.home, workspace.tmp):
            argv += ["--bind", str(path), str(path)]
        git_dir = _repo_git_dir(workspace)
        if git_dir is not None:
            # A worktree's objects, index and HEAD live in the repository's .git: git needs to write there.
            argv += ["--bind", str(git_dir), str(git_dir)]
        argv += ["--chdir", str(workspace.path), "--", *command]
        return argv


_TMP = Path("/tmp")


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _command_dirs(command: Sequence[str]) -> list[Path]:
    """Directories of the command's absolute-path arguments (an agent script and its packages)."""
    return [Path(arg).parent for arg in command if os.path.isabs(arg) and os.path.exists(arg)]


def runtime_dirs() -> tuple[Path, ...]:
    """Our interpreter's prefixes and, for a source checkout, its root: what ``python -m ...`` agents need."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        dirs.add(checkout)
    return tuple(sorted(dirs))


def find_bwrap() -> str | None:
    """The bubblewrap executable on ``PATH``, or None."""
    return shutil.which("bwrap")


def probe(bwrap: str | None) -> str | None:
    """Why a sandbox cannot be used here, or None when it works (one real bubblewrap start).

    bubblewrap can be installed and still refused (unprivileged user namespaces off, seccomp in a
    container); only a start tells.
    """
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: install the Debian package `bubblewrap`"
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not start: {exc}"
    if done.returncode != 0:
        return f"bubblewrap refuses to start a sandbox here: {done.stderr.strip()[:200]}"
    return None


def secrets_files(environ: Mapping[str, str], names: Iterable[str]) -> tuple[Path, ...]:
    """The files our ``*_FILE`` secrets point at (to hide them from the agent)."""
    found = []
    for name in names:
        value = environ.get(f"{name}_FILE")
        if value:
            found.append(Path(os.path.abspath(value)))
    return tuple(found)


def _repo_git_dir(workspace: Workspace) -> Path | None:
    if workspace.repo is None:
        return None
    git_dir = workspace.repo / ".git"
    return git_dir if git_dir.is_dir() else None


def build_sandbox(
    mode: str, *, data_dir: Path, environ: Mapping[str, str], hidden_files: Iterable[Path] = ()
) -> tuple[Sandbox | None, str | None]:
    """The sandbox ``OPENAB_ACP_SANDBOX`` asks for, and why there is none when there is none.

    Args:
        mode: ``auto`` (bubblewrap when it works here), ``bwrap`` (required) or ``off``.
        data_dir: Hidden from the agent (the store, workspaces, logs).
        environ: Where our ``*_FILE`` secrets are named (their files are hidden).
        hidden_files: More files to hide (an SQLite store outside the data dir, credential files).

    Raises:
        AcpError: ``ACP_SANDBOX_UNAVAILABLE`` when ``mode`` is ``bwrap`` and it cannot start here.
    """
    if mode == "off":
        return None, "the agent sandbox is off (OPENAB_ACP_SANDBOX=off)"
    bwrap = find_bwrap()
    why = probe(bwrap)
    if why is not None:
        if mode == "bwrap":
            raise AcpError(why, code="ACP_SANDBOX_UNAVAILABLE")
        return None, why
    assert bwrap is not None
    hidden = secrets_files(environ, _OUR_SECRET_NAMES) + tuple(Path(os.path.abspath(p)) for p in hidden_files)
    sandbox = Sandbox(
        bwrap=bwrap,
        hidden_dirs=(Path(os.path.abspath(data_dir)),),
        hidden_files=hidden,
        runtime_dirs=runtime_dirs(),
    )
    return sandbox, None
