"""What the loopback OpenAI websocket servers share: the handshake, the serving loop, fault-aware sending.

Both :mod:`openab_voice.testing.realtime` and :mod:`openab_voice.testing.live` serve an unmodified
``openai`` client over a websocket on 127.0.0.1. They differ in their endpoint and their sessions;
the rest is here, once:

* :class:`SdkSocketServer` listens, checks ``Authorization: Bearer <key>`` as the real API does (a
  wrong or missing key is HTTP 401 with the API's JSON error body, which the SDK raises as
  ``websockets.exceptions.InvalidStatus``), keeps each accepted session and closes within a bounded
  time;
* :class:`SdkSession`, the base of a session, is its connection's sending side: planned latency and drops
  (:class:`~openab_voice.testing.realtime.faults.Faults`), every event sent kept with its time, and
  :meth:`SdkSession.wait_for` on a condition instead of sleeping.
"""

from __future__ import annotations

import abc
import asyncio
import json
from collections.abc import Callable, Sequence
from http import HTTPStatus
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar
from urllib.parse import SplitResult, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from openab_voice.clock import Clock
from openab_voice.errors import ConnectionDropped
from openab_voice.testing.realtime.faults import Faults

__all__ = [
    "MAX_MESSAGE_BYTES",
    "HandshakeRefusal",
    "SdkSession",
    "SdkSocketServer",
    "ServedSession",
    "bearer_refusal",
]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Larger than the API's 15 MiB ``input_audio_buffer.append`` limit."""

HandshakeRefusal = tuple[HTTPStatus, str, str | None]
"""An upgrade refused: the HTTP status, the error message and the error ``code``."""


class ServedSession(Protocol):
    async def serve(self) -> None: ...


class _Closeable(Protocol):
    async def aclose(self) -> None: ...


class _Event(Protocol):
    @property
    def type(self) -> str: ...


SessionT = TypeVar("SessionT", bound=ServedSession)
EventT = TypeVar("EventT", bound=_Event)


def bearer_refusal(authorization: str, api_key: str, *, reject: bool) -> HandshakeRefusal | None:
    """Why an ``Authorization`` header is refused, in the API's words (None: accepted)."""
    key = authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else ""
    if not reject and key == api_key:
        return None
    if not key:
        message = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        return HTTPStatus.UNAUTHORIZED, message, None
    shown = f"{key[:3]}{'*' * 6}{key[-4:]}" if len(key) > 8 else "*" * len(key)
    message = f"Incorrect API key provided: {shown}. You can find your API key at https://platform.openai.com/account/api-keys."
    return HTTPStatus.UNAUTHORIZED, message, "invalid_api_key"


