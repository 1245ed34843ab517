"""The loopback realtime server: OpenAI's Realtime API (GA) over websocket on 127.0.0.1.

Point an unmodified ``openai`` client at it::

    async with LoopbackRealtimeServer(api_key="sk-test", responder=ScriptedResponder(["Hello."])) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        async with client.realtime.connect(model="gpt-realtime-2.1") as connection:
            ...

The handshake at ``ws://<base_url host>/v1/realtime?model=<model>`` checks ``Authorization: Bearer
<key>`` as the real one does: a wrong or missing key is HTTP 401 with the API's JSON error body (the
SDK raises ``websockets.exceptions.InvalidStatus``, status 401); an unknown model is accepted, then
gets an ``error`` event (``model_not_found``) and a 1008 close. Each accepted connection is a
:class:`~.session.LoopbackSession`, kept in :attr:`sessions`.
"""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import Collection
from http import HTTPStatus
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

from openai.types.realtime import RealtimeSessionCreateRequest
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from openab_voice.clock import Clock, SystemClock
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.responder import Responder, ScriptedResponder, Turn
from openab_voice.testing.realtime.session import LoopbackSession, SessionServices
from openab_voice.testing.realtime.speech import Listener, PiperVoice, Voice, WhisperListener
from openab_voice.testing.realtime.wire import dump_server_event, error_event

__all__ = ["KNOWN_MODELS", "LoopbackRealtimeServer"]


def _sdk_models() -> frozenset[str]:
    """The realtime model names the installed SDK knows (``RealtimeSessionCreateRequest.model``)."""
    names: set[str] = set()
    for arg in typing.get_args(RealtimeSessionCreateRequest.model_fields["model"].annotation):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return frozenset(names)


KNOWN_MODELS = _sdk_models()

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Larger than the API's 15 MiB ``input_audio_buffer.append`` limit."""


def _echo(turn: Turn) -> str:
    heard = turn.last_user_text
    return f"You said: {heard}" if heard else "I did not hear anything."


class LoopbackRealtimeServer:
    """A Realtime API server on 127.0.0.1 answering through local STT, a responder and local TTS.

    Args:
        api_key: the key clients must send (``Authorization: Bearer ...``).
        models: accepted ``model`` names (default: every realtime model the installed SDK names).
        responder: decides each response (default: repeats what it heard, "You said: ...").
        listener: STT for committed user audio (default: local faster-whisper, loaded on first use).
        voice: TTS for spoken replies (default: local Piper, loaded on first use).
        clock: paces audio and latency (tests pass a ``FakeClock``).
        pacing: first-audio latency, chunk size, real-time factor.
        faults: planned faults (also reachable as :attr:`faults` while running).
        host: where to listen; port 0 picks a free port.
    """

    def __init__(
        self,
        *,
        api_key: str = "sk-loopback",
        models: Collection[str] = KNOWN_MODELS,
        responder: Responder | None = None,
        listener: Listener | None = None,
        voice: Voice | None = None,
        clock: Clock | None = None,
        pacing: Pacing | None = None,
        faults: Faults | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.models = frozenset(models)
        self.faults = faults or Faults()
        self.sessions: list[LoopbackSession] = []
        self.refused_handshakes: list[HTTPStatus] = []
        self._services = SessionServices(
            responder=responder or ScriptedResponder([_echo]),
            listener=listener or WhisperListener(),
            voice=voice or PiperVoice(),
            clock=clock or SystemClock(),
            pacing=pacing or Pacing(),
            faults=self.faults,
        )
        self._own_listener = listener is None
        self._own_voice = voice is None
        self._host = host
        self._port = port
        self._server: Server | None = None
        self._session_added = asyncio.Condition()
        self._handlers: set[asyncio.Task[object]] = set()

    # --- addresses -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the loopback realtime server is not running")
        sockets = list(self._server.sockets)
        return int(sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the ``base_url`` / ``OPENAI_BASE_URL`` for an ``openai`` client."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def websocket_url(self) -> str:
        """``ws://127.0.0.1:<port>/v1/realtime``, the endpoint the SDK derives from :attr:`base_url`."""
        return f"ws://{self._host}:{self.port}/v1/realtime"

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> LoopbackRealtimeServer:
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
            # A session can be waiting on an injected clock that nobody advances any more (planned
            # latency, paced audio): its handler is cancelled so that closing stays bounded.
            for task in list(self._handlers):
                task.cancel()
            await server.wait_closed()
        if self._own_listener:
            await self._services.listener.aclose()
        if self._own_voice:
            await self._services.voice.aclose()

    async def __aenter__(self) -> LoopbackRealtimeServer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def session(self, index: int = 0) -> LoopbackSession:
        """The ``index``-th session (0: the first), waiting until that many clients have connected."""
        async with self._session_added:
            await self._session_added.wait_for(lambda: len(self.sessions) > index)
        return self.sessions[index]

    # --- connections ---------------------------------------------------------------------------

    def _check_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if not path.rstrip("/").endswith("/realtime"):
            return self._refuse(connection, HTTPStatus.NOT_FOUND, "Invalid URL (GET " + path + ")", None)
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
        assert connection.request is not None
        query = parse_qs(urlsplit(connection.request.path).query)
        model = (query.get("model") or [""])[0]
        if model not in self.models:
            message = f"The model `{model}` does not exist or you do not have access to it."
            try:
                await connection.send(
                    dump_server_event(error_event(message=message, code="model_not_found", param="model"))
                )
                await connection.close(1008, "model_not_found")
            except ConnectionClosed:
                pass
            return
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(connection, model)
        finally:
            self._handlers.discard(task)

    async def _serve(self, connection: ServerConnection, model: str) -> None:
        session = LoopbackSession(connection, model=model, services=self._services)
        async with self._session_added:
            self.sessions.append(session)
            self._session_added.notify_all()
        await session.serve()
