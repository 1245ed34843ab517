"""The loopback Live server: OpenAI's GPT-Live API over websocket on 127.0.0.1.

Point an unmodified ``openai`` client at it::

    async with LoopbackLiveServer(api_key="sk-test", responder=ScriptedLiveResponder(["Hello."])) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        async with client.live.connect() as connection:
            await connection.session.start(session={"model": "gpt-live-1"})
            ...

The upgrade is accepted only at ``/v1/live/sessions`` (404 elsewhere; 400 with a query string: the
SDK sends none and the model belongs in ``session.start``), with ``Authorization: Bearer <key>``
checked as the real API does: a wrong or missing key is HTTP 401 with the API's JSON error body
(the SDK raises ``websockets.exceptions.InvalidStatus``). Each accepted connection is a
:class:`~.session.LoopbackLiveSession`, kept in :attr:`LoopbackLiveServer.sessions`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from http import HTTPStatus
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from openab_voice.clock import Clock, SystemClock
from openab_voice.testing.live.floor import Hearing
from openab_voice.testing.live.responder import LiveResponder, echo_responder
from openab_voice.testing.live.session import LoopbackLiveSession, SessionServices
from openab_voice.testing.live.session_config import KNOWN_MODELS
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.speech import Listener, PiperVoice, Voice, WhisperListener

__all__ = ["LIVE_PATH", "LoopbackLiveServer"]

LIVE_PATH = "/v1/live/sessions"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class LoopbackLiveServer:
    """A GPT-Live server on 127.0.0.1 answering through local STT, a responder and local TTS.

    Args:
        api_key: the key clients must send (``Authorization: Bearer ...``).
        models: accepted ``session.model`` names (default: every Live model the installed SDK names).
        responder: decides each reply (default: repeats what it heard, "You said: ...").
        listener: STT for each user speech (default: local faster-whisper, loaded on first use).
        voice: TTS for spoken replies (default: local Piper, loaded on first use).
        clock: the timeline, pacing, mute silence, fixtures and expiry (tests pass a ``FakeClock``).
        pacing: first-audio latency, chunk size, real-time factor.
        faults: planned faults (also reachable as :attr:`faults` while running).
        hearing: the server's turn detection (energy VAD threshold, prefix, silence).
        session_s: how long a session lives before ``session.closed{reason: "expired"}``.
        host: where to listen; port 0 picks a free port.
    """

    def __init__(
        self,
        *,
        api_key: str = "sk-loopback",
        models: Collection[str] = KNOWN_MODELS,
        responder: LiveResponder | None = None,
        listener: Listener | None = None,
        voice: Voice | None = None,
        clock: Clock | None = None,
        pacing: Pacing | None = None,
        faults: Faults | None = None,
        hearing: Hearing | None = None,
        session_s: float = 3600.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.faults = faults or Faults()
        self.sessions: list[LoopbackLiveSession] = []
        self.refused_handshakes: list[HTTPStatus] = []
        self._services = SessionServices(
            responder=responder or echo_responder(),
            listener=listener or WhisperListener(),
            voice=voice or PiperVoice(),
            clock=clock or SystemClock(),
            pacing=pacing or Pacing(),
            faults=self.faults,
            hearing=hearing or Hearing(),
            models=frozenset(models),
            session_s=session_s,
        )
        self._own_listener = listener is None
        self._own_voice = voice is None
        self._host = host
        self._port = port
        self._server: Server | None = None
        self._session_added = asyncio.Condition()
        self._handlers: set[asyncio.Task[object]] = set()

    @property
    def responder(self) -> LiveResponder:
        """What answers every session's turns."""
        return self._services.responder

    # --- addresses -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the loopback live server is not running")
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the ``base_url`` / ``OPENAI_BASE_URL`` for an ``openai`` client."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def websocket_url(self) -> str:
        """``ws://127.0.0.1:<port>/v1/live/sessions``, the endpoint the SDK derives from :attr:`base_url`."""
        return f"ws://{self._host}:{self.port}{LIVE_PATH}"

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> LoopbackLiveServer:
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
        if self._own_listener:
            await self._services.listener.aclose()
        if self._own_voice:
            await self._services.voice.aclose()

    async def __aenter__(self) -> LoopbackLiveServer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def session(self, index: int = 0) -> LoopbackLiveSession:
        """The ``index``-th session (0: the first), waiting until that many clients have connected."""
        async with self._session_added:
            await self._session_added.wait_for(lambda: len(self.sessions) > index)
        return self.sessions[index]

    # --- connections ---------------------------------------------------------------------------

    def _check_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        if parts.path.rstrip("/") != LIVE_PATH:
            return self._refuse(connection, HTTPStatus.NOT_FOUND, f"Invalid URL (GET {parts.path})", None)
        if parts.query:
            name = next(iter(parse_qs(parts.query, keep_blank_values=True)), parts.query)
            message = f"Unknown parameter: '{name}'. Live takes no query parameters; send the model in session.start."
            return self._refuse(connection, HTTPStatus.BAD_REQUEST, message, "unknown_parameter")
        authorization = request.headers.get("Authorization", "")
        key = authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else ""
        if self.faults.reject_auth or key != self.api_key:
            if not key:
                message = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                return self._refuse(connection, HTTPStatus.UNAUTHORIZED, message, None)
            shown = f"{key[:3]}{'*' * 6}{key[-4:]}" if len(key) > 8 else "*" * len(key)
            message = f"Incorrect API key provided: {shown}. You can find your API key at https://platform.openai.com/account/api-keys."
            return self._refuse(connection, HTTPStatus.UNAUTHORIZED, message, "invalid_api_key")
        return None

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
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            session = LoopbackLiveSession(connection, services=self._services)
            async with self._session_added:
                self.sessions.append(session)
                self._session_added.notify_all()
            await session.serve()
        finally:
            self._handlers.discard(task)
