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

from collections.abc import Collection
from http import HTTPStatus
from urllib.parse import SplitResult, parse_qs

from websockets.asyncio.server import ServerConnection

from openab_voice.clock import Clock, SystemClock
from openab_voice.testing.live.floor import Hearing
from openab_voice.testing.live.responder import LiveResponder, echo_responder
from openab_voice.testing.live.session import LoopbackLiveSession, SessionServices
from openab_voice.testing.live.session_config import KNOWN_MODELS
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.speech import Listener, PiperVoice, Voice, WhisperListener
from openab_voice.testing.sdk_socket import HandshakeRefusal, SdkSocketServer

__all__ = ["LIVE_PATH", "LoopbackLiveServer"]

LIVE_PATH = "/v1/live/sessions"


class LoopbackLiveServer(SdkSocketServer[LoopbackLiveSession]):
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
        services = SessionServices(
            responder=responder or echo_responder(),
            listener=listener or WhisperListener(),
            voice=voice or PiperVoice(),
            clock=clock or SystemClock(),
            pacing=pacing or Pacing(),
            faults=faults or Faults(),
            hearing=hearing or Hearing(),
            models=frozenset(models),
            session_s=session_s,
        )
        super().__init__(
            name="live",
            path=LIVE_PATH,
            api_key=api_key,
            faults=services.faults,
            host=host,
            port=port,
            owned=[
                *([services.listener] if listener is None else []),
                *([services.voice] if voice is None else []),
            ],
        )
        self._services = services

    @property
    def responder(self) -> LiveResponder:
        """What answers every session's turns."""
        return self._services.responder

    def _refuse_path(self, parts: SplitResult) -> HandshakeRefusal | None:
        if parts.path.rstrip("/") != LIVE_PATH:
            return HTTPStatus.NOT_FOUND, f"Invalid URL (GET {parts.path})", None
        if parts.query:
            name = next(iter(parse_qs(parts.query, keep_blank_values=True)), parts.query)
            message = f"Unknown parameter: '{name}'. Live takes no query parameters; send the model in session.start."
            return HTTPStatus.BAD_REQUEST, message, "unknown_parameter"
        return None

    async def _open(self, connection: ServerConnection) -> LoopbackLiveSession:
        return LoopbackLiveSession(connection, services=self._services)
