"""One websocket connection to the loopback realtime server: a Realtime session.

It answers each client event as the GA API does (``session.updated``, ``input_audio_buffer.committed``
/ ``cleared``, ``conversation.item.added`` + ``.done``, ``conversation.item.truncated`` /
``deleted`` / ``retrieved``, responses through :class:`~.response.ResponseRun`) and refuses what the
API refuses with an ``error`` event. The input buffer and items are :class:`~.items.ItemDesk`'s;
what the server does by itself with user audio (server VAD while ``turn_detection`` is on, input
transcription when asked for) is :class:`~.listening.ServerListening`'s. With
``turn_detection: null`` the session never answers unless asked.

Everything is kept for tests: the parsed client events (SDK models), the refused messages, the
server events sent, the conversation (truncation applied), each response's record. Waiting is by
:meth:`LoopbackSession.wait_for` on a condition, never by sleeping.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from openai.types.realtime import (
    ConversationItemCreateEvent,
    ConversationItemDeleteEvent,
    ConversationItemRetrieveEvent,
    ConversationItemTruncateEvent,
    InputAudioBufferAppendEvent,
    InputAudioBufferClearEvent,
    InputAudioBufferCommitEvent,
    OutputAudioBufferClearEvent,
    RateLimitsUpdatedEvent,
    RealtimeErrorEvent,
    RealtimeFunctionTool,
    RealtimeResponseCreateParams,
    RealtimeSessionCreateRequest,
    ResponseAudioDeltaEvent,
    ResponseCancelEvent,
    ResponseCreateEvent,
    ResponseDoneEvent,
    SessionCreatedEvent,
    SessionUpdatedEvent,
    SessionUpdateEvent,
)
from openai.types.realtime.rate_limits_updated_event import RateLimit
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openab_voice.clock import Clock
from openab_voice.errors import ConnectionDropped
from openab_voice.tasks import TaskOwner
from openab_voice.testing.realtime.conversation import Conversation
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.items import ItemDesk
from openab_voice.testing.realtime.listening import ServerListening
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.responder import Responder
from openab_voice.testing.realtime.response import ResponseRecord, ResponseRun
from openab_voice.testing.realtime.session_config import (
    ConfigRefusal,
    apply_update,
    default_session,
    function_tools,
)
from openab_voice.testing.realtime.speech import Listener, Voice
from openab_voice.testing.realtime.wire import (
    ClientEvent,
    ParseFailure,
    ServerEvent,
    dump_server_event,
    error_event,
    new_id,
    parse_client_event,
)
from openab_voice.testing.sdk_socket import SdkSession

__all__ = ["DEFAULT_RATE_LIMITS", "LoopbackSession", "SessionServices"]

DEFAULT_RATE_LIMITS = (
    RateLimit(name="requests", limit=5000, remaining=4999, reset_seconds=0.012),
    RateLimit(name="tokens", limit=40000, remaining=39000, reset_seconds=1.5),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionServices:
    """What every session of a server shares."""

    responder: Responder
    listener: Listener
    voice: Voice
    clock: Clock
    pacing: Pacing
    faults: Faults
    rate_limits: tuple[RateLimit, ...] | None = DEFAULT_RATE_LIMITS


class LoopbackSession(SdkSession[ServerEvent]):
    """A connected client's session. Created by the server; read by tests."""

    def __init__(self, connection: ServerConnection, *, model: str, services: SessionServices) -> None:
        super().__init__(
            connection,
            faults=services.faults,
            clock=services.clock,
            dump=dump_server_event,
        )
        self.id = new_id("sess")
        self.model = model
        self.config: RealtimeSessionCreateRequest = default_session(model)
        self.conversation = Conversation()
        self.client_events: list[ClientEvent] = []
        self.client_events_at: list[float] = []  # the server clock's time each one arrived
        self.rejected: list[ParseFailure] = []
        self.responses: list[ResponseRecord] = []
        self._services = services
        self._active: ResponseRun | None = None
        self._tasks = TaskOwner("loopback realtime session")
        self._has_spoken = False
        self.listening = ServerListening(
            config=lambda: self.config,
            send=self.send,
            listener=services.listener,
            commit=lambda item_id: self.items.commit(None, item_id=item_id),
            respond=lambda: self._start_response(None, None),
            interrupt=self._interrupt,
        )
        self.items = ItemDesk(
            self.conversation, send=self.send, refuse=self._refuse, on_commit=self.listening.committed
        )

    @property
    def input_audio(self) -> bytearray:
        """The input audio buffer (24 kHz mono PCM16 appended since the last commit or clear)."""
        return self.items.input_audio

    # --- introspection -------------------------------------------------------------------------

    @property
    def errors_sent(self) -> list[RealtimeErrorEvent]:
        """Every ``error`` event this session sent."""
        return [event for event in self.sent if isinstance(event, RealtimeErrorEvent)]

    @property
    def active_response(self) -> ResponseRun | None:
        return self._active

    # --- faults that happen now ----------------------------------------------------------------

    async def send_error(
        self,
        *,
        type: str = "server_error",
        code: str | None = None,
        message: str = "The server had an error.",
    ) -> None:
        """Send an ``error`` event now (e.g. ``type="server_error"``, or ``code="rate_limit_exceeded"``)."""
        await self.send(error_event(type=type, code=code, message=message))

    async def send_rate_limits(self, rate_limits: list[RateLimit] | None = None) -> None:
        """Send ``rate_limits.updated`` now (the server's defaults when None)."""
        limits = list(rate_limits or DEFAULT_RATE_LIMITS)
        await self.send(
            RateLimitsUpdatedEvent(type="rate_limits.updated", event_id=new_id("event"), rate_limits=limits)
        )

    # --- the connection ------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run the session until the client goes or the connection drops."""
        try:
            await self.send(
                SessionCreatedEvent(type="session.created", event_id=new_id("event"), session=self.config)
            )
            async for message in self._ws:
                await self._receive(message)
        except (ConnectionClosed, ConnectionDropped):
            pass
        finally:
            if self._active is not None:
                self._active.cancel()
            await self._tasks.aclose()
            await self.listening.tasks.aclose()
            self.closed.set()
            await self.notify()

    def _sending(self, event: ServerEvent) -> None:
        if isinstance(event, ResponseDoneEvent) and self._active is not None:
            # Over before the client can read it: a response.create right after is not refused.
            self._active = None
        elif isinstance(event, ResponseAudioDeltaEvent):
            self._has_spoken = True  # the voice is fixed from the first audio on

    async def _receive(self, message: str | bytes) -> None:
        parsed = parse_client_event(message)
        if isinstance(parsed, ParseFailure):
            self.rejected.append(parsed)
            await self._refuse(parsed.code, parsed.message, parsed.param, parsed.event_id)
            return
        self.client_events.append(parsed)
        self.client_events_at.append(self._services.clock.monotonic())
        await self.notify()
        await self._dispatch(parsed)

    async def _refuse(self, code: str, message: str, param: str | None, event_id: str | None) -> None:
        await self.send(error_event(code=code, message=message, param=param, client_event_id=event_id))

    async def _dispatch(self, event: ClientEvent) -> None:
        match event:
            case SessionUpdateEvent():
                await self._session_update(event.session, event.event_id)
            case InputAudioBufferAppendEvent():
                before = len(self.items.input_audio)
                await self.items.handle(event)
                await self.listening.appended(bytes(self.items.input_audio[before:]))
            case InputAudioBufferCommitEvent() | InputAudioBufferClearEvent():
                self.listening.reset()
                await self.items.handle(event)
            case (
                ConversationItemCreateEvent()
                | ConversationItemDeleteEvent()
                | ConversationItemRetrieveEvent()
                | ConversationItemTruncateEvent()
            ):
                await self.items.handle(event)
            case OutputAudioBufferClearEvent():
                await self._refuse(
                    "invalid_value",
                    "output_audio_buffer.clear is only supported for WebRTC.",
                    "type",
                    event.event_id,
                )
            case ResponseCreateEvent():
                await self._start_response(event.response, event.event_id)
            case ResponseCancelEvent():
                active = self._active
                if active is None or (event.response_id is not None and event.response_id != active.id):
                    return await self._refuse(
                        "response_cancel_not_active",
                        "Cancellation failed: no active response found.",
                        None,
                        event.event_id,
                    )
                active.cancel()

    async def _session_update(self, update: object, event_id: str | None) -> None:
        result = apply_update(self.config, update, has_spoken=self._has_spoken)
        if isinstance(result, ConfigRefusal):
            return await self._refuse(result.code, result.message, result.param, event_id)
        self.config = result
        await self.send(
            SessionUpdatedEvent(type="session.updated", event_id=new_id("event"), session=self.config)
        )

    # --- responses -----------------------------------------------------------------------------

    def _interrupt(self) -> None:
        if self._active is not None:
            self._active.cancel(reason="turn_detected")

    async def _start_response(
        self, params: RealtimeResponseCreateParams | None, event_id: str | None
    ) -> None:
        if self._active is not None:
            message = (
                f"Conversation already has an active response in progress: {self._active.id}. "
                "Wait until the response is finished before creating a new one."
            )
            return await self._refuse("conversation_already_has_active_response", message, None, event_id)
        services = self._services
        config = self.config
        if params is not None and params.output_modalities is not None:
            config = config.model_copy(update={"output_modalities": params.output_modalities})
        tools = function_tools(self.config)
        if params is not None and params.tools is not None:
            tools = tuple(tool for tool in params.tools if isinstance(tool, RealtimeFunctionTool))
        run = ResponseRun(
            send=self.send,
            conversation=self.conversation,
            config=config,
            instructions=(
                params.instructions
                if params and params.instructions is not None
                else self.config.instructions
            )
            or "",
            tools=tools,
            out_of_band=params is not None and params.conversation == "none",
            responder=services.responder,
            listener=services.listener,
            voice=services.voice,
            clock=services.clock,
            pacing=services.pacing,
            started_at=services.clock.monotonic(),
            failure=services.faults.take_failure(),
            rate_limits=list(services.rate_limits) if services.rate_limits is not None else None,
        )
        self._active = run
        self.responses.append(run.record)
        self._tasks.spawn(self._run(run), name=f"realtime-{run.id}")

    async def _run(self, run: ResponseRun) -> None:
        try:
            await run.run()
        except (ConnectionClosed, ConnectionDropped):
            return
        finally:
            if self._active is run:
                self._active = None
        await self.notify()
        faults = self._services.faults
        done = sum(1 for r in self.responses if r.status != "in_progress")
        if faults.close_after_responses is not None and done >= faults.close_after_responses:
            with contextlib.suppress(ConnectionClosed):
                if faults.close_code is None:
                    await self.drop()
                else:
                    await self.close(faults.close_code, "closed after planned responses")
