"""The agent's sandbox: bubblewrap around every agent process (docs/adr/0007-agent-sandbox.md).

Inside, the agent sees the system read-only, its working tree as the only writable path (plus a
private ``/tmp`` and its throwaway ``HOME``/``TMPDIR``), nothing of the data directory (the store,
other workspaces, agent logs, quarantine markers) and none of our secrets files. It runs in its own
PID namespace with ``--die-with-parent``: when the bubblewrap process we started dies (we kill its
process group), the namespace's first process dies with it and the kernel kills every process left
in the namespace, so a process that called ``setsid`` to leave our process group no longer escapes.
The network is not unshared: the agent needs its model's API.

This is what makes running commands safe enough to grant: the ``workspace_exec`` ceiling exists only
while a sandbox does. Where bubblewrap cannot start, no agent runs at all (``Containment.unavailable``
with the reason from :func:`probe`), unless the operator turned containment off explicitly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from openab_voice.acp.containment import Containment
from openab_voice.acp.types import Workspace
from openab_voice.errors import AcpError, ErrorCode
from openab_voice.settings.names import SECRET_ENV

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

    def command(
        self, command: Sequence[str], workspace: Workspace, *, path_env: str | None = None
    ) -> list[str]:
        """``command`` wrapped so that it runs inside the sandbox, in ``workspace``'s working tree.

        Args:
            path_env: The agent's ``PATH``, where a bare program name is looked up.

        Raises:
            AcpError: ``ACP_SPAWN_FAILED`` naming the path when the program cannot be found, or when
                what it needs lies in a directory the sandbox hides.
        """
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
        needed = command_paths(command, path_env)
        for path in needed:
            hidden = next((d for d in self.hidden_dirs if _under(path, d)), None)
            if hidden is not None:
                raise AcpError(
                    f"the agent needs {path}, which is inside {hidden}, hidden from every agent "
                    "(install the agent outside the data directory)",
                    code=ErrorCode.ACP_SPAWN_FAILED,
                )
        for directory in (*self.runtime_dirs, *needed):
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


def command_paths(command: Sequence[str], path_env: str | None) -> list[Path]:
    """The directories an agent command needs to see inside the sandbox.

    For the program (looked up on ``path_env`` when it is a bare name) and every absolute-path
    argument: its folder, the folder its symlinks finally point to, and, for a file inside an npm
    tree, the outermost ``node_modules`` folder around it. An npm ``.bin`` entry is a link into its
    package (``.bin/claude-code-acp -> ../@zed-industries/claude-code-acp/dist/index.js``), and a
    package script imports its siblings (the TypeScript SDK's example agent loads ``../acp.js``):
    binding only the link's folder leaves the agent a dangling link (``bwrap: execvp ...: No such
    file or directory``) or a missing module.

    Raises:
        AcpError: ``ACP_SPAWN_FAILED`` naming the program when it is not found.
    """
    program = command[0]
    if not os.path.isabs(program):
        found = shutil.which(program, path=path_env)
        if found is None:
            raise AcpError(
                f"the agent command {program!r} is not on the agent's PATH ({path_env or 'unset'})",
                code=ErrorCode.ACP_SPAWN_FAILED,
            )
        program = found
    elif not os.path.exists(program):
        raise AcpError(f"the agent command {program} does not exist", code=ErrorCode.ACP_SPAWN_FAILED)
    dirs: dict[Path, None] = {}
    for arg in (program, *command[1:]):
        if not (os.path.isabs(arg) and os.path.exists(arg)):
            continue
        link, real = Path(os.path.abspath(arg)), Path(os.path.realpath(arg))
        for path in (link, real):
            dirs.setdefault(path if path.is_dir() else path.parent)
            tree = _outermost_node_modules(path)
            if tree is not None:
                dirs.setdefault(tree)
    return list(dirs)


def _outermost_node_modules(path: Path) -> Path | None:
    trees = [parent for parent in path.parents if parent.name == "node_modules"]
    return trees[-1] if trees else None


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


def build_containment(
    mode: str, *, data_dir: Path, environ: Mapping[str, str], hidden_files: Iterable[Path] = ()
) -> Containment:
    """The local containment ``OPENAB_ACP_SANDBOX`` asks for (``pod`` is built by the caller).

    Args:
        mode: ``auto`` (bubblewrap; actions refused where it cannot start), ``bwrap`` (required:
            start-up fails without it) or ``off``.
        data_dir: Hidden from the agent (the store, workspaces, logs).
        environ: Where our ``*_FILE`` secrets are named (their files are hidden).
        hidden_files: More files to hide (an SQLite store outside the data dir, credential files).

    Raises:
        AcpError: ``ACP_SANDBOX_UNAVAILABLE`` when ``mode`` is ``bwrap`` and it cannot start here.
    """
    if mode == "off":
        return Containment.off()
    bwrap = find_bwrap()
    why = probe(bwrap)
    if why is not None:
        if mode == "bwrap":
            raise AcpError(why, code=ErrorCode.ACP_SANDBOX_UNAVAILABLE)
        return Containment.unavailable(why)
    assert bwrap is not None
    hidden = secrets_files(environ, _OUR_SECRET_NAMES) + tuple(Path(os.path.abspath(p)) for p in hidden_files)
    sandbox = Sandbox(
        bwrap=bwrap,
        hidden_dirs=(Path(os.path.abspath(data_dir)),),
        hidden_files=hidden,
        runtime_dirs=runtime_dirs(),
    )
    return Containment.bwrap(sandbox)
