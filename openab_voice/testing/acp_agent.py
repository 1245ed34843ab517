"""A deterministic scripted ACP agent: a real subprocess to test an ACP client without any model.

Run it as the agent command::

    python -m openab_voice.testing.acp_agent [--mode MODE]

Modes (``normal`` by default):

- ``normal``: says what it works on, announces an ``edit`` tool call on ``RESULT.md`` in its cwd, asks
  one permission (``allow_once``, ``reject_once`` and ``allow_always``, so a client can prove it never
  picks the persistent one), writes the goal to ``RESULT.md`` if allowed, reports, ``end_turn``.
- ``always-only``: the same, but offers only ``allow_always`` / ``reject_always``.
- ``external``: asks permission for an ``execute`` tool call (a network command); never runs it.
- ``mixed``: two permission requests in one turn: the ``normal`` edit of ``RESULT.md``, then the
  ``external`` network command (so under ``workspace_write`` one of the two is refused).
- ``crash``: exits abruptly after receiving the prompt.
- ``hang``: never answers the prompt and ignores ``session/cancel``, SIGTERM and stdin closing (like
  Codex's orphaned binary): only SIGKILL stops it.
- ``slow``: a long turn that honours ``session/cancel`` with stop reason ``cancelled``.
- ``cancel-end-turn``: waits for a cancel, asks a permission, then answers ``end_turn`` instead of
  ``cancelled`` (what the TypeScript SDK's example agent does).
- ``env``: reports its environment (names and values, as it was exec'd) as ``ENV {json}``.
- ``auth``: fails ``session/new`` with JSON-RPC -32000 "Authentication required", like real CLIs
  without credentials.
- ``login``: like codex-acp: advertises the auth method ``api-key`` and refuses ``session/new``
  (-32000) until ``authenticate`` was called with it while ``OPENAI_API_KEY`` is in its environment;
  then reports its environment like ``env``.
- ``spawn-child``: starts a grandchild sleeper in its process group, reports ``CHILD <pid>`` (also
  written to ``CHILD.pid`` in its cwd), then hangs like ``hang``.
- ``setsid-child``: the same, but the sleeper calls ``setsid`` (leaves the agent's process group and
  session) and has ``openab-setsid-child`` and its cwd in its command line, so a test can find it.
- ``run-tests``: a coding task: asks to edit ``calc.py`` in its cwd (fixes ``a - b`` to ``a + b``),
  then asks to ``execute`` ``python -m unittest`` there; runs it if allowed and reports
  ``TESTS exit=<status>`` and the output.
- ``escape``: a hostile agent, without asking anything: tries every ``--probe-read PATH`` (a file's
  first bytes, or a folder's listing), ``--probe-connect HOST:PORT`` (a TCP connection) and
  ``--probe-write PATH`` (creating a file), lists the environment names that look like someone
  else's secrets, starts a ``setsid`` sleeper like ``setsid-child`` (its pid also in ``CHILD.pid``),
  and reports ``ESCAPE {json}``: ``{"read": {path: "ok ..." | "denied: ..."}, "connect": ...,
  "write": ..., "secret_env": [names], "child": pid}``; then ``end_turn``. A containment test
  asserts that every probe says ``denied`` and that the sleeper died with the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    Client,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AcpMcpServer,
    AllowedOutcome,
    AudioContentBlock,
    AuthenticateResponse,
    AuthMethodAgent,
    ClientCapabilities,
    EmbeddedResourceContentBlock,
    EnvVarAuthMethod,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    McpServerStdio,
    NewSessionResponse,
    PermissionOption,
    PermissionOptionKind,
    PromptResponse,
    ResourceContentBlock,
    SseMcpServer,
    TerminalAuthMethod,
    TextContentBlock,
    ToolCallLocation,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
)

from openab_voice.clock import SystemClock

MODES = (
    "normal",
    "always-only",
    "external",
    "mixed",
    "crash",
    "hang",
    "slow",
    "cancel-end-turn",
    "env",
    "auth",
    "login",
    "spawn-child",
    "setsid-child",
    "run-tests",
    "escape",
)
SETSID_MARKER = "openab-setsid-child"
SESSION_ID = "scripted-session-1"
LOGIN_METHOD = "api-key"
SLOW_TURN_S = 60.0
# Written to stderr with the wall time (seconds) each ``session/prompt`` and ``session/cancel`` arrives.
PROMPT_RECEIVED = "session/prompt received at"
_CLOCK = SystemClock()
CANCEL_RECEIVED = "session/cancel received at"
_ONCE: tuple[PermissionOptionKind, ...] = ("allow_once", "reject_once", "allow_always")
_ALWAYS: tuple[PermissionOptionKind, ...] = ("allow_always", "reject_always")

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


class ScriptedAgent:
    """The agent side of one scripted session; see the module docstring for the modes.

    Implements only what a prompt turn needs; the SDK answers every other agent method with
    "method not found".
    """

    def __init__(self, mode: str, probes: EscapeProbes | None = None) -> None:
        self.mode = mode
        self._probes = probes or EscapeProbes()
        self._client: Client | None = None
        self._cwd = Path.cwd()
        self._cancelled = asyncio.Event()
        self._authenticated = False

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        methods: list[EnvVarAuthMethod | TerminalAuthMethod | AuthMethodAgent] = (
            [AuthMethodAgent(id=LOGIN_METHOD, name="API key")] if self.mode == "login" else []
        )
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="openab-scripted-agent", version="1"),
            auth_methods=methods,
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        if self.mode != "login" or method_id != LOGIN_METHOD:
            raise RequestError.invalid_params({"methodId": method_id})
        if not os.environ.get("OPENAI_API_KEY"):
            raise RequestError.auth_required({"reason": "OPENAI_API_KEY is not set"})
        self._authenticated = True
        return AuthenticateResponse()

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        if self.mode == "auth" or (self.mode == "login" and not self._authenticated):
            raise RequestError.auth_required()
        self._cwd = Path(cwd)
        return NewSessionResponse(session_id=SESSION_ID)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        # The wall time it arrived, for tests and `bench executor` (the client drains stderr to a log).
        print(f"{CANCEL_RECEIVED} {_CLOCK.wall():.6f}", file=sys.stderr, flush=True)
        self._cancelled.set()

    async def prompt(self, session_id: str, prompt: list[PromptBlock], **kwargs: Any) -> PromptResponse:
        print(f"{PROMPT_RECEIVED} {_CLOCK.wall():.6f}", file=sys.stderr, flush=True)
        goal = " ".join(block.text for block in prompt if isinstance(block, TextContentBlock))
        match self.mode:
            case "crash":
                await self._say(session_id, "Starting, then crashing.\n")
                os._exit(3)
            case "hang" | "spawn-child" | "setsid-child":
                if self.mode != "hang":
                    pid = await self._start_sleeper(setsid=self.mode == "setsid-child")
                    await self._say(session_id, f"CHILD {pid}")
                _become_unkillable_but_by_sigkill()
                await asyncio.Event().wait()  # never answers, whatever the client sends
            case "slow":
                await self._say(session_id, "Starting a long piece of work.")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cancelled.wait(), SLOW_TURN_S)  # noqa: TID251 -- the agent's own process, on real time
                return PromptResponse(stop_reason="cancelled" if self._cancelled.is_set() else "end_turn")
            case "cancel-end-turn":
                await self._say(session_id, "Working until cancelled.")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._cancelled.wait(), SLOW_TURN_S)  # noqa: TID251 -- the agent's own process, on real time
                await self._ask(
                    session_id, "late-edit", "Edit after cancel", "edit", ("allow_once", "reject_once")
                )
            case "run-tests":
                await self._fix_and_test(session_id)
            case "escape":
                report = await asyncio.to_thread(self._probes.run)
                report["child"] = await self._start_sleeper(setsid=True)
                await self._say(session_id, "ESCAPE " + json.dumps(report, sort_keys=True))
            case "env" | "login":
                await self._say(session_id, "ENV " + json.dumps(_exec_environment(), sort_keys=True))
            case "external" | "mixed":
                if self.mode == "mixed":
                    await self._write_result(session_id, goal, _ONCE)
                await self._say(session_id, "I need to run a network command.\n")
                allowed = await self._ask(
                    session_id, "run-curl", "curl https://example.com", "execute", _ONCE, in_request=True
                )
                await self._say(
                    session_id, "Allowed to run it (not running it)." if allowed else "Not allowed."
                )
            case _:  # normal, always-only
                await self._write_result(session_id, goal, _ALWAYS if self.mode == "always-only" else _ONCE)
        return PromptResponse(stop_reason="end_turn")

    async def _start_sleeper(self, *, setsid: bool) -> int:
        """A grandchild that sleeps, named by the marker and our cwd; its pid (also in ``CHILD.pid``)."""
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import time; time.sleep(600)",
            SETSID_MARKER,
            str(self._cwd),
            start_new_session=setsid,
        )
        (self._cwd / "CHILD.pid").write_text(str(child.pid), encoding="utf-8")
        return child.pid

    async def _write_result(
        self, session_id: str, goal: str, offered: tuple[PermissionOptionKind, ...]
    ) -> None:
        await self._say(session_id, f"Working on: {goal}\n")
        target = self._cwd / "RESULT.md"
        await self._announce_edit(session_id, "write-result", "Write RESULT.md", target)
        # Like many real agents, the request repeats only the id and title: the kind and location
        # were announced above.
        if await self._ask(session_id, "write-result", "Write RESULT.md", None, offered):
            target.write_text(f"# Result\n\n{goal}\n", encoding="utf-8")
            await self._update(session_id, "write-result", "completed")
            await self._say(session_id, f"Wrote RESULT.md: {goal}")
        else:
            await self._update(session_id, "write-result", "failed")
            await self._say(session_id, "Permission refused: RESULT.md not written.")

    async def _announce_edit(self, session_id: str, call_id: str, title: str, path: Path) -> None:
        await self._client_or_fail().session_update(
            session_id=session_id,
            update=start_tool_call(
                call_id, title, kind="edit", status="pending", locations=[ToolCallLocation(path=str(path))]
            ),
        )

    async def _fix_and_test(self, session_id: str) -> None:
        await self._say(session_id, "Fixing calc.py, then running the tests.\n")
        source = self._cwd / "calc.py"
        await self._announce_edit(session_id, "fix-calc", "Fix calc.py", source)
        if await self._ask(session_id, "fix-calc", "Fix calc.py", None, _ONCE):
            source.write_text(source.read_text(encoding="utf-8").replace("a - b", "a + b"), encoding="utf-8")
            await self._update(session_id, "fix-calc", "completed")
        command = (sys.executable, "-m", "unittest", "-q")
        if not await self._ask(
            session_id, "run-tests", "python -m unittest -q", "execute", _ONCE, in_request=True
        ):
            await self._say(session_id, "Not allowed to run the tests.")
            return
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=self._cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        output, _ = await proc.communicate()
        await self._say(session_id, f"TESTS exit={proc.returncode}\n{output.decode('utf-8', 'replace')}")

    async def _ask(
        self,
        session_id: str,
        tool_call_id: str,
        title: str,
        kind: ToolKind | None,
        offered: tuple[PermissionOptionKind, ...],
        *,
        in_request: bool = False,
    ) -> bool:
        """Request permission; True when an allow option was selected."""
        options = [PermissionOption(option_id=f"opt-{k}", name=k.replace("_", " "), kind=k) for k in offered]
        if in_request:
            await self._client_or_fail().session_update(
                session_id=session_id,
                update=start_tool_call(tool_call_id, title, kind=kind, status="pending"),
            )
        tool_call = ToolCallUpdate(tool_call_id=tool_call_id, title=title, kind=kind if in_request else None)
        response = await self._client_or_fail().request_permission(
            session_id=session_id, tool_call=tool_call, options=options
        )
        outcome = response.outcome
        return isinstance(outcome, AllowedOutcome) and outcome.option_id.startswith("opt-allow")

    async def _say(self, session_id: str, text: str) -> None:
        await self._client_or_fail().session_update(
            session_id=session_id, update=update_agent_message_text(text)
        )

    async def _update(self, session_id: str, tool_call_id: str, status: ToolCallStatus) -> None:
        await self._client_or_fail().session_update(
            session_id=session_id, update=update_tool_call(tool_call_id, status=status)
        )

    def _client_or_fail(self) -> Client:
        if self._client is None:
            raise RuntimeError("not connected")
        return self._client


@dataclass(frozen=True, slots=True, kw_only=True)
class EscapeProbes:
    """What the ``escape`` mode tries (see the module docstring)."""

    read: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()
    write: tuple[str, ...] = ()

    def run(self) -> dict[str, Any]:
        """Try every probe; never raises (each failure is the probe's answer)."""
        report: dict[str, Any] = {
            "read": {path: _try(_read_probe, path) for path in self.read},
            "connect": {target: _try(_connect_probe, target) for target in self.connect},
            "write": {path: _try(_write_probe, path) for path in self.write},
        }
        report["secret_env"] = sorted(name for name in _exec_environment() if _SECRETISH.search(name))
        return report


# Names of someone else's secrets an escaping agent would look for in its environment.
_SECRETISH = re.compile(r"DATABASE|DISCORD|OPENAB_|POSTGRES|KUBERNETES_SERVICE|TOKEN")


def _try(probe: Callable[[str], str], arg: str) -> str:
    try:
        return "ok " + probe(arg)
    except Exception as exc:  # the refusal is the answer
        return f"denied: {type(exc).__name__}: {exc}"[:300]


def _read_probe(path: str) -> str:
    target = Path(path)
    if target.is_dir():
        return f"listed {len(list(target.iterdir()))} entries"
    data = target.read_bytes()[:4096]
    if not data:
        raise PermissionError("empty (hidden behind /dev/null or an empty file)")
    return f"read {len(data)} bytes"


def _connect_probe(target: str) -> str:
    host, _, port = target.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=3.0):
        return "connected"


