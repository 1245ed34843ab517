"""OpenAI Realtime over the ``openai`` package's own client (``client.realtime.connect``).

The wire half of the realtime engine (:mod:`openab_voice.engine.realtime`): open a session, send
client events (the SDK's ``RealtimeClientEventParam`` TypedDicts), receive server events already
parsed into the SDK's ``RealtimeServerEvent`` models, and translate every failure into our error
tree. The SDK's own reconnection is not used: a dropped session is replaced by a fresh one the
engine seeds from our heard-only history, never resumed.

Errors (``code``; ``ProviderRequestRejected`` is never retried, ``ProviderRequestFailed`` is):

* ``REALTIME_AUTH_FAILED`` (rejected): HTTP 401/403 on the upgrade, or an authentication error event;
* ``REALTIME_MODEL_UNKNOWN`` (rejected): HTTP 404, or an error event naming the model;
* ``REALTIME_REQUEST_REJECTED`` (rejected): any other ``invalid_request_error``;
* ``REALTIME_RATE_LIMITED`` (failed): HTTP 429 or a rate-limit error event;
* ``REALTIME_SERVER_ERROR`` (failed): HTTP 5xx or a ``server_error`` event;
* ``REALTIME_CONNECTION_LOST`` (failed): refused, reset or closed websocket.

Needs the ``openai`` extra (``openai`` with ``websockets``); a missing one is a structured
``PROVIDER_UNAVAILABLE`` naming it, raised when connecting, never at import.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from openab_voice.config import Settings
from openab_voice.errors import OpenabError, ProviderUnavailable
from openab_voice.providers.speech_registry import ProviderRequestFailed, ProviderRequestRejected
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL

if TYPE_CHECKING:
    import openai
    from openai.types.realtime import RealtimeClientEventParam, RealtimeServerEvent

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_VOICE",
    "PROVIDER_RATE",
    "OpenAIRealtime",
    "RealtimeConfig",
    "RealtimeConnector",
    "RealtimeLink",
    "connection_error",
    "greeted",
    "probe",
    "realtime_config",
    "server_error",
]

DEFAULT_MODEL = DEFAULT_REALTIME_MODEL
DEFAULT_VOICE = "marin"
PROVIDER_RATE = 24_000
"""``audio/pcm`` in and out: 24 kHz mono s16le, the only rate the API takes."""


class RealtimeLink(Protocol):
    """One open provider session."""

    async def send(self, event: RealtimeClientEventParam) -> None:
        """Send one client event; raises ``REALTIME_CONNECTION_LOST`` once the socket is gone."""
        ...

    def events(self) -> AsyncIterator[RealtimeServerEvent]:
        """Server events in order; ends (or raises ``REALTIME_CONNECTION_LOST``) when the socket closes."""
        ...

    async def close(self) -> None:
        """Close the socket; idempotent."""
        ...


class RealtimeConnector(Protocol):
    """Opens provider sessions (one per voice channel at a time)."""

    @property
    def model(self) -> str: ...

    async def connect(self) -> RealtimeLink:
        """A fresh session, or the structured error why not (auth, model, connection)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeConfig:
    """Where and how to connect.

    Attributes:
        model: the realtime model (``OPENAI_REALTIME_MODEL``).
        voice: the output voice (``OPENAI_REALTIME_VOICE``).
        base_url: an OpenAI-compatible server (``OPENAI_BASE_URL``; the loopback server's
            ``base_url`` in tests and the demo); None: api.openai.com.
        api_key: the key (``OPENAI_API_KEY`` or ``_FILE``); never logged.

    The websocket upgrade is bounded by the ``websockets`` default (10 s).
    """

    model: str = DEFAULT_MODEL
    voice: str = DEFAULT_VOICE
    base_url: str | None = None
    api_key: str | None = None


