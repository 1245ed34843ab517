"""Cancellation per the ACP prompt-turn spec, and the waits a cancel interrupts.

:func:`race` runs one step of the set-up (a pod start, ``initialize`` … ``session/new``) until it
finishes, times out or a cancel is requested. :func:`stop_turn` is the cancel of a prompt already
sent: ``session/cancel``, every permission request answered ``cancelled`` from then on, and a bounded
wait for the ``cancelled`` stop reason (the original prompt's result is the cancel confirmation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.schema import PromptResponse

from openab_voice.acp.client import ActionClient
from openab_voice.acp.types import ExecutionOutcome, TurnRequest
from openab_voice.acp.verdicts import Verdict, stop_reason, turn_failure
from openab_voice.clock import Clock, first_done
from openab_voice.errors import ErrorCode

Emit = Callable[..., None]  # AgentRun._emit: (event, /, **data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Raced:
    """What :func:`race` saw: a result or an error, or that a cancel or the timeout came first."""

    result: object = None
    error: BaseException | None = None
    cancelled: bool = False
    timed_out: bool = False


async def race(
    clock: Clock, coro: Coroutine[Any, Any, Any], timeout_s: float, cancel_requested: asyncio.Event
) -> Raced:
    """Run ``coro`` until it finishes, ``timeout_s`` passes or ``cancel_requested`` is set."""
    task = asyncio.ensure_future(coro)
    cancel_wait = asyncio.ensure_future(cancel_requested.wait())
    try:
        which = await first_done(clock, timeout_s, task, cancel_wait)
    finally:
        for pending in (task, cancel_wait):
            pending.cancel()
        await asyncio.gather(task, cancel_wait, return_exceptions=True)
    if which == 0:
        if task.cancelled():  # cancelled from inside (the SDK closing): treat as a lost connection
            return Raced(error=ConnectionError("session set-up was cancelled"))
        error = task.exception()
        return Raced(result=None if error is not None else task.result(), error=error)
    # It may have finished in the same moment: hand its result back so that the caller can undo it.
    late = task.result() if task.done() and not task.cancelled() and task.exception() is None else None
    return Raced(result=late, cancelled=which == 1, timed_out=which is None)


async def stop_turn(
    conn: ClientSideConnection,
    client: ActionClient,
    session_id: str,
    prompt: asyncio.Future[PromptResponse],
    reason: str,
    *,
    request: TurnRequest,
    clock: Clock,
    emit: Emit,
) -> Verdict:
    """ACP cancellation: ``session/cancel``, answer permissions ``cancelled``, wait for ``cancelled``.

    ``reason`` is ``"turn timeout"`` or ``"operator"``. Only the operator's cancel confirmed by the
    ``cancelled`` stop reason within ``cancel_grace_s`` is ``cancelled``; anything else is unknown.
    """
    grace = request.cancel_grace_s
    client.begin_cancel()
    try:
        await conn.cancel(session_id=session_id)
    except Exception as exc:  # the connection is already gone: the wait below says so
        emit("cancel_sent", reason=reason, error=type(exc).__name__)
    else:
        emit("cancel_sent", reason=reason)
    timeout = reason == "turn timeout"
    code = ErrorCode.ACP_TURN_TIMEOUT if timeout else ErrorCode.ACP_CANCEL_UNCONFIRMED
    lead = f"turn timeout after {request.turn_timeout_s:g} s" if timeout else "cancelled by the operator"
    if await first_done(clock, grace, prompt) is None:
        return Verdict(
            ExecutionOutcome.OUTCOME_UNKNOWN,
            code,
            f"{lead}; no cancelled stop reason within {grace:g} s: killed",
        )
    try:
        stop = stop_reason(prompt)
    except Exception as exc:
        _, what = turn_failure(exc)
        return Verdict(ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{lead}; then {what}")
    emit("turn_ended", stop_reason=stop)
    if stop == "cancelled" and not timeout:
        return Verdict(ExecutionOutcome.CANCELLED, None, f"{lead}; the agent confirmed", stop)
    if stop == "cancelled":
        # Stopped, but the action did not get to finish and nobody asked for it to stop early.
        return Verdict(
            ExecutionOutcome.OUTCOME_UNKNOWN, code, f"{lead}; the agent confirmed the cancel", stop
        )
    return Verdict(
        ExecutionOutcome.OUTCOME_UNKNOWN,
        code,
        f"{lead}; the agent answered {stop} instead of cancelled: the work may or may not have completed",
        stop,
    )
