"""OpenAI Realtime over the ``openai`` package's own client (``client.realtime.connect``).

The wire half of the realtime engine (:mod:`openab_voice.engine.realtime`): open a session, send the
SDK's client events, receive its parsed server events, and translate every failure into our error
tree: ``REALTIME_AUTH_FAILED``, ``REALTIME_MODEL_UNKNOWN`` and ``REALTIME_REQUEST_REJECTED`` are
``ProviderRequestRejected`` (never retried); ``REALTIME_RATE_LIMITED``, ``REALTIME_SERVER_ERROR`` and
``REALTIME_CONNECTION_LOST`` are ``ProviderRequestFailed``. The SDK's reconnection is not used: the
engine replaces a dropped session with a fresh one. Needs the ``openai`` extra; a missing one is
``PROVIDER_UNAVAILABLE`` when connecting. Mapping in detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from openab_voice.config import Settings
from openab_voice.errors import (
    ErrorCode,
    OpenabError,
    ProviderRequestFailed,
    ProviderRequestRejected,
    ProviderUnavailable,
)
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.realtime import (
    RealtimeConfig,
    RealtimeConnector,
    RealtimeLink,
)

if TYPE_CHECKING:
    import openai
    from openai.types.realtime import RealtimeClientEventParam, RealtimeServerEvent

__all__ = [
    "OpenAIRealtime",
    "connection_error",
    "greeted",
    "probe",
    "realtime_config",
    "server_error",
]


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


def connection_error(
    exc: BaseException, *, model: str, provider: str = "openai-realtime", service: str = "realtime"
) -> OpenabError:
    """Our error for a failure to open or keep the websocket (``exc`` from websockets or the OS).

    Args:
        exc: the failure.
        model: the model asked for (a detail of ``REALTIME_MODEL_UNKNOWN``).
        provider: the ``provider`` detail (``openai-live`` for GPT-Live, which reuses these codes).
        service: what the messages call the server ("the {service} server refused the key").
    """
    if isinstance(exc, OpenabError):
        return exc
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    failure = type(exc).__name__
    if isinstance(status, int):
        if status in (401, 403):
            return ProviderRequestRejected(
                f"the {service} server refused the key (HTTP {status})",
                code=ErrorCode.REALTIME_AUTH_FAILED,
                provider=provider,
                status=status,
            )
        if status == 404:
            return ProviderRequestRejected(
                f"the {service} server does not know model {model!r} (HTTP 404)",
                code=ErrorCode.REALTIME_MODEL_UNKNOWN,
                provider=provider,
                status=status,
                model=model,
            )
        if status == 429:
            return ProviderRequestFailed(
                f"the {service} server is rate limiting (HTTP 429)",
                code=ErrorCode.REALTIME_RATE_LIMITED,
                provider=provider,
                status=status,
            )
        if status >= 500:
            return ProviderRequestFailed(
                f"the {service} server failed (HTTP {status})",
                code=ErrorCode.REALTIME_SERVER_ERROR,
                provider=provider,
                status=status,
            )
        return ProviderRequestRejected(
            f"the {service} server refused the connection (HTTP {status})",
            code=ErrorCode.REALTIME_REQUEST_REJECTED,
            provider=provider,
            status=status,
        )
    return ProviderRequestFailed(
        f"{service} connection lost: {failure}",
        code=ErrorCode.REALTIME_CONNECTION_LOST,
        provider=provider,
        failure=failure,
    )


def server_error(
    *, kind: str, code: str | None, message: str, model: str, provider: str = "openai-realtime"
) -> OpenabError:
    """Our error for a server ``error`` event (``error.type``, ``error.code``, ``error.message``).

    ``provider`` is the ``provider`` detail (``openai-live`` for GPT-Live, which reuses these codes).
    """
    text = f"{kind}/{code or '-'}: {message}"[:300]
    key = f"{kind} {code or ''}".lower()
    if "auth" in key or "api_key" in key or "permission" in key:
        return ProviderRequestRejected(text, code=ErrorCode.REALTIME_AUTH_FAILED, provider=provider)
    if "model" in key and ("not_found" in key or "unknown" in key or "does_not_exist" in key):
        return ProviderRequestRejected(
            text, code=ErrorCode.REALTIME_MODEL_UNKNOWN, provider=provider, model=model
        )
    if "rate_limit" in key or "quota" in key:
        return ProviderRequestFailed(text, code=ErrorCode.REALTIME_RATE_LIMITED, provider=provider)
    if kind == "invalid_request_error":
        return ProviderRequestRejected(text, code=ErrorCode.REALTIME_REQUEST_REJECTED, provider=provider)
    return ProviderRequestFailed(text, code=ErrorCode.REALTIME_SERVER_ERROR, provider=provider)


class _SdkLink:
    """A live ``AsyncRealtimeConnection`` behind :class:`RealtimeLink`."""

    def __init__(self, connection: Any, *, model: str) -> None:
        self._connection = connection
        self._model = model
        self._life = Lifecycle("realtime connection", started=True)
        self._errors = _websocket_errors() + (OSError,)

    async def send(self, event: RealtimeClientEventParam) -> None:
        if self._life.closed:
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
        if not self._life.begin_close():
            return
        with contextlib.suppress(Exception):  # closing a broken socket has nothing left to report
            await self._connection.close()
        self._life.finish_close()


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
