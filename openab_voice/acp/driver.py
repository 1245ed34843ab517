"""The turn driver: one fresh agent process, one session, one prompt, one :class:`TurnCompletion`.

Never pooled, resumed or persisted (RFC "fresh ACP connection per action"): a long-lived session
may carry permission state from before the action was confirmed.

Outcome rules, the heart of it:

- Before the prompt is sent (spawn, ``initialize``, ``session/new``; e.g. real CLIs without
  credentials answer ``-32000 Authentication required``): ``failed`` with an ``ACP_*`` code; nothing
  was asked of the agent, so ``prompt_sent`` is False. A cancel in this phase is ``cancelled``.
- After the prompt is sent: stop reason ``end_turn`` is ``succeeded``; ``refusal``, ``max_tokens``,
  ``max_turn_requests`` (and a ``cancelled`` nobody asked for) are ``failed``.
- Our ``session/cancel`` confirmed by stop reason ``cancelled`` within the grace is ``cancelled``
  (the ACP prompt-turn spec: the original prompt's result is the cancel confirmation).
- Everything else after the prompt is ``outcome_unknown`` with ``quarantined=True``: turn timeout,
  EOF, crash, a JSON-RPC error on the prompt, and a cancel not confirmed in time. A cancel answered
  with ``end_turn`` is also unknown: it may mean the turn finished just before the cancel or that the
  agent ignores cancels (the TypeScript example agent answers ``end_turn`` when cancelled during a
  permission request); either way it proves neither that the work completed nor that it stopped.

Whatever happens, :meth:`AgentRun.run` returns only after the agent's process group was killed and
checked (``quiescent`` is in ``detail``; a group that is not quiescent also sets ``quarantined``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation, PromptResponse

from openab_voice import __version__
from openab_voice.acp.client import ActionClient, ToolCallRecord
from openab_voice.acp.pod import PodAgent
from openab_voice.acp.spawn import STDERR_LOG, AgentProcess, agent_environment, allowlisted
from openab_voice.acp.types import ExecutionOutcome, PermissionDecision, TurnCompletion, TurnRequest
from openab_voice.clock import Clock, bounded, first_done
from openab_voice.errors import AcpError

EventHook = Callable[[str, dict[str, object]], None]
DecisionHook = Callable[[PermissionDecision], None]

_FAILED_STOPS = {
    "refusal": "ACP_REFUSED",
    "max_tokens": "ACP_MAX_TOKENS",
    "max_turn_requests": "ACP_MAX_TURN_REQUESTS",
    "cancelled": "ACP_CANCELLED_BY_AGENT",  # a cancelled turn we never asked for: it ended, unsuccessfully
}
_CLOSE_S = 5.0


@dataclass(frozen=True, slots=True)
class _Verdict:
    execution: ExecutionOutcome
    error_code: str | None
    detail: str
    stop_reason: str | None = None


class AgentRun:
    """One action's agent run. Single use: :meth:`run` once; :meth:`cancel` from any task.

    Args:
        request: What to run, where, within which ceiling and time limits.
        clock: All timeouts and event times come from it.
        on_event: Called as ``on_event(kind, data)`` for ``process_started`` (pid), ``initialized``,
            ``session_created``, ``prompt_sent``, ``tool_call``, ``permission``, ``cancel_sent``,
            ``turn_ended`` and ``stopped`` (quiescent); ``data["t"]`` is the clock's monotonic time.
            For audit and benchmarks (confirm -> process started). Must not raise.
        on_decision: Called with every permission decision as it is made. Must not raise.
        kill_wait_s: How long to wait for the group to die after SIGKILL.
    """

    def __init__(
        self,
        request: TurnRequest,
        *,
        clock: Clock,
        on_event: EventHook | None = None,
        on_decision: DecisionHook | None = None,
        kill_wait_s: float = 5.0,
    ) -> None:
        self._request = request
        self._clock = clock
        self._on_event = on_event
        self._on_decision = on_decision
        self._kill_wait_s = kill_wait_s
        self._cancel_requested = asyncio.Event()
        self._done = asyncio.Event()
        self._started = False
        self._prompt_sent = False
        self._auth_methods: tuple[str, ...] = ()
        self._client: ActionClient | None = None

    @property
    def prompt_sent(self) -> bool:
        """Whether the goal was (or may have been) handed to the agent."""
        return self._prompt_sent

    def request_cancel(self) -> None:
        """Ask for the cancel without waiting (before :meth:`run`: it then spawns nothing).

        From this call on, every permission request is answered ``cancelled`` (fail closed, a moment
        before ``session/cancel`` is on the wire; the spec requires it from then on).
        """
        self._cancel_requested.set()
        if self._client is not None:
            self._client.begin_cancel()

    async def cancel(self) -> None:
        """Ask the agent to stop (``session/cancel``) and wait until the run has finished (see
        :meth:`request_cancel`).

        The run then waits up to ``cancel_grace_s`` for the ``cancelled`` stop reason, answering any
        permission request ``cancelled`` meanwhile, and kills the process group otherwise. Before the
        agent was started, the run just ends ``cancelled``. After the turn ended, it changes nothing.
        """
        self.request_cancel()
        if self._started:
            await self._done.wait()

    async def run(self) -> TurnCompletion:
        """Spawn the agent, run the one turn, stop the process group, and say what happened.

        If the calling task is cancelled, the process group is killed before ``CancelledError``
        propagates; the caller must then treat the action as ``outcome_unknown`` if the prompt may
        have been sent.
        """
        if self._started:
            raise RuntimeError("AgentRun is single use: one fresh agent process per action")
        self._started = True
        try:
            return await self._run()
        finally:
            self._done.set()

    async def _run(self) -> TurnCompletion:
        request = self._request
        workspace = request.workspace
        if self._cancel_requested.is_set():
            verdict = _Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the agent was started")
            return self._complete(verdict, prompt_sent=False, client=None, stopped="no process was started")
        started = await self._launch()
        if isinstance(started, _Verdict):
            return self._complete(started, prompt_sent=False, client=None, stopped="no agent was started")
        process = started
        self._emit(
            "process_started",
            pid=process.pid,
            pgid=process.pgid,
            sandboxed=process.sandboxed,
            pod=process.name if isinstance(process, PodAgent) else None,
        )
        client = ActionClient(
            ceiling=request.effect_ceiling,
            workspace=workspace.path,
            sandboxed=process.sandboxed,
            on_decision=self._decided,
            on_tool_call=self._tool_call,
        )
        self._client = client
        if self._cancel_requested.is_set():
            client.begin_cancel()
        conn = connect_to_agent(client, process.stdin, process.stdout)
        try:
            verdict = await self._converse(conn, client)
        except BaseException:
            # Cancelled by our caller (or a bug): never leave the agent running.
            process.kill_now()
            await process.stop(0.0, kill_wait_s=self._kill_wait_s)
            await bounded(self._clock, _CLOSE_S, conn.close())
            raise
        quiescent = await process.stop(request.cancel_grace_s, kill_wait_s=self._kill_wait_s)
        await bounded(self._clock, _CLOSE_S, conn.close())
        self._emit("stopped", quiescent=quiescent, returncode=process.returncode)
        if isinstance(process, PodAgent):
            stopped = "action pod deleted" if quiescent else "action pod NOT gone after its deletion"
        else:
            stopped = "process group quiescent" if quiescent else "process group NOT quiescent after SIGKILL"
        return self._complete(
            verdict,
            prompt_sent=self._prompt_sent,
            client=client,
            stopped=stopped,
            quiescent=quiescent,
            process=process,
        )

    async def _launch(self) -> AgentProcess | PodAgent | _Verdict:
        """The started agent, or the verdict of a start that failed or was cancelled (nothing asked)."""
        pods = self._request.pods
        if pods is None:
            try:
                return await self._start_agent()
            except AcpError as exc:
                return _Verdict(ExecutionOutcome.FAILED, exc.code, exc.message)
        # Scheduling and pulling can take a while: a cancel meanwhile deletes the pod and ends now.
        started = await self._race(self._start_agent(), pods.settings.start_timeout_s + _CLOSE_S)
        if started.error is not None:
            code, what = _startup_failure(started.error)
            return _Verdict(ExecutionOutcome.FAILED, code, what)
        if not (started.cancelled or started.timed_out):
            return cast(PodAgent, started.result)
        if isinstance(started.result, PodAgent):  # it came up as the cancel did: it goes
            await started.result.stop(0.0, kill_wait_s=self._kill_wait_s)
        if started.cancelled:
            return _Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the agent was started")
        return _Verdict(ExecutionOutcome.FAILED, "ACP_POD_FAILED", "the action pod did not start in time")

    async def _start_agent(self) -> AgentProcess | PodAgent:
        """A fresh agent: a local process (in the sandbox when there is one) or an action pod.

        Raises:
            AcpError: nothing was started (credentials, a missing program, a pod that did not run).
        """
        request = self._request
        workspace = request.workspace
        stderr_log = workspace.logs / STDERR_LOG
        if request.pods is not None:
            # Non-secret values only; the pod manifest sets HOME/TMPDIR and keeps the image's PATH.
            env = allowlisted(request.env_allowlist, request.environ)
            return await request.pods.start(request.action_id, request.command, env, stderr_log=stderr_log)
        env = agent_environment(request.env_allowlist, request.environ, workspace, request.credentials)
        sandbox = request.sandbox
        return await AgentProcess.start(
            request.command
            if sandbox is None
            else sandbox.command(request.command, workspace, path_env=env.get("PATH")),
            env=env,
            cwd=workspace.path,
            stderr_log=stderr_log,
            clock=self._clock,
            sandboxed=sandbox is not None,
        )

    async def _converse(self, conn: ClientSideConnection, client: ActionClient) -> _Verdict:
        request = self._request
        opened = await self._race(self._open_session(conn, client), request.startup_timeout_s)
        if opened.cancelled:
            return _Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the prompt was sent")
        if opened.timed_out:
            return _Verdict(
                ExecutionOutcome.FAILED,
                "ACP_STARTUP_TIMEOUT",
                f"no session within {request.startup_timeout_s:g} s; the prompt was not sent",
            )
        if opened.error is not None:
            code, what = _startup_failure(opened.error)
            if code == "ACP_AUTH_REQUIRED" and self._request.auth_method is None and self._auth_methods:
                what += f" (set OPENAB_ACP_AUTH_METHOD to one it offers: {', '.join(self._auth_methods)})"
            return _Verdict(ExecutionOutcome.FAILED, code, f"{what}; the prompt was not sent")
        session_id = str(opened.result)

        # Write-ahead: from the moment we start writing the prompt the agent may have it. (If the
        # connection is already gone the SDK refuses before writing, but we cannot tell that apart
        # from a later EOF, so it counts as sent: unknown, never a false "nothing happened".)
        self._prompt_sent = True
        self._emit("prompt_sent", session_id=session_id)
        prompt = asyncio.ensure_future(conn.prompt(session_id=session_id, prompt=[text_block(request.goal)]))
        cancel_wait = asyncio.ensure_future(self._cancel_requested.wait())
        try:
            which = await first_done(self._clock, request.turn_timeout_s, prompt, cancel_wait)
            # A cancel requested by the time we look decides, even when the prompt also finished: its
            # permission requests may already have been answered `cancelled`, so an `end_turn` now
            # proves nothing (the cancel path judges the stop reason), and "succeeded" would be a lie.
            if which == 0 and not self._cancel_requested.is_set():
                return self._ended(prompt)
            reason = "turn timeout" if which is None else "operator"
            return await self._stop_turn(conn, client, session_id, prompt, reason)
        finally:
            for task in (prompt, cancel_wait):
                task.cancel()
            await asyncio.gather(prompt, cancel_wait, return_exceptions=True)

    async def _open_session(self, conn: ClientSideConnection, client: ActionClient) -> str:
        # No fs / terminal capability: the agent gets nothing from us but permission answers.
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
        )
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=capabilities,
            client_info=Implementation(name="openab-voice", version=__version__),
        )
        if init.protocol_version != PROTOCOL_VERSION:
            # ACP initialization: the client should disconnect from a version it does not support.
            raise AcpError(
                f"agent speaks ACP version {init.protocol_version}, we speak {PROTOCOL_VERSION}",
                code="ACP_PROTOCOL_VERSION",
            )
        agent = init.agent_info.name if init.agent_info is not None else None
        self._emit("initialized", protocol_version=init.protocol_version, agent=agent)
        self._auth_methods = tuple(method.id for method in init.auth_methods or ())
        await self._authenticate(conn)
        session = await conn.new_session(cwd=str(self._request.workspace.path), mcp_servers=[])
        client.session_id = session.session_id
        self._emit("session_created", session_id=session.session_id)
        return session.session_id

    async def _authenticate(self, conn: ClientSideConnection) -> None:
        """ACP ``authenticate`` with the configured method (codex-acp refuses ``session/new`` without it).

        Raises:
            AcpError: ``ACP_AUTH_METHOD_UNAVAILABLE`` when the agent does not offer the configured method,
                ``ACP_AUTH_FAILED`` when it refuses it.
        """
        method = self._request.auth_method
        if method is None:
            return
        if method not in self._auth_methods:
            offered = ", ".join(self._auth_methods) or "none"
            raise AcpError(
                f"the agent does not offer authentication method {method!r} (it offers: {offered})",
                code="ACP_AUTH_METHOD_UNAVAILABLE",
            )
        try:
            await conn.authenticate(method_id=method)
        except RequestError as exc:
            raise AcpError(
                f"authentication {method!r} refused: {_rpc(exc)}", code="ACP_AUTH_FAILED"
            ) from None
        self._emit("authenticated", method=method)

    def _ended(self, prompt: asyncio.Future[PromptResponse]) -> _Verdict:
        """The verdict for a prompt that finished without our cancel."""
        try:
            stop = _stop_reason(prompt)
        except Exception as exc:
            code, what = _turn_failure(exc)
            return _Verdict(ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{what} after the prompt was sent")
        self._emit("turn_ended", stop_reason=stop)
        if stop == "end_turn":
            return _Verdict(ExecutionOutcome.SUCCEEDED, None, "the agent ended its turn", stop)
        return _Verdict(
            ExecutionOutcome.FAILED,
            _FAILED_STOPS.get(stop, "ACP_PROTOCOL_ERROR"),
            f"the agent stopped: {stop}",
            stop,
        )

    async def _stop_turn(
        self,
        conn: ClientSideConnection,
        client: ActionClient,
        session_id: str,
        prompt: asyncio.Future[PromptResponse],
        reason: str,
    ) -> _Verdict:
        """ACP cancellation: ``session/cancel``, answer permissions ``cancelled``, wait for ``cancelled``."""
        grace = self._request.cancel_grace_s
        client.begin_cancel()
        try:
            await conn.cancel(session_id=session_id)
        except Exception as exc:  # the connection is already gone: the wait below says so
            self._emit("cancel_sent", reason=reason, error=type(exc).__name__)
        else:
            self._emit("cancel_sent", reason=reason)
        timeout = reason == "turn timeout"
        code = "ACP_TURN_TIMEOUT" if timeout else "ACP_CANCEL_UNCONFIRMED"
        lead = (
            f"turn timeout after {self._request.turn_timeout_s:g} s"
            if timeout
            else "cancelled by the operator"
        )
        if await first_done(self._clock, grace, prompt) is None:
            return _Verdict(
                ExecutionOutcome.OUTCOME_UNKNOWN,
                code,
                f"{lead}; no cancelled stop reason within {grace:g} s: killed",
            )
        try:
            stop = _stop_reason(prompt)
        except Exception as exc:
            _, what = _turn_failure(exc)
            return _Verdict(ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{lead}; then {what}")
        self._emit("turn_ended", stop_reason=stop)
        if stop == "cancelled" and not timeout:
            return _Verdict(ExecutionOutcome.CANCELLED, None, f"{lead}; the agent confirmed", stop)
        if stop == "cancelled":
            # Stopped, but the action did not get to finish and nobody asked for it to stop early.
            return _Verdict(
                ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{lead}; the agent confirmed the cancel", stop
            )
        return _Verdict(
            ExecutionOutcome.OUTCOME_UNKNOWN,
            code,
            f"{lead}; the agent answered {stop} instead of cancelled: the work may or may not have completed",
            stop,
        )

    async def _race(self, coro: Coroutine[Any, Any, Any], timeout_s: float) -> _Raced:
        """Run ``coro`` until it finishes, ``timeout_s`` passes or a cancel is requested."""
        task = asyncio.ensure_future(coro)
        cancel_wait = asyncio.ensure_future(self._cancel_requested.wait())
        try:
            which = await first_done(self._clock, timeout_s, task, cancel_wait)
        finally:
            for pending in (task, cancel_wait):
                pending.cancel()
            await asyncio.gather(task, cancel_wait, return_exceptions=True)
        if which == 0:
            if task.cancelled():  # cancelled from inside (the SDK closing): treat as a lost connection
                return _Raced(error=ConnectionError("session set-up was cancelled"))
            error = task.exception()
            return _Raced(result=None if error is not None else task.result(), error=error)
        # It may have finished in the same moment: hand its result back so that the caller can undo it.
        late = task.result() if task.done() and not task.cancelled() and task.exception() is None else None
        return _Raced(result=late, cancelled=which == 1, timed_out=which is None)

    def _complete(
        self,
        verdict: _Verdict,
        *,
        prompt_sent: bool,
        client: ActionClient | None,
        stopped: str,
        quiescent: bool = True,
        process: AgentProcess | PodAgent | None = None,
    ) -> TurnCompletion:
        unknown = verdict.execution is ExecutionOutcome.OUTCOME_UNKNOWN
        detail = f"{verdict.detail}; {stopped}"
        if process is not None:
            detail += f"; agent stderr: {process.stderr_log}"
        return TurnCompletion(
            action_id=self._request.action_id,
            execution=verdict.execution,
            stop_reason=verdict.stop_reason,
            output=client.output if client is not None else "",
            error_code=verdict.error_code,
            detail=detail,
            prompt_sent=prompt_sent,
            permission_decisions=client.decisions if client is not None else (),
            quarantined=unknown or not quiescent,
        )

    def _decided(self, decision: PermissionDecision) -> None:
        self._emit(
            "permission",
            tool_call_id=decision.tool_call_id,
            kind=decision.kind,
            needed=decision.needed.value,
            outcome=decision.outcome,
            option_kind=decision.option_kind,
        )
        if self._on_decision is not None:
            self._on_decision(decision)

    def _tool_call(self, record: ToolCallRecord) -> None:
        self._emit("tool_call", tool_call_id=record.tool_call_id, kind=record.kind, status=record.status)

    def _emit(self, event: str, /, **data: object) -> None:
        if self._on_event is not None:
            self._on_event(event, {"t": self._clock.monotonic(), **data})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Raced:
    result: object = None
    error: BaseException | None = None
    cancelled: bool = False
    timed_out: bool = False


def _stop_reason(prompt: asyncio.Future[PromptResponse]) -> str:
    """The finished prompt's stop reason; raises what it failed with."""
    if prompt.cancelled():  # only the SDK tearing down could do this: the connection is gone
        raise ConnectionError("the prompt request was dropped")
    return prompt.result().stop_reason