def realtime_config(settings: Settings) -> RealtimeConfig:
    """Where ``OPENAB_ENGINE=realtime`` connects (``OPENAI_*``); the key never leaves this object."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return RealtimeConfig(
        model=settings.openai_realtime_model,
        voice=settings.openai_realtime_voice,
        base_url=settings.openai_base_url,
        api_key=key,
    )


def _websocket_errors() -> tuple[type[BaseException], ...]:
    try:
        ws = importlib.import_module("websockets.exceptions")
    except ImportError:
        return ()
    return (ws.WebSocketException,)


def connection_error(exc: BaseException, *, model: str) -> OpenabError:
    """Our error for a failure to open or keep the websocket (``exc`` from websockets or the OS)."""
    if isinstance(exc, OpenabError):
        return exc
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    failure = type(exc).__name__
    if isinstance(status, int):
        if status in (401, 403):
            return ProviderRequestRejected(
                f"the realtime server refused the key (HTTP {status})",
                code="REALTIME_AUTH_FAILED",
                provider="openai-realtime",
                status=status,
            )
        if status == 404:
            return ProviderRequestRejected(
                f"the realtime server does not know model {model!r} (HTTP 404)",
                code="REALTIME_MODEL_UNKNOWN",
                provider="openai-realtime",
                status=status,
                model=model,
            )
        if status == 429:
            return ProviderRequestFailed(
                "the realtime server is rate limiting (HTTP 429)",
                code="REALTIME_RATE_LIMITED",
                provider="openai-realtime",
                status=status,
            )
        if status >= 500:
            return ProviderRequestFailed(
                f"the realtime server failed (HTTP {status})",
                code="REALTIME_SERVER_ERROR",
                provider="openai-realtime",
                status=status,
            )
        return ProviderRequestRejected(
            f"the realtime server refused the connection (HTTP {status})",
            code="REALTIME_REQUEST_REJECTED",
            provider="openai-realtime",
            status=status,
        )
    return ProviderRequestFailed(
        f"realtime connection lost: {failure}",
        code="REALTIME_CONNECTION_LOST",
        provider="openai-realtime",
        failure=failure,
    )


def server_error(*, kind: str, code: str | None, message: str, model: str) -> OpenabError:
    """Our error for a server ``error`` event (``error.type``, ``error.code``, ``error.message``)."""
    text = f"{kind}/{code or '-'}: {message}"[:300]
    key = f"{kind} {code or ''}".lower()
    if "auth" in key or "api_key" in key or "permission" in key:
        return ProviderRequestRejected(text, code="REALTIME_AUTH_FAILED", provider="openai-realtime")
    if "model" in key and ("not_found" in key or "unknown" in key or "does_not_exist" in key):
        return ProviderRequestRejected(
            text, code="REALTIME_MODEL_UNKNOWN", provider="openai-realtime", model=model
        )
    if "rate_limit" in key or "quota" in key:
        return ProviderRequestFailed(text, code="REALTIME_RATE_LIMITED", provider="openai-realtime")
    if kind == "invalid_request_error":
        return ProviderRequestRejected(text, code="REALTIME_REQUEST_REJECTED", provider="openai-realtime")
    return ProviderRequestFailed(text, code="REALTIME_SERVER_ERROR", provider="openai-realtime")


class _SdkLink:
    """A live ``AsyncRealtimeConnection`` behind :class:`RealtimeLink`."""

    def __init__(self, connection: Any, *, model: str) -> None:
        self._connection = connection
        self._model = model
        self._closed = False
        self._errors = _websocket_errors() + (OSError,)

    async def send(self, event: RealtimeClientEventParam) -> None:
        if self._closed:
            raise connection_error(ConnectionError("the session was closed"), model=self._model)
        try:
            await self._connection.send(event)
        except self._errors as exc:
            raise connection_error(exc, model=self._model) from exc

    async def events(self) -> AsyncIterator[RealtimeServerEvent]:
        while True:
            try:
                data = await self._connection.recv_bytes()
            except self._errors as exc:
                raise connection_error(exc, model=self._model) from exc
            yield self._connection.parse_event(data)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # closing a broken socket has nothing left to report
            await self._connection.close()


class OpenAIRealtime:
    """Connects to OpenAI Realtime (or a server speaking it, such as the loopback server).

    Args:
        config: model, voice, server and key.
        client: an ``openai.AsyncOpenAI`` to use (tests); None builds one from ``config``.
    """

    def __init__(self, config: RealtimeConfig, *, client: openai.AsyncOpenAI | None = None) -> None:
        self.config = config
        self._client = client

    @property
    def model(self) -> str:
        return self.config.model

    def _ensure_client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            try:
                openai_module = importlib.import_module("openai")
                importlib.import_module("websockets")
            except ImportError as exc:
                raise ProviderUnavailable(
                    f"the realtime engine needs the openai extra ({exc.name} is missing)",
                    provider="openai-realtime",
                    extra="openai",
                    install="pip install 'openab-voice[openai]'",
                ) from None
            # The SDK insists on a key even for a local server; a loopback server ignores it.
            self._client = openai_module.AsyncOpenAI(
                api_key=self.config.api_key or "unset", base_url=self.config.base_url, max_retries=0
            )
        return self._client

    async def connect(self) -> RealtimeLink:
        client = self._ensure_client()
        manager = client.realtime.connect(model=self.config.model)
        try:
            connection = await manager.enter()
        except Exception as exc:
            raise connection_error(exc, model=self.config.model) from exc
        return _SdkLink(connection, model=self.config.model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


async def greeted(link: RealtimeLink, *, model: str) -> None:
    """Wait for ``session.created``: a server that refuses the session (an unknown model) says so in
    an ``error`` event before it closes.

    Raises:
        OpenabError: the refusal (``REALTIME_MODEL_UNKNOWN`` ...), or the connection's loss.
    """
    events = link.events()
    try:
        async for event in events:
            if event.type == "session.created":
                return
            if event.type == "error":
                err = event.error
                raise server_error(kind=err.type, code=err.code, message=err.message, model=model)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    raise connection_error(ConnectionError("closed before session.created"), model=model)


async def probe(connector: RealtimeConnector) -> None:
    """Open a session, wait for ``session.created`` and close it: what ``check-config`` and the bot's
    start-up do, so a refused key or an unknown model is reported before any call.

    Raises:
        OpenabError: ``REALTIME_AUTH_FAILED``, ``REALTIME_MODEL_UNKNOWN``, ``REALTIME_CONNECTION_LOST`` ...
    """
    link = await connector.connect()
    try:
        await greeted(link, model=connector.model)
    finally:
        await link.close()