def _write_probe(path: str) -> str:
    with open(path, "x", encoding="utf-8") as handle:
        handle.write("escaped\n")
    return "wrote"


def _exec_environment() -> dict[str, str]:
    """The environment this process was started with (Python itself may add LC_CTYPE later)."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def _become_unkillable_but_by_sigkill() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _HANG_FOREVER.set()


def received_at(stderr_log: Path, what: str) -> list[float]:
    """The wall times ``what`` (:data:`PROMPT_RECEIVED` or :data:`CANCEL_RECEIVED`) arrived, from the
    agent's stderr log (none yet when the log does not exist)."""
    try:
        lines = stderr_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    return [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(what + " ")]


# Set by the hang modes: main() then blocks even after stdin closes.
_HANG_FOREVER = threading.Event()


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m openab_voice.testing.acp_agent [--mode MODE]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=MODES, default="normal")
    parser.add_argument("--probe-read", action="append", default=[], metavar="PATH")
    parser.add_argument("--probe-connect", action="append", default=[], metavar="HOST:PORT")
    parser.add_argument("--probe-write", action="append", default=[], metavar="PATH")
    args = parser.parse_args(argv)
    probes = EscapeProbes(
        read=tuple(args.probe_read), connect=tuple(args.probe_connect), write=tuple(args.probe_write)
    )
    # cast: the Agent protocol lists every method; the SDK routes the missing ones to an error.
    asyncio.run(run_agent(cast(Agent, ScriptedAgent(args.mode, probes))))
    if _HANG_FOREVER.is_set():
        threading.Event().wait()  # ignore stdin closing too


if __name__ == "__main__":
    main()