class SdkSocketServer(abc.ABC, Generic[SessionT]):
    """A websocket server on ``host`` whose sessions an ``openai`` client opens.

    A subclass says which paths it serves (:meth:`_refuse_path`) and opens each session
    (:meth:`_open`); the ``owned`` resources (models it loaded itself) are closed with it.
    """

    def __init__(
        self,
        *,
        name: str,
        path: str,
        api_key: str,
        faults: Faults,
        host: str,
        port: int,
        owned: Sequence[_Closeable] = (),
    ) -> None:
        self.api_key = api_key
        self.faults = faults
        self.sessions: list[SessionT] = []
        self.refused_handshakes: list[HTTPStatus] = []
        self._name = name
        self._path = path
        self._owned = tuple(owned)
        self._host = host
        self._port = port
        self._server: Server | None = None
        self._session_added = asyncio.Condition()
        self._handlers: set[asyncio.Task[object]] = set()

    # --- addresses -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"the loopback {self._name} server is not running")
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the ``base_url`` / ``OPENAI_BASE_URL`` for an ``openai`` client."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def websocket_url(self) -> str:
        """``ws://127.0.0.1:<port><path>``, the endpoint the SDK derives from :attr:`base_url`."""
        return f"ws://{self._host}:{self.port}{self._path}"

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> Self:
        if self._server is None:
            self._server = await serve(
                self._handle,
                self._host,
                self._port,
                process_request=self._check_handshake,
                max_size=MAX_MESSAGE_BYTES,
                compression=None,
                ping_interval=None,
            )
        return self

    async def aclose(self) -> None:
        """Close every connection (1001) and stop listening; close the models it loaded. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            # A session can wait on an injected clock nobody advances any more (pacing, latency,
            # expiry): its handler is cancelled so that closing stays bounded.
            for task in list(self._handlers):
                task.cancel()
            await server.wait_closed()
        for resource in self._owned:
            await resource.aclose()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def session(self, index: int = 0) -> SessionT:
        """The ``index``-th session (0: the first), waiting until that many clients have connected."""
        async with self._session_added:
            await self._session_added.wait_for(lambda: len(self.sessions) > index)
        return self.sessions[index]

    # --- connections ---------------------------------------------------------------------------

    @abc.abstractmethod
    def _refuse_path(self, parts: SplitResult) -> HandshakeRefusal | None:
        """Why the upgrade's path or query is refused (None: it is served here)."""

    @abc.abstractmethod
    async def _open(self, connection: ServerConnection) -> SessionT | None:
        """The session for an accepted connection, or None once the connection is answered and closed."""

    def _check_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        refusal = self._refuse_path(urlsplit(request.path)) or bearer_refusal(
            request.headers.get("Authorization", ""), self.api_key, reject=self.faults.reject_auth
        )
        return None if refusal is None else self._refuse(connection, *refusal)

    def _refuse(
        self, connection: ServerConnection, status: HTTPStatus, message: str, code: str | None
    ) -> Response:
        self.refused_handshakes.append(status)
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
        response = connection.respond(status, json.dumps(body) + "\n")
        response.headers = Headers(
            [("Content-Type", "application/json"), ("Content-Length", str(len(response.body)))]
        )
        return response

    async def _handle(self, connection: ServerConnection) -> None:
        session = await self._open(connection)
        if session is None:
            return
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            async with self._session_added:
                self.sessions.append(session)
                self._session_added.notify_all()
            await session.serve()
        finally:
            self._handlers.discard(task)


class SdkSession(Generic[EventT]):
    """A session's connection: fault-aware sending, what was sent (and when), waiting on changes.

    The base of both loopbacks' sessions, which add what their API answers.

    Args:
        connection: the accepted websocket.
        faults: planned latency before each event and planned drops.
        clock: the server's clock (latency, the times in :attr:`sent_at`).
        dump: an event's JSON text.
    """

    def __init__(
        self,
        connection: ServerConnection,
        *,
        faults: Faults,
        clock: Clock,
        dump: Callable[[EventT], str],
    ) -> None:
        self._ws = connection
        self.sent: list[EventT] = []
        self.sent_at: list[float] = []  # the server clock's time each event in ``sent`` went out
        self.closed = asyncio.Event()
        self._faults = faults
        self._clock = clock
        self._dump = dump
        self._send_lock = asyncio.Lock()
        self._changed = asyncio.Condition()
        self._dropped = False

    async def send(self, event: EventT, *, audio_ms_after: float = 0.0) -> None:
        """Send one server event (after the planned latency, unless a planned drop replaces it).

        Raises:
            ConnectionDropped: the connection is gone (dropped now or before).
            websockets.exceptions.ConnectionClosed: the client closed it.
        """
        faults = self._faults
        if faults.event_latency_s > 0:
            await self._clock.sleep(faults.event_latency_s)
        async with self._send_lock:
            if self._dropped:
                raise ConnectionDropped(event.type)
            if faults.should_drop(event.type, audio_ms_after=audio_ms_after):
                await self.drop()
                raise ConnectionDropped(event.type)
            self._sending(event)
            await self._ws.send(self._dump(event))
            self.sent.append(event)
            self.sent_at.append(self._clock.monotonic())
        await self.notify()

    def _sending(self, event: EventT) -> None:
        """Runs under the send lock just before ``event`` goes out: session state that must change
        before the client can read the event changes here."""

    async def drop(self) -> None:
        """Close the TCP connection without a close frame (the client sees 1006, as on a network failure)."""
        self._dropped = True
        self._ws.transport.abort()
        await self.notify()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the websocket cleanly with ``code``."""
        await self._ws.close(code, reason)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds (checked after every event in or out, and on close)."""
        async with self._changed:
            await self._changed.wait_for(lambda: predicate() or self.closed.is_set())

    async def notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