def _startup_failure(error: BaseException) -> tuple[str, str]:
    """(code, what happened) for a failure before the prompt was sent."""
    if isinstance(error, AcpError):
        return error.code, error.message
    if isinstance(error, RequestError):
        code = "ACP_AUTH_REQUIRED" if error.code == -32000 else "ACP_PROTOCOL_ERROR"
        return code, f"the agent refused to start a session: {_rpc(error)}"
    if isinstance(error, ConnectionError):
        return "ACP_AGENT_EXITED", "the agent exited before a session was created"
    return "ACP_PROTOCOL_ERROR", f"unusable answer from the agent ({type(error).__name__})"


def _turn_failure(error: BaseException) -> tuple[str, str]:
    """(code, what happened) for a prompt that failed instead of answering a stop reason."""
    if isinstance(error, RequestError):
        return "ACP_PROMPT_ERROR", f"the prompt failed: {_rpc(error)}"
    if isinstance(error, ConnectionError):
        return "ACP_AGENT_EXITED", "the agent's connection closed (exit or crash)"
    return "ACP_PROTOCOL_ERROR", f"unusable answer to the prompt ({type(error).__name__})"


def _rpc(error: RequestError) -> str:
    # The message is the agent's text: bounded, and never its data payload (it may echo input).
    return f"JSON-RPC {error.code} {str(error)[:200]!r}"
