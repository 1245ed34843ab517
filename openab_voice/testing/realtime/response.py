"""One response of a loopback session, from ``response.created`` to ``response.done``.

The event sequence is the GA API's: ``response.created``, (``rate_limits.updated``), then for speech
``response.output_item.added`` / ``conversation.item.added`` / ``response.content_part.added``, the
``response.output_audio_transcript.delta`` and ``response.output_audio.delta`` events, and the
``*.done`` events closing each level; for a function call ``response.function_call_arguments.delta``
and ``.done``. Audio goes out in ``chunk_ms`` pieces paced on the injected clock as the audio plays
(``realtime_factor`` 1), the first no earlier than ``first_audio_latency_s`` after the
``response.create`` arrived; each word's transcript delta goes out with the chunk its audio starts
in. :meth:`ResponseRun.cancel` stops it between two events: the open item ends ``incomplete``, the
response ``cancelled`` (``client_cancelled``), with the audio sent so far kept in the conversation.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from openai.types.realtime import (
    RateLimitsUpdatedEvent,
    RealtimeConversationItemFunctionCall,
    RealtimeFunctionTool,
    RealtimeResponse,
    RealtimeResponseStatus,
    RealtimeSessionCreateRequest,
    ResponseAudioDeltaEvent,
    ResponseAudioTranscriptDeltaEvent,
    ResponseCreatedEvent,
    ResponseDoneEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseTextDeltaEvent,
)
from openai.types.realtime.conversation_item import ConversationItem
from openai.types.realtime.rate_limits_updated_event import RateLimit
from openai.types.realtime.realtime_response_status import Error as StatusError

from openab_voice.clock import Clock
from openab_voice.testing.realtime.conversation import Conversation, HeldItem, TimedWord, audio_ms
from openab_voice.testing.realtime.faults import ResponseFailure
from openab_voice.testing.realtime.output_items import OutputItems
from openab_voice.testing.realtime.pacing import Pacer, Pacing, split_sentences, timed_words
from openab_voice.testing.realtime.responder import CallFunction, Reply, Responder, Speak, Turn
from openab_voice.testing.realtime.response_objects import CallIds, SendEvent, Status, response_object
from openab_voice.testing.realtime.session_config import PCM_RATE, output_is_audio
from openab_voice.testing.realtime.speech import Listener, Voice
from openab_voice.testing.realtime.turns import build_turn
from openab_voice.testing.realtime.wire import new_id

__all__ = ["ResponseRecord", "ResponseRun", "SendEvent"]

T = TypeVar("T")


@dataclass(slots=True, kw_only=True)
class ResponseRecord:
    """What one response did, for tests (``first_audio_at`` on the server's clock)."""

    id: str
    status: Status = "in_progress"
    turn: Turn | None = None
    reply: Reply | None = None
    item_id: str | None = None
    audio_ms_sent: float = 0.0
    transcript_sent: str = ""
    first_audio_at: float | None = None
    failure: ResponseFailure | None = None
    sentences: list[str] = field(default_factory=list)


class _Cancelled(Exception):
    """Raised inside the run when a cancel won the race against what it was waiting for."""


class ResponseRun:
    """Produces one response; run :meth:`run` in its own task, call :meth:`cancel` from anywhere."""

    def __init__(
        self,
        *,
        send: SendEvent,
        conversation: Conversation,
        config: RealtimeSessionCreateRequest,
        instructions: str,
        tools: tuple[RealtimeFunctionTool, ...],
        out_of_band: bool,
        responder: Responder,
        listener: Listener,
        voice: Voice,
        clock: Clock,
        pacing: Pacing,
        started_at: float,
        failure: ResponseFailure | None = None,
        rate_limits: list[RateLimit] | None = None,
    ) -> None:
        self.record = ResponseRecord(id=new_id("resp"))
        self._send = send
        self._conversation = conversation
        self._config = config
        self._instructions = instructions
        self._tools = tools
        self._out_of_band = out_of_band
        self._responder = responder
        self._listener = listener
        self._voice = voice
        self._clock = clock
        self._pacing = pacing
        self._failure = failure
        self._rate_limits = rate_limits
        self._cancel = asyncio.Event()
        self._cancel_reason: Literal["client_cancelled", "turn_detected"] = "client_cancelled"
        self._pacer = Pacer(pacing, started_at=started_at)
        self._held: HeldItem | None = None
        self._items = OutputItems(
            send=send,
            conversation=conversation,
            response_id=self.record.id,
            out_of_band=out_of_band,
            audio=output_is_audio(config),
        )
        self._pending: list[asyncio.Task[bytes]] = []

    @property
    def id(self) -> str:
        return self.record.id

    def cancel(self, reason: Literal["client_cancelled", "turn_detected"] = "client_cancelled") -> None:
        """Stop at the next event boundary and end the response ``cancelled`` for ``reason``."""
        if not self._cancel.is_set():
            self._cancel_reason = reason
        self._cancel.set()

    async def run(self) -> ResponseRecord:
        """Send the whole response. Connection failures propagate from the sender."""
        await self._send(
            ResponseCreatedEvent(
                type="response.created", event_id=new_id("event"), response=self._response("in_progress", [])
            )
        )
        if self._rate_limits is not None:
            await self._send(
                RateLimitsUpdatedEvent(
                    type="rate_limits.updated", event_id=new_id("event"), rate_limits=self._rate_limits
                )
            )
        try:
            turn = await self._race(
                lambda: build_turn(
                    self._conversation, self._listener, instructions=self._instructions, tools=self._tools
                )
            )
            self.record.turn = turn
            if self._failure is not None:
                await self._fail(self._failure)
                return self.record
            reply = await self._race(lambda: self._responder.respond(turn))
            self.record.reply = reply
            if isinstance(reply, CallFunction):
                await self._function_call(reply)
            else:
                await self._speak(reply)
        except _Cancelled:
            await self._close_cancelled()
        finally:
            await _settle(*self._pending)
        return self.record

    # --- the two kinds of output ---------------------------------------------------------------

    async def _speak(self, reply: Speak) -> None:
        audio = output_is_audio(self._config)
        held = self._held = await self._items.open_message()
        self.record.item_id = held.id
        await self._items.open_part(held)
        sentences = split_sentences(reply.text)
        self.record.sentences = sentences
        if audio:
            await self._stream_audio(held, sentences)
        else:
            await self._stream_text(held, sentences)
        await self._items.close_message(held, "completed")
        await self._done("completed", [held.item])

    async def _function_call(self, call: CallFunction) -> None:
        item = RealtimeConversationItemFunctionCall(
            id=new_id("item"),
            object="realtime.item",
            type="function_call",
            status="in_progress",
            name=call.name,
            call_id=call.call_id,
            arguments="",
        )
        held = HeldItem(item=item)
        await self._items.add(held)
        self.record.item_id = held.id
        ids: CallIds = {
            "item_id": held.id,
            "call_id": call.call_id,
            "output_index": 0,
            "response_id": self.id,
        }
        await self._send(
            ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                event_id=new_id("event"),
                delta=call.arguments,
                **ids,
            )
        )
        await self._send(
            ResponseFunctionCallArgumentsDoneEvent(
                type="response.function_call_arguments.done",
                event_id=new_id("event"),
                arguments=call.arguments,
                name=call.name,
                **ids,
            )
        )
        held.item = item.model_copy(update={"status": "completed", "arguments": call.arguments})
        await self._items.finish(held)
        await self._done("completed", [held.item])

    # --- audio and text streaming --------------------------------------------------------------

    async def _stream_audio(self, held: HeldItem, sentences: list[str]) -> None:
        chunk_bytes = self._pacing.chunk_ms * PCM_RATE // 1000 * 2
        self._pending = [asyncio.ensure_future(self._voice.synthesize(s)) for s in sentences[:1]]
        offset = 0.0  # where this sentence's audio starts (the item's audio may be cut shorter)
        for index, sentence in enumerate(sentences):
            if index + 1 < len(sentences):  # synthesize the next sentence while this one streams
                self._pending.append(asyncio.ensure_future(self._voice.synthesize(sentences[index + 1])))
            pcm = await self._race(self._pending[index])
            words = timed_words(sentence, offset, audio_ms(pcm))
            if not pcm:
                await self._transcript(held, words)
                continue
            for start in range(0, len(pcm), chunk_bytes):
                chunk = pcm[start : start + chunk_bytes]
                chunk_start = offset + audio_ms(pcm[:start])
                chunk_end = chunk_start + audio_ms(chunk)
                await self._pace(chunk_start)
                due, words = [w for w in words if w[0] < chunk_end], [w for w in words if w[0] >= chunk_end]
                await self._transcript(held, due)
                if self.record.first_audio_at is None:
                    self.record.first_audio_at = self._clock.monotonic()
                # In the item before it is on the wire: a truncate answering it finds it there.
                held.add_audio(chunk)
                await self._send(
                    ResponseAudioDeltaEvent(
                        type="response.output_audio.delta",
                        event_id=new_id("event"),
                        delta=base64.b64encode(chunk).decode("ascii"),
                        **self._items.ids(held),
                    ),
                    audio_ms_after=chunk_end,
                )
                self.record.audio_ms_sent = chunk_end
            await self._transcript(held, words)
            offset += audio_ms(pcm)

    async def _transcript(self, held: HeldItem, words: list[tuple[float, TimedWord]]) -> None:
        for _, word in words:
            delta = word.text if not self.record.transcript_sent else " " + word.text
            held.add_word(word)
            await self._send(
                ResponseAudioTranscriptDeltaEvent(
                    type="response.output_audio_transcript.delta",
                    event_id=new_id("event"),
                    delta=delta,
                    **self._items.ids(held),
                )
            )
            self.record.transcript_sent += delta

    async def _stream_text(self, held: HeldItem, sentences: list[str]) -> None:
        for word in " ".join(sentences).split():
            if self._cancel.is_set():
                raise _Cancelled
            delta = word if not self.record.transcript_sent else " " + word
            held.add_word(TimedWord(text=word, end_ms=0.0))
            await self._send(
                ResponseTextDeltaEvent(
                    type="response.output_text.delta",
                    event_id=new_id("event"),
                    delta=delta,
                    **self._items.ids(held),
                )
            )
            self.record.transcript_sent += delta

    async def _pace(self, position_ms: float) -> None:
        """Wait until the audio at ``position_ms`` is due."""

        async def until_due() -> None:
            # The delay is read when the sleep starts, in the same step: read earlier, a clock
            # advanced in between would push the deadline later than due.
            await self._clock.sleep(self._pacer.delay(position_ms, self._clock.monotonic()))

        await self._race(until_due)

    # --- items, parts and the response object --------------------------------------------------

    async def _close_cancelled(self) -> None:
        output: list[ConversationItem] = []
        if self._held is not None:
            await self._items.close_message(self._held, "incomplete")
            output.append(self._held.item)
        await self._done(
            "cancelled", output, RealtimeResponseStatus(type="cancelled", reason=self._cancel_reason)
        )

    async def _fail(self, failure: ResponseFailure) -> None:
        self.record.failure = failure
        error = StatusError(type=failure.type, code=failure.code, message=failure.message)
        await self._done("failed", [], RealtimeResponseStatus(type="failed", error=error))

    async def _done(
        self, status: Status, output: list[ConversationItem], details: RealtimeResponseStatus | None = None
    ) -> None:
        self.record.status = status
        await self._send(
            ResponseDoneEvent(
                type="response.done",
                event_id=new_id("event"),
                response=self._response(status, output, details),
            )
        )

    def _response(
        self, status: Status, output: list[ConversationItem], details: RealtimeResponseStatus | None = None
    ) -> RealtimeResponse:
        return response_object(
            self.id,
            status,
            output,
            config=self._config,
            out_of_band=self._out_of_band,
            details=details,
            output_words=len(self.record.transcript_sent.split()),
        )

    async def _race(self, start: Callable[[], Awaitable[T]] | asyncio.Future[T]) -> T:
        """``await start()`` (or the running ``start``), unless :meth:`cancel` comes first.

        ``start`` is called only once the race is on, so a cancel that came first leaves no
        coroutine unawaited; when the cancel wins, what ran is cancelled and awaited.

        Raises:
            _Cancelled: the cancel came first.
        """
        if self._cancel.is_set():
            raise _Cancelled
        task = start if isinstance(start, asyncio.Future) else asyncio.ensure_future(start())
        stopper = asyncio.ensure_future(self._cancel.wait())
        contenders: set[asyncio.Future[Any]] = {task, stopper}
        try:
            await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _settle(stopper, task)
        if task.cancelled():
            raise _Cancelled
        return task.result()


async def _settle(*tasks: asyncio.Future[Any]) -> None:
    """Cancel what is still running of ``tasks`` and wait until it is over."""
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
