"""One websocket connection to the loopback Live server: a GPT-Live session.

The first event must be ``session.start`` (anything else is refused with ``session_not_started``
and the session stays unstarted); an admission refusal (unknown model, unsupported audio format,
limits) is an ``error`` event then a 1008 close. Once started, each command is answered as the SDK
describes (:mod:`~.commands`); what the server does by itself with the audio is the
:class:`~.floor.Floor`'s (turn detection) and the :class:`~.dialogue.Dialogue`'s (turns, replies,
barge-in); delegations are :class:`~.delegation.Delegations`'. The timeline is ms since
``session.started`` on the injected clock. The session expires ``session_s`` after it started
(``session.closed{reason: "expired"}``, then a 1000 close).

Everything is kept for tests: the parsed client events (SDK models), the refused messages, the
server events sent (and when), the appended context, the turns, what was spoken, the delegations
and backend responses. Waiting is by :meth:`LoopbackLiveSession.wait_for` on a condition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal

from openai.types.live import (
    ErrorEvent,
    SessionClosedEvent,
    SessionResource,
    SessionStartedEvent,
    SessionStartEvent,
    SessionUsage,
    SessionUsageUpdatedEvent,
)
from openai.types.live.session_usage_updated_event import ContextWindow
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openab_voice.clock import Clock
from openab_voice.errors import ConnectionDropped
from openab_voice.tasks import TaskOwner
from openab_voice.testing.live.backend import Backend
from openab_voice.testing.live.commands import Commands
from openab_voice.testing.live.decisions import DecisionDesk
from openab_voice.testing.live.delegation import Delegations
from openab_voice.testing.live.dialogue import Dialogue
from openab_voice.testing.live.floor import Floor, Hearing
from openab_voice.testing.live.responder import Appended, Conversation, LiveResponder
from openab_voice.testing.live.session_config import resolve_session, session_rate
from openab_voice.testing.live.speaking import Speaker, Spoken
from openab_voice.testing.live.wire import (
    ClientEvent,
    ParseFailure,
    Refusal,
    ServerEvent,
    dump_server_event,
    echo,
    error_event,
    new_id,
    parse_client_event,
)
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.speech import Listener, Voice
from openab_voice.testing.sdk_socket import SdkSession

__all__ = ["LoopbackLiveSession", "SessionServices"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionServices:
    """What every session of a server shares."""

    responder: LiveResponder
    listener: Listener
    voice: Voice
    clock: Clock
    pacing: Pacing
    faults: Faults
    hearing: Hearing
    models: frozenset[str]
    session_s: float


class LoopbackLiveSession(SdkSession[ServerEvent]):
    """A connected client's Live session. Created by the server; read by tests."""

    def __init__(self, connection: ServerConnection, *, services: SessionServices) -> None:
        super().__init__(connection, faults=services.faults, clock=services.clock, dump=dump_server_event)
        self.id = new_id("sess")
        self.resource: SessionResource | None = None
        self.client_events: list[ClientEvent] = []
        self.client_events_at: list[float] = []  # the server clock's time each one arrived
        self.rejected: list[ParseFailure] = []
        self.appended: list[Appended] = []
        self.close_reason: Literal["close_requested", "expired"] | None = None
        self._services = services
        self.clock = services.clock
        self._tasks = TaskOwner("loopback live session")
        self._started_at: float | None = None
        self._spoken_to_end = 0
        self.barge_ins = 0  # speech over the voice while it spoke
        self._assemble(services)
        self._commands = Commands(self)

    def _assemble(self, services: SessionServices) -> None:
        """The session's parts: what it knows, hears, says, and to whom it delegates."""
        self.conversation = Conversation()
        self.speaker = Speaker(
            send=self.send,
            voice=services.voice,
            clock=services.clock,
            pacing=services.pacing,
            timeline=self.timeline_ms,
            rate=lambda: session_rate(self.resource),
        )
        self.dialogue = Dialogue(
            listener=services.listener,
            responder=services.responder,
            faults=services.faults,
            clock=services.clock,
            send=self.send,
            speaker=self.speaker,
            conversation=self.conversation,
            resource=self._resource,
            timeline=self.timeline_ms,
            delegate=lambda reply, offset_ms: self.delegations.delegate(reply, offset_ms),
            finished=self._finished,
            changed=self.notify,
            tasks=self._tasks,
        )
        self.backend = Backend(
            send=self.send,
            conversation=self.conversation,
            responder=services.responder,
            resource=self._resource,
            say=lambda text: self.dialogue.say(text, "backend"),
            clock=services.clock,
        )
        self.decisions = DecisionDesk()
        self.delegations = Delegations(
            send=self.send,
            resource=self._resource,
            backend=self.backend,
            decisions=self.decisions,
            say=self.dialogue.say,
            clock=services.clock,
            tasks=self._tasks,
        )
        self.floor = Floor(
            clock=services.clock,
            hearing=services.hearing,
            timeline=self.timeline_ms,
            started=self._speech_started,
            ended=self.dialogue.heard,
            tasks=self._tasks,
        )

    # --- introspection -------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self.resource is not None

    @property
    def spoken(self) -> list[Spoken]:
        """Every reply the voice spoke or began to, in order."""
        return self.dialogue.spoken

    @property
    def errors_sent(self) -> list[ErrorEvent]:
        return [event for event in self.sent if isinstance(event, ErrorEvent)]

    def sent_of(self, kind: str) -> list[ServerEvent]:
        """The server events of type ``kind`` sent so far."""
        return [event for event in self.sent if event.type == kind]

    def timeline_ms(self) -> float:
        """The session timeline now: ms since ``session.started`` on the injected clock (0 before)."""
        if self._started_at is None:
            return 0.0
        return (self.clock.monotonic() - self._started_at) * 1000.0

    def _resource(self) -> SessionResource:
        assert self.resource is not None, "commands run only in a started session"
        return self.resource

    # --- what a test can make happen now -------------------------------------------------------

    async def send_error(
        self,
        *,
        type: str = "server_error",
        code: str = "server_error",
        message: str = "The server had an error.",
    ) -> None:
        """Send an ``error`` event that answers no command."""
        await self.send(error_event(type=type, code=code, message=message))

    async def send_usage(self, *, usage_ratio: float | None = None) -> None:
        """Send ``session.usage.updated`` (with a context window when ``usage_ratio`` is given)."""
        event = SessionUsageUpdatedEvent(
            type="session.usage.updated", event_id=new_id("event"), usage=self.usage()
        )
        if usage_ratio is not None:  # set only when known: omitted otherwise
            event.context_window = ContextWindow(usage_ratio=usage_ratio)
        await self.send(event)

    def usage(self) -> SessionUsage:
        return SessionUsage(seconds=float(int(self.timeline_ms() / 1000)))

    # --- the connection ------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run the session until the client goes or the connection drops."""
        try:
            async for message in self._ws:
                await self._receive(message)
        except (ConnectionClosed, ConnectionDropped):
            pass
        finally:
            self.dialogue.stop_all("closed")
            await self._tasks.aclose()
            self.closed.set()
            await self.notify()

    async def refuse(self, refusal: Refusal | ParseFailure, client_event_id: str | None) -> None:
        """Answer a command with an ``error`` event."""
        await self.send(
            error_event(
                code=refusal.code,
                message=refusal.message,
                param=refusal.param,
                client_event_id=client_event_id,
            )
        )

    def spawn(self, work: Awaitable[None], name: str) -> None:
        """Run ``work`` in the session's tasks; a connection gone meanwhile ends it quietly."""

        async def guarded() -> None:
            with contextlib.suppress(ConnectionClosed, ConnectionDropped):
                await work

        self._tasks.spawn(guarded(), name=name)

    async def _receive(self, message: str | bytes) -> None:
        parsed = parse_client_event(message)
        if isinstance(parsed, ParseFailure):
            self.rejected.append(parsed)
            await self.refuse(parsed, parsed.event_id)
            return
        self.client_events.append(parsed)
        self.client_events_at.append(self.clock.monotonic())
        await self.notify()
        if self.resource is not None:
            await self._commands.handle(parsed)
        elif isinstance(parsed, SessionStartEvent):
            await self._start(parsed)
        else:
            message = "Send session.start and wait for session.started before other commands."
            await self.refuse(
                Refusal(code="session_not_started", message=message, param="type"), parsed.event_id
            )

    # --- start, expiry, close ------------------------------------------------------------------

    async def _start(self, event: SessionStartEvent) -> None:
        services = self._services
        resolved = resolve_session(
            event.session,
            session_id=self.id,
            expires_at=int(self.clock.wall() + services.session_s),
            models=services.models,
        )
        if isinstance(resolved, Refusal):
            await self.refuse(resolved, event.event_id)
            await self.close(1008, resolved.code)
            return
        self.resource = resolved
        self._started_at = self.clock.monotonic()
        self.conversation.seed(resolved.input or ())
        await self.send(
            SessionStartedEvent(
                type="session.started", event_id=new_id("event"), session=resolved, **echo(event.event_id)
            )
        )
        deadline = self._started_at + services.session_s
        self.spawn(self._expire(deadline), "live-session-expiry")

    async def _expire(self, deadline: float) -> None:
        await self.clock.sleep(deadline - self.clock.monotonic())
        await self.end("expired", None)

    async def end(self, reason: Literal["close_requested", "expired"], client_event_id: str | None) -> None:
        """The terminal ``session.closed``, then a clean close."""
        self.close_reason = reason
        self.dialogue.stop_all("closed")
        await self.send(
            SessionClosedEvent(
                type="session.closed",
                event_id=new_id("event"),
                reason=reason,
                session=self._resource(),
                usage=self.usage(),
                **echo(client_event_id),
            )
        )
        await self.close(1000, reason)

    # --- what the server does by itself --------------------------------------------------------

    def _speech_started(self) -> None:
        if self.dialogue.active:  # the user talks over the model: server barge-in
            self.barge_ins += self.dialogue.speaking
            self.dialogue.stop_all("barge_in")

    async def _finished(self, spoken: Spoken) -> None:
        self._spoken_to_end += 1
        faults = self._services.faults
        if faults.close_after_responses is not None and self._spoken_to_end >= faults.close_after_responses:
            if faults.close_code is None:
                await self.drop()
            else:
                await self.close(faults.close_code, "closed after planned responses")
