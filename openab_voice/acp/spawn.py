"""Containment of the agent process: allowlisted environment, own session, stderr to a file, group kill.

Why not ``acp.spawn_agent_process``: it merges the SDK's default environment (our ``HOME``, ``USER``,
``SHELL``...) into whatever we pass, cannot start the agent in its own session, and pipes stderr
without ever reading it (a chatty agent then blocks). Real agents also need the group treatment
(``shared/notes/acp-agents.md``): Codex's npm launcher dies on SIGTERM and leaves the real binary
running as an orphan that ignores stdin closing, and Gemini relaunches itself as a child. So every
agent starts with ``start_new_session=True`` (its own session and process group) and is always
stopped by signalling the whole group, never only the parent.

A process that calls ``setsid`` itself leaves our group. Run in a :class:`~openab_voice.acp.sandbox.Sandbox`
(bubblewrap with its own PID namespace), it still dies with the run: killing the group kills the
namespace, and quiescence also checks that no live process is left in the namespace. Without a
sandbox only the executor pod (``k8s/``) contains it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from openab_voice.acp.types import Workspace
from openab_voice.clock import Clock, bounded
from openab_voice.errors import AcpError, ErrorCode
from openab_voice.settings.names import ENV_PREFIX, SECRET_ENV

log = logging.getLogger(__name__)

STDERR_LOG = "agent-stderr.log"
# Never passed to an agent, allowlisted or not (config.py refuses them too: defence in depth).
_OUR_SECRETS = frozenset(SECRET_ENV.values()) | frozenset(f"{name}_FILE" for name in SECRET_ENV.values())
_POLL_S = 0.02


def agent_environment(
    allowlist: Iterable[str],
    environ: Mapping[str, str],
    workspace: Workspace,
    credentials: Iterable[tuple[str, str]] = (),
) -> dict[str, str]:
    """The agent's whole environment: allowlisted names present in ``environ``, the agent's own
    credentials (``OPENAB_ACP_ENV``), plus a throwaway ``HOME`` and ``TMPDIR`` in the workspace's
    private area (agents write keys and scratch files there: Codex ``$HOME/.codex/auth.json``, Gemini
    ``$TMPDIR``).

    Our own secrets and ``OPENAB_*`` settings are dropped even when allowlisted, and are never a
    credential's source (defence in depth: config refuses both).

    Args:
        credentials: ``(NAME, SOURCE)`` pairs: the agent's ``NAME`` gets the value of ``environ[SOURCE]``
            (or of the file ``environ[SOURCE_FILE]`` names), or of the file ``SOURCE[1:]`` when it starts
            with ``@``. Files are read here, at each spawn, so a rotated key is picked up.

    Raises:
        AcpError: ``ACP_CREDENTIAL_MISSING`` / ``ACP_CREDENTIAL_UNREADABLE``; nothing is spawned.
    """
    env = allowlisted(allowlist, environ)
    for name, source in credentials:
        env[name] = _credential(name, source, environ)
    env["HOME"] = str(workspace.home)
    env["TMPDIR"] = str(workspace.tmp)
    return env


def allowlisted(allowlist: Iterable[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted names present in ``environ``, never one of our secrets or ``OPENAB_*`` settings
    (config refuses them too: defence in depth)."""
    env: dict[str, str] = {}
    for name in allowlist:
        if name in _OUR_SECRETS or name.startswith(ENV_PREFIX):
            log.warning("not passing %s to the agent: it is one of openab-voice's own settings", name)
            continue
        if (value := environ.get(name)) is not None:
            env[name] = value
    return env


def _credential(name: str, source: str, environ: Mapping[str, str]) -> str:
    """The value of one agent credential (never logged; errors name the variable, not the value)."""
    if source.startswith("@"):
        path = source[1:]
    else:
        if source in _OUR_SECRETS or source.startswith(ENV_PREFIX):
            raise AcpError(
                f"{name}: {source} is one of openab-voice's own", code=ErrorCode.ACP_CREDENTIAL_REFUSED
            )
        if value := environ.get(source):
            return value
        path = environ.get(f"{source}_FILE", "")
        if not path:
            raise AcpError(
                f"the agent's {name} comes from {source} (or {source}_FILE), which is not set",
                code=ErrorCode.ACP_CREDENTIAL_MISSING,
            )
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AcpError(
            f"the agent's {name}: cannot read {path}: {exc.strerror}",
            code=ErrorCode.ACP_CREDENTIAL_UNREADABLE,
        ) from None
    if not value:
        raise AcpError(f"the agent's {name}: {path} is empty", code=ErrorCode.ACP_CREDENTIAL_MISSING)
    return value


