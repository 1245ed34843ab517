"""The turn driver: one fresh agent process, one session, one prompt, one :class:`TurnCompletion`.

Never pooled, resumed or persisted. Before the prompt is sent a failure is ``failed`` (``prompt_sent``
False); after it, ``end_turn`` is ``succeeded``, other stop reasons ``failed``, our confirmed cancel
``cancelled``, and everything else (timeout, EOF, crash, an unconfirmed cancel, ``end_turn`` after a
cancel) ``outcome_unknown`` with ``quarantined=True``. :meth:`AgentRun.run` returns only after the
agent's process group was killed and checked. The handshake is :mod:`~openab_voice.acp.handshake`'s,
the cancel :mod:`~openab_voice.acp.cancellation`'s, what an ending proves :mod:`~openab_voice.acp.verdicts`'.
The outcome rules in detail: docs/adr/0004-action-plane.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, cast

from acp import connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import PromptResponse

from openab_voice.acp.cancellation import Raced, race, stop_turn
from openab_voice.acp.client import ActionClient, ToolCallRecord
from openab_voice.acp.handshake import Handshake
from openab_voice.acp.pod import PodAgent
from openab_voice.acp.spawn import STDERR_LOG, AgentProcess, agent_environment, allowlisted
from openab_voice.acp.types import ExecutionOutcome, PermissionDecision, TurnCompletion, TurnRequest
from openab_voice.acp.verdicts import Verdict, ended_verdict, startup_failure, stop_reason, turn_failure
from openab_voice.clock import Clock, bounded, first_done
from openab_voice.errors import AcpError, ErrorCode

EventHook = Callable[[str, dict[str, object]], None]
DecisionHook = Callable[[PermissionDecision], None]

_CLOSE_S = 5.0


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
        self._handshake = Handshake(request, self._emit)
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
            verdict = Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the agent was started")
            return self._complete(verdict, prompt_sent=False, client=None, stopped="no process was started")
        started = await self._launch()
        if isinstance(started, Verdict):
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

    async def _launch(self) -> AgentProcess | PodAgent | Verdict:
        """The started agent, or the verdict of a start that failed or was cancelled (nothing asked)."""
        pods = self._request.pods
        if pods is None:
            try:
                return await self._start_agent()
            except AcpError as exc:
                return Verdict(ExecutionOutcome.FAILED, exc.code, exc.message)
        # Scheduling and pulling can take a while: a cancel meanwhile deletes the pod and ends now.
        started = await self._race(self._start_agent(), pods.settings.start_timeout_s + _CLOSE_S)
        if started.error is not None:
            code, what = startup_failure(started.error)
            return Verdict(ExecutionOutcome.FAILED, code, what)
        if not (started.cancelled or started.timed_out):
            return cast(PodAgent, started.result)
        if isinstance(started.result, PodAgent):  # it came up as the cancel did: it goes
            await started.result.stop(0.0, kill_wait_s=self._kill_wait_s)
        if started.cancelled:
            return Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the agent was started")
        return Verdict(
            ExecutionOutcome.FAILED, ErrorCode.ACP_POD_FAILED, "the action pod did not start in time"
        )

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

    async def _converse(self, conn: ClientSideConnection, client: ActionClient) -> Verdict:
        request = self._request
        opened = await self._race(self._handshake.open_session(conn, client), request.startup_timeout_s)
        if opened.cancelled:
            return Verdict(ExecutionOutcome.CANCELLED, None, "cancelled before the prompt was sent")
        if opened.timed_out:
            return Verdict(
                ExecutionOutcome.FAILED,
                ErrorCode.ACP_STARTUP_TIMEOUT,
                f"no session within {request.startup_timeout_s:g} s; the prompt was not sent",
            )
        if opened.error is not None:
            code, what = startup_failure(opened.error)
            offered = self._handshake.auth_methods
            if code == ErrorCode.ACP_AUTH_REQUIRED and self._request.auth_method is None and offered:
                what += f" (set OPENAB_ACP_AUTH_METHOD to one it offers: {', '.join(offered)})"
            return Verdict(ExecutionOutcome.FAILED, code, f"{what}; the prompt was not sent")
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
            return await stop_turn(
                conn, client, session_id, prompt, reason, request=request, clock=self._clock, emit=self._emit
            )
        finally:
            for task in (prompt, cancel_wait):
                task.cancel()
            await asyncio.gather(prompt, cancel_wait, return_exceptions=True)

    def _ended(self, prompt: asyncio.Future[PromptResponse]) -> Verdict:
        """The verdict for a prompt that finished without our cancel."""
        try:
            stop = stop_reason(prompt)
        except Exception as exc:
            code, what = turn_failure(exc)
            return Verdict(ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{what} after the prompt was sent")
        self._emit("turn_ended", stop_reason=stop)
        return ended_verdict(stop)

    async def _race(self, coro: Coroutine[Any, Any, Any], timeout_s: float) -> Raced:
        """Run ``coro`` until it finishes, ``timeout_s`` passes or a cancel is requested."""
        return await race(self._clock, coro, timeout_s, self._cancel_requested)

    def _complete(
        self,
        verdict: Verdict,
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
