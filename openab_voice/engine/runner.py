"""Runs one response: the generate half and the speak half, and the report of how it ended.

One :class:`ResponseRunner` per response, run as one task the conversation manager owns (through
:class:`~openab_voice.engine.supervisor.ResponseSupervisor`). Inside, a task group runs two children
joined by a sentence queue: :class:`~openab_voice.engine.generation.Generation` puts each sentence
on it as the model writes it, :class:`~openab_voice.engine.speaking.Speaking` says them in order.

Progress goes back to the manager as state-machine inputs (``AudioStarted``, ``ToolStarted``,
``ToolFinished``, then exactly one ``ResponseFinished`` or ``ResponseFailed``), through
:class:`~openab_voice.engine.hold.ResponseReports`. Cancelling the task cancels both children; the
model stream and every TTS stream are closed on the way out (``aclose``), so nothing keeps
generating after an interruption.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from openab_voice.engine.generation import Generation
from openab_voice.engine.handle import PlayedPosition, SpeechHandle
from openab_voice.engine.hold import Hold, ResponseReports
from openab_voice.engine.response import ResponseDeps, ResponseRequest
from openab_voice.engine.speaking import Speaking
from openab_voice.engine.state import DialogueInput, ResponseFailed, ResponseFinished
from openab_voice.errors import OpenabError, ResponseError

__all__ = ["ResponseRunner"]

log = logging.getLogger(__name__)


def _first_error(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class ResponseRunner:
    """Runs one response; see the module docstring.

    Args:
        deps: shared providers and limits.
        request: what to say or generate.
        handle: the response's speech handle (sentences, audio, position).
        report: called with each state-machine input, in order (puts it in the manager's inbox).
        hold: set for a response prepared ahead of its turn (see :class:`~openab_voice.engine.hold.Hold`).
    """

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        request: ResponseRequest,
        handle: SpeechHandle,
        report: Callable[[DialogueInput], None],
        hold: Hold | None = None,
    ) -> None:
        self._handle = handle
        self._reports = ResponseReports(
            deps=deps,
            handle=handle,
            speaker_id=request.speaker_id,
            eou_at=request.eou_at,
            send=report,
            hold=hold,
        )
        self._generation = Generation(deps=deps, request=request, handle=handle, reports=self._reports)
        self._speaking = Speaking(
            deps=deps, request=request, handle=handle, reports=self._reports, generation=self._generation
        )

    async def run(self) -> None:
        try:
            position = await self._pipeline()
        except Exception as exc:  # CancelledError is not an Exception: it propagates
            err = _first_error(exc)
            code = err.code if isinstance(err, OpenabError) else ResponseError.code
            retryable = err.retryable if isinstance(err, OpenabError) else True
            rid = self._handle.response_id
            log.warning("response %s failed: %s", rid, err)
            self._reports.progress(
                ResponseFailed(response_id=rid, code=code, message=str(err), retryable=retryable)
            )
            return
        interrupted = False
        if position is not None:
            self._handle.mark_played(position)
            interrupted = position.interrupted
        self._reports.progress(
            ResponseFinished(response_id=self._handle.response_id, interrupted=interrupted)
        )

    async def _pipeline(self) -> PlayedPosition | None:
        queue: asyncio.Queue[int | None] = asyncio.Queue()
        async with asyncio.TaskGroup() as group:
            self._generation.start(group, queue)
            speak = self._speaking.start(group, queue)
        return speak.result()
