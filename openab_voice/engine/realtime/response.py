"""One response of the realtime engine: from our ``response.create`` to its final ``response.done``.

A :class:`RealtimeResponse` consumes the provider's events for its response and turns them into what
the cascade's runner produces (:class:`~openab_voice.engine.realtime.speech.ProviderSpeech`): 48 kHz
stereo frames written through its
:class:`~openab_voice.engine.handle.SpeechHandle`, transcript sentences with the frames they cover
(a piece of transcript belongs to the audio after it; captions are best effort), tool rounds through
the ToolRouter (only :data:`REALTIME_TOOLS`, trusted context from our state, up to
``max_tool_rounds``), and state-machine inputs. In detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.events import ToolCallHandled
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.realtime.speech import ProviderSpeech
from openab_voice.engine.response import ToolPath
from openab_voice.engine.state import DialogueInput, ToolFinished, ToolStarted
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ToolCall
from openab_voice.providers.realtime import PROVIDER_RATE, RealtimeLink
from openab_voice.providers.realtime_openai import server_error
from openab_voice.tools.registry import ToolContext, ToolResult

if TYPE_CHECKING:
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["REALTIME_TOOLS", "RealtimeResponse"]

log = logging.getLogger(__name__)

REALTIME_TOOLS = frozenset({"start_agent_task", "get_agent_task", "cancel_agent_task", "clock_now"})
"""The only tools a realtime provider is offered: semantic action tools and the clock."""


@dataclass(slots=True)
class _Round:
    calls: list[Any] = field(default_factory=list)
    status: str | None = None
    error: Any = None


class RealtimeResponse(ProviderSpeech):
    """Runs one response; the engine owns its task and routes its events into :attr:`events`.

    Args:
        link: the provider session it was requested on.
        handle: its speech handle.
        prepared: what it answers (user turn) or says again (replay).
        output: playback.
        tools: the tool path.
        bus: for tool and latency observations.
        clock: the injected clock.
        report: the manager's inbox.
        session_id: the voice session.
        max_tool_rounds: tool rounds at most.
        model: for error messages.
        preroll_ms: audio held before the first frame is played (a jitter buffer).
        claims: checks each sentence before its audio plays (:class:`ProviderSpeech`).
    """

    def __init__(
        self,
        *,
        link: RealtimeLink,
        handle: SpeechHandle,
        prepared: PreparedResponse,
        output: SpeechOutput,
        tools: ToolPath,
        bus: EventBus,
        clock: Clock,
        report: Callable[[DialogueInput], None],
        session_id: str | None,
        max_tool_rounds: int,
        model: str,
        preroll_ms: float = 0.0,
        claims: SpeechClaims | None = None,
    ) -> None:
        super().__init__(
            handle=handle,
            prepared=prepared,
            output=output,
            bus=bus,
            clock=clock,
            report=report,
            session_id=session_id,
            in_rate=PROVIDER_RATE,
            preroll_ms=preroll_ms,
            claims=claims,
        )
        self.link = link
        self.events: asyncio.Queue[RealtimeServerEvent | None] = asyncio.Queue()
        self.provider_ids: list[str] = []
        self.in_flight = False  # a response.create is outstanding (no response.done yet)
        self._tools = tools
        self._max_rounds = max_tool_rounds
        self._model = model

    # --- the run -------------------------------------------------------------------------------

    async def stream(self) -> None:
        """Consume events until the last round's ``response.done``; tool rounds in between.

        Raises:
            OpenabError: the response failed (a server ``error``, a ``failed`` status).
        """
        for round_no in range(self._max_rounds + 1):
            result = await self._round()
            if result.error is not None:
                raise result.error
            if result.status == "failed":
                raise server_error(
                    kind="server_error",
                    code="response_failed",
                    message="the response failed",
                    model=self._model,
                )
            if not result.calls or result.status != "completed":
                return
            if round_no == self._max_rounds:
                log.warning("response %s: tool round limit reached", self.handle.response_id)
                return
            for call in result.calls:
                await self._run_tool(call)
            self.in_flight = True
            await self.link.send({"type": "response.create"})
        return

    async def _round(self) -> _Round:
        result = _Round()
        while True:
            event = await self.events.get()
            if event is None:  # the engine's reader saw the session end
                raise server_error(
                    kind="server_error", code="connection_lost", message="session ended", model=self._model
                )
            match event.type:
                case "response.created":
                    self.provider_ids.append(event.response.id or "")
                case "response.output_audio.delta":
                    await self._audio(event.item_id, event.delta)
                case "response.output_audio.done":
                    await self._audio_done(event.item_id)
                case "response.output_audio_transcript.delta":
                    self._transcript(event.delta)
                case "response.function_call_arguments.done":
                    result.calls.append(event)
                case "response.done":
                    self.in_flight = False
                    for item in self.items:
                        if not item.done:
                            await self._audio_done(item.item_id)
                    self._end_sentences()
                    result.status = event.response.status
                    return result
                case "error":
                    # Still in flight: what it generates after this is cancelled when it is discarded.
                    err = event.error
                    result.error = server_error(
                        kind=err.type, code=err.code, message=err.message, model=self._model
                    )
                    return result
                case _:
                    pass

    # --- tools ---------------------------------------------------------------------------------

    async def _run_tool(self, event: Any) -> None:
        call = ToolCall(id=event.call_id, name=event.name, arguments=event.arguments)
        rid = self.handle.response_id
        self._report(ToolStarted(response_id=rid, name=call.name))
        if call.name in REALTIME_TOOLS:
            context = ToolContext(
                session_id=self._session_id,
                turn_id=self.handle.turn_id,
                speaker_id=self.prepared.speaker_id,
            )
            result = await self._tools.call(call, context)
        else:
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                ok=False,
                error_code=ErrorCode.TOOL_UNKNOWN,
                reason=f"{call.name} is not offered to the realtime engine",
            )
        summary: dict[str, Any] = (
            {"content": result.content}
            if result.ok
            else {"error": result.error_code, "reason": result.reason}
        )
        self._bus.publish(
            ToolCallHandled(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                turn_id=self.handle.turn_id,
                name=call.name,
                ok=result.ok,
                result=summary,
            )
        )
        await self.link.send(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": call.id, "output": result.to_json()},
            }
        )
        self._report(ToolFinished(response_id=rid, name=call.name, ok=result.ok))

    # --- truncation ----------------------------------------------------------------------------

    def truncations(self, played_ms: float) -> list[tuple[str, int]]:
        """``(item_id, audio_end_ms)`` for every audio item not fully heard at ``played_ms``."""
        out: list[tuple[str, int]] = []
        for item in self.items:
            start_ms = item.offset_frames * 20.0
            heard_ms = min(max(played_ms - start_ms, 0.0), item.audio.in_ms)
            if heard_ms < item.audio.in_ms or not item.done:
                out.append((item.item_id, int(heard_ms)))
        return out