class AgentProcess:
    """A running agent, leader of its own session and process group.

    Use :meth:`start`; finish with :meth:`stop` (or :meth:`kill_now` on an abandoned path).
    """

    def __init__(
        self, proc: asyncio.subprocess.Process, *, clock: Clock, stderr_log: Path, sandboxed: bool = False
    ) -> None:
        self._proc = proc
        self._clock = clock
        self.pid = proc.pid
        # start_new_session makes the child a session and group leader: its pgid is its pid.
        self.pgid = proc.pid
        self.stderr_log = stderr_log
        self.sandboxed = sandboxed
        self._pidns: str | None = None  # the sandbox's PID namespace, once seen

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stderr_log: Path,
        clock: Clock,
        sandboxed: bool = False,
    ) -> AgentProcess:
        """Spawn ``command`` (already shell-split) with exactly ``env`` in ``cwd``.

        ``sandboxed``: ``command`` is a bubblewrap command line with its own PID namespace, whose
        members quiescence then checks too.

        Raises:
            AcpError: ``ACP_SPAWN_FAILED`` when the program cannot be started.
        """
        if not command:
            raise AcpError("no agent command configured", code=ErrorCode.ACP_SPAWN_FAILED)
        # stderr goes straight to a file: the kernel drains it, so the agent can never block on it,
        # and nothing of it (it may echo credentials) reaches our logs or the result text.
        try:
            stderr = os.open(stderr_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as exc:
            raise AcpError(
                f"cannot open the agent log: {exc.strerror}", code=ErrorCode.ACP_SPAWN_FAILED
            ) from None
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=dict(env),
                cwd=str(cwd),
                start_new_session=True,
                limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES,  # one JSON-RPC line can be large
            )
        except OSError as exc:
            raise AcpError(
                f"cannot start agent {command[0]!r}: {exc.strerror or exc}", code=ErrorCode.ACP_SPAWN_FAILED
            ) from None
        finally:
            os.close(stderr)  # the child holds its own copy
        return cls(proc, clock=clock, stderr_log=stderr_log, sandboxed=sandboxed)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        """The agent's stdin (JSON-RPC to it)."""
        assert self._proc.stdin is not None
        return self._proc.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The agent's stdout (JSON-RPC from it)."""
        assert self._proc.stdout is not None
        return self._proc.stdout

    @property
    def returncode(self) -> int | None:
        """The leader's exit status once reaped."""
        return self._proc.returncode

    def signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to every process in the group; False when the group is already empty."""
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            # A member changed its credentials (setuid): we cannot signal it; quiescent() stays False.
            log.warning("cannot signal process group %d of the agent", self.pgid)
            return False
        return True

    def kill_now(self) -> None:
        """SIGKILL the whole group without waiting (for paths that are being abandoned)."""
        self._remember_namespace()
        self._close_stdin()
        self.signal_group(signal.SIGKILL)

    def quiescent(self) -> bool:
        """Whether no live process is left in the group, nor in the sandbox's PID namespace (zombies
        waiting to be reaped do not count)."""
        if self._pidns is not None and _live_in_namespace(self._pidns):
            return False
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return not live_members(self.pgid)

    def _remember_namespace(self) -> None:
        """Note the sandbox's PID namespace (from bubblewrap's child) before anything is killed."""
        if self.sandboxed and self._pidns is None:
            self._pidns = _child_namespace(self.pid)

    async def stop(self, grace_s: float, *, kill_wait_s: float = 5.0) -> bool:
        """Close stdin, SIGTERM the group, wait up to ``grace_s``, then SIGKILL; reap the leader.

        Returns:
            Whether the group is quiescent afterwards.
        """
        try:
            self._remember_namespace()
            self._close_stdin()
            if not await self._wait_quiescent(0.0):
                self.signal_group(signal.SIGTERM)
                if not await self._wait_quiescent(grace_s):
                    self.signal_group(signal.SIGKILL)
                    await self._wait_quiescent(kill_wait_s)
            await self._reap(kill_wait_s)
        except BaseException:
            self.kill_now()  # cancelled while stopping: never leave the group running
            raise
        return self.quiescent()

    def _close_stdin(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()

    async def _wait_quiescent(self, timeout_s: float) -> bool:
        deadline = self._clock.monotonic() + timeout_s
        while not self.quiescent():
            if self._clock.monotonic() >= deadline:
                return False
            await self._clock.sleep(_POLL_S)
        return True

    async def _reap(self, timeout_s: float) -> None:
        # Process.wait() also waits for stdout to close; with the group dead, that is immediate.
        finished, _ = await bounded(self._clock, timeout_s, self._proc.wait())
        if not finished:
            log.warning("agent process %d not reaped after %.1f s", self.pid, timeout_s)


def _child_namespace(pid: int) -> str | None:
    """The PID namespace of ``pid``'s first child (bubblewrap's namespace init), if it has one."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return os.readlink(f"/proc/{children[0]}/ns/pid") if children else None
    except OSError:
        return None


def _live_in_namespace(namespace: str) -> list[int]:
    """Pids of live (non-zombie) processes in PID namespace ``namespace``."""
    live = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != namespace:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        if stat[stat.rfind(")") + 2 :].split()[0] != "Z":
            live.append(int(entry.name))
    return live


def live_members(pgid: int) -> list[int]:
    """Pids in group ``pgid`` that are not zombies (Linux ``/proc``; elsewhere every member counts)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return [pgid]
    live = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            live.append(int(entry.name))
    return live
