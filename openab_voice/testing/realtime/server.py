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

import typing
from collections.abc import Collection
from http import HTTPStatus
from urllib.parse import SplitResult, parse_qs, urlsplit

from openai.types.realtime import RealtimeSessionCreateRequest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from openab_voice.clock import Clock, SystemClock
from openab_voice.testing.realtime.faults import Faults
from openab_voice.testing.realtime.pacing import Pacing
from openab_voice.testing.realtime.responder import Responder, ScriptedResponder, echo_reply
from openab_voice.testing.realtime.session import LoopbackSession, SessionServices
from openab_voice.testing.realtime.speech import Listener, PiperVoice, Voice, WhisperListener
from openab_voice.testing.realtime.wire import dump_server_event, error_event
from openab_voice.testing.sdk_socket import HandshakeRefusal, SdkSocketServer

__all__ = ["KNOWN_MODELS", "LoopbackRealtimeServer"]


def _sdk_models() -> frozenset[str]:
    """The realtime model names the installed SDK knows (``RealtimeSessionCreateRequest.model``)."""
    names: set[str] = set()
    for arg in typing.get_args(RealtimeSessionCreateRequest.model_fields["model"].annotation):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return frozenset(names)


KNOWN_MODELS = _sdk_models()


class LoopbackRealtimeServer(SdkSocketServer[LoopbackSession]):
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
        services = SessionServices(
            responder=responder or ScriptedResponder([echo_reply]),
            listener=listener or WhisperListener(),
            voice=voice or PiperVoice(),
            clock=clock or SystemClock(),
            pacing=pacing or Pacing(),
            faults=faults or Faults(),
        )
        super().__init__(
            name="realtime",
            path="/v1/realtime",
            api_key=api_key,
            faults=services.faults,
            host=host,
            port=port,
            owned=[
                *([services.listener] if listener is None else []),
                *([services.voice] if voice is None else []),
            ],
        )
        self.models = frozenset(models)
        self._services = services

    def _refuse_path(self, parts: SplitResult) -> HandshakeRefusal | None:
        if not parts.path.rstrip("/").endswith("/realtime"):
            return HTTPStatus.NOT_FOUND, "Invalid URL (GET " + parts.path + ")", None
        return None

    async def _open(self, connection: ServerConnection) -> LoopbackSession | None:
        assert connection.request is not None
        query = parse_qs(urlsplit(connection.request.path).query)
        model = (query.get("model") or [""])[0]
        if model in self.models:
            return LoopbackSession(connection, model=model, services=self._services)
        message = f"The model `{model}` does not exist or you do not have access to it."
        try:
            await connection.send(
                dump_server_event(error_event(message=message, code="model_not_found", param="model"))
            )
            await connection.close(1008, "model_not_found")
        except ConnectionClosed:
            pass
        return None
