"""What a turn's ending means: the :class:`Verdict` of a stop reason or a failure, before or after the prompt.

The outcome rules of :mod:`openab_voice.acp.driver` live here as pure functions, so that the driver
only decides *when* to judge and these decide *what* the agent's answer (or its silence) proves.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from acp import RequestError
from acp.schema import PromptResponse

from openab_voice.acp.types import ExecutionOutcome
from openab_voice.errors import AcpError, ErrorCode

_FAILED_STOPS = {
    "refusal": ErrorCode.ACP_REFUSED,
    "max_tokens": ErrorCode.ACP_MAX_TOKENS,
    "max_turn_requests": ErrorCode.ACP_MAX_TURN_REQUESTS,
    "cancelled": ErrorCode.ACP_CANCELLED_BY_AGENT,  # a cancelled turn we never asked for: it ended, unsuccessfully
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """How the run went, before the process group was stopped (the driver adds that to ``detail``)."""

    execution: ExecutionOutcome
    error_code: str | None
    detail: str
    stop_reason: str | None = None


def ended_verdict(stop: str) -> Verdict:
    """The verdict for a stop reason that ended the turn without our cancel."""
    if stop == "end_turn":
        return Verdict(ExecutionOutcome.SUCCEEDED, None, "the agent ended its turn", stop)
    return Verdict(
        ExecutionOutcome.FAILED,
        _FAILED_STOPS.get(stop, ErrorCode.ACP_PROTOCOL_ERROR),
        f"the agent stopped: {stop}",
        stop,
    )


def stop_reason(prompt: asyncio.Future[PromptResponse]) -> str:
    """The finished prompt's stop reason; raises what it failed with."""
    if prompt.cancelled():  # only the SDK tearing down could do this: the connection is gone
        raise ConnectionError("the prompt request was dropped")
    return prompt.result().stop_reason


def startup_failure(error: BaseException) -> tuple[str, str]:
    """(code, what happened) for a failure before the prompt was sent."""
    if isinstance(error, AcpError):
        return error.code, error.message
    if isinstance(error, RequestError):
        code = ErrorCode.ACP_AUTH_REQUIRED if error.code == -32000 else ErrorCode.ACP_PROTOCOL_ERROR
        return code, f"the agent refused to start a session: {rpc(error)}"
    if isinstance(error, ConnectionError):
        return ErrorCode.ACP_AGENT_EXITED, "the agent exited before a session was created"
    return ErrorCode.ACP_PROTOCOL_ERROR, f"unusable answer from the agent ({type(error).__name__})"


def turn_failure(error: BaseException) -> tuple[str, str]:
    """(code, what happened) for a prompt that failed instead of answering a stop reason."""
    if isinstance(error, RequestError):
        return ErrorCode.ACP_PROMPT_ERROR, f"the prompt failed: {rpc(error)}"
    if isinstance(error, ConnectionError):
        return ErrorCode.ACP_AGENT_EXITED, "the agent's connection closed (exit or crash)"
    return ErrorCode.ACP_PROTOCOL_ERROR, f"unusable answer to the prompt ({type(error).__name__})"


def rpc(error: RequestError) -> str:
    """A JSON-RPC error for a detail line."""
    # The message is the agent's text: bounded, and never its data payload (it may echo input).
    return f"JSON-RPC {error.code} {str(error)[:200]!r}"
