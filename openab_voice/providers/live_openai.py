"""OpenAI GPT-Live over the ``openai`` package's own client (``client.live.connect``).

The wire half of the live engine: open a socket on ``{base_url}/live/sessions`` (no query: the model
goes in ``session.start``), start a session on it (:func:`start_session`), send the SDK's client
events, receive its parsed server events, and translate every failure into our error tree. Live
reuses the codes of the realtime speech family, with the ``provider`` detail ``openai-live``:
``REALTIME_AUTH_FAILED``, ``REALTIME_MODEL_UNKNOWN`` and ``REALTIME_REQUEST_REJECTED`` are
``ProviderRequestRejected`` (never retried); ``REALTIME_RATE_LIMITED``, ``REALTIME_SERVER_ERROR`` and
``REALTIME_CONNECTION_LOST`` are ``ProviderRequestFailed``.

The SDK's reconnection stays off (no ``on_reconnecting``): it opens a new socket without
``session.start``, which is a new, empty session, not the lost one. The engine replaces a lost session
with a fresh one seeded from what was heard. Needs the ``openai`` extra (``openai[realtime]``: the
``websockets`` package); a missing one is ``PROVIDER_UNAVAILABLE`` when connecting.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from openab_voice.clock import Clock, SystemClock, bounded
from openab_voice.errors import (
    ErrorCode,
    OpenabError,
    ProviderRequestFailed,
    ProviderRequestRejected,
    ProviderUnavailable,
)
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.live import LiveConfig, LiveConnector, LiveLink
from openab_voice.providers.realtime_openai import connection_error, server_error

if TYPE_CHECKING:
    import openai
    from openai.types.live import ClientEventParam, Error, ServerEvent, SessionConfigParam, SessionResource

__all__ = [
    "PROVIDER",
    "START_TIMEOUT_S",
    "OpenAILive",
    "live_connection_error",
    "live_error",
    "probe",
    "start_session",
]

PROVIDER = "openai-live"
"""The ``provider`` detail of every Live error (the codes are the realtime family's)."""
START_TIMEOUT_S = 10.0
"""How long ``session.start`` may wait for ``session.started`` (the upgrade has its own 10 s)."""
_SERVICE = "live"
_MODEL_PARAM = "session.model"


def live_connection_error(exc: BaseException, *, model: str) -> OpenabError:
    """Our error for a failure to open or keep the Live socket (``exc`` from websockets or the OS).

    As Realtime's, except an HTTP 404: the model is not in the URL here, so a 404 means the server
    has no ``/live/sessions`` (a wrong ``base_url``), not an unknown model.
    """
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status == 404 and not isinstance(exc, OpenabError):
        return ProviderRequestRejected(
            "the live server has no /live/sessions endpoint (HTTP 404)",
            code=ErrorCode.REALTIME_REQUEST_REJECTED,
            provider=PROVIDER,
            status=status,
        )
    return connection_error(exc, model=model, provider=PROVIDER, service=_SERVICE)


def live_error(error: Error, *, model: str) -> OpenabError:
    """Our error for a Live ``error`` event's ``error`` (``type``, ``code``, ``message``, ``param``).

    The code for an unknown model is not documented: besides Realtime's "model" + not_found /
    unknown / does_not_exist, a request error on ``param == "session.model"`` counts as one.
    """
    mapped = server_error(
        kind=error.type, code=error.code, message=error.message, model=model, provider=PROVIDER
    )
    if mapped.code == ErrorCode.REALTIME_REQUEST_REJECTED and error.param == _MODEL_PARAM:
        return ProviderRequestRejected(
            mapped.message, code=ErrorCode.REALTIME_MODEL_UNKNOWN, provider=PROVIDER, model=model
        )
    return mapped


def _failure(message: str, **details: Any) -> OpenabError:
    return ProviderRequestFailed(message, code=ErrorCode.REALTIME_SERVER_ERROR, provider=PROVIDER, **details)


def _link_errors() -> tuple[type[BaseException], ...]:
    """What a send or a receive raises when the socket is gone (the SDK's own, once it is installed)."""
    found: list[type[BaseException]] = [OSError]
    with contextlib.suppress(ImportError):
        found.append(importlib.import_module("websockets.exceptions").WebSocketException)
    with contextlib.suppress(ImportError):
        found.append(importlib.import_module("openai").OpenAIError)  # unsent frames, a full send queue
    return tuple(found)


class _SdkLink:
    """A live ``AsyncLiveConnection`` behind :class:`LiveLink`."""

    def __init__(self, connection: Any, *, model: str) -> None:
        self._connection = connection
        self._model = model
        self._life = Lifecycle("live connection", started=True)
        self._errors = _link_errors()

    async def send(self, event: ClientEventParam) -> None:
        if self._life.closed:
            raise live_connection_error(ConnectionError("the session was closed"), model=self._model)
        try:
            await self._connection.send(event)
        except self._errors as exc:
            raise live_connection_error(exc, model=self._model) from exc

    async def events(self) -> AsyncIterator[ServerEvent]:
        while True:
            try:
                data = await self._connection.recv_bytes()
            except self._errors as exc:
                if self._life.closed:
                    return  # our own close: nothing was lost
                raise live_connection_error(exc, model=self._model) from exc
            yield self._parse(data)

    def _parse(self, data: bytes) -> ServerEvent:
        """The SDK's event; it does not validate, so an unknown ``type`` still arrives with its string."""
        try:
            event: Any = self._connection.parse_event(data)
        except ValueError:  # not JSON (or not UTF-8)
            event = None
        if not isinstance(getattr(event, "type", None), str):
            raise _failure("the live server sent a frame that is not an event")
        return event  # type: ignore[no-any-return]

    async def close(self) -> None:
        if not self._life.begin_close():
            return
        with contextlib.suppress(Exception):  # closing a broken socket has nothing left to report
            await self._connection.close()
        self._life.finish_close()


class OpenAILive:
    """Connects to OpenAI GPT-Live (or a server speaking it, such as the loopback Live server).

    Args:
        config: model, voice, server and key.
        client: an ``openai.AsyncOpenAI`` to use (tests); None builds one from ``config``.
    """

    def __init__(self, config: LiveConfig, *, client: openai.AsyncOpenAI | None = None) -> None:
        self.config = config
        self._client = client

    @property
    def model(self) -> str:
        return self.config.model

    def _ensure_client(self) -> openai.AsyncOpenAI:
        try:
            openai_module = importlib.import_module("openai")
            importlib.import_module("websockets")  # openai[realtime]: without it connect() cannot open
        except ImportError as exc:
            raise ProviderUnavailable(
                f"the live engine needs the openai extra (openai[realtime]; {exc.name} is missing)",
                provider=PROVIDER,
                extra="openai",
                install="pip install 'openab-voice[openai]'",
            ) from None
        if self._client is None:
            # The SDK insists on a key even for a local server; a loopback server ignores it.
            self._client = openai_module.AsyncOpenAI(
                api_key=self.config.api_key or "unset", base_url=self.config.base_url, max_retries=0
            )
        return self._client

    async def connect(self) -> LiveLink:
        client = self._ensure_client()
        manager = client.live.connect()  # no on_reconnecting: see the module docstring
        try:
            connection = await manager.enter()
        except Exception as exc:
            raise live_connection_error(exc, model=self.model) from exc
        return _SdkLink(connection, model=self.model)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()


async def start_session(
    link: LiveLink,
    session: SessionConfigParam,
    *,
    model: str,
    clock: Clock | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> SessionResource:
    """Send ``session.start`` and wait for ``session.started``: a server that refuses the session (an
    unknown model) says so in an ``error`` event before it.

    Args:
        link: a freshly connected socket (nothing sent on it yet).
        session: the whole startup configuration (model, instructions, audio, input, delegation).
        model: the model asked for (a detail of ``REALTIME_MODEL_UNKNOWN``).
        clock: bounds the wait (SystemClock when None).
        timeout_s: how long the server may take.

    Returns:
        The resolved session (``id``, ``expires_at``, ``model``, ``audio`` ...).

    Raises:
        OpenabError: the refusal (``REALTIME_MODEL_UNKNOWN``, ``REALTIME_AUTH_FAILED`` ...), the
            connection's loss, or ``REALTIME_SERVER_ERROR`` when no answer came in ``timeout_s``.
    """
    finished, resource = await bounded(
        clock or SystemClock(), timeout_s, _started(link, session, model=model)
    )
    if not finished or resource is None:
        raise _failure(
            f"the live server did not start the session within {timeout_s:g} s", timeout_s=timeout_s
        )
    return resource


async def _started(link: LiveLink, session: SessionConfigParam, *, model: str) -> SessionResource:
    await link.send({"type": "session.start", "session": session})
    events = link.events()
    try:
        async for event in events:
            if event.type == "session.started":
                resource: SessionResource | None = getattr(event, "session", None)
                if resource is None:
                    raise _failure("the live server sent session.started without a session")
                return resource
            if event.type == "error":
                raise live_error(event.error, model=model)
            if event.type == "session.closed":
                raise live_connection_error(ConnectionError("closed before session.started"), model=model)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    raise live_connection_error(ConnectionError("closed before session.started"), model=model)


async def probe(
    connector: LiveConnector,
    session: SessionConfigParam | None = None,
    *,
    clock: Clock | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> SessionResource:
    """Open a socket, start a session and close it again (``session.close``): what ``check-config``
    and the bot's start-up do, so a refused key or an unknown model is reported before any call.

    Args:
        connector: where to connect.
        session: the startup configuration to try; None: only ``{"model": connector.model}``.
        clock: bounds the wait for ``session.started``.
        timeout_s: how long the server may take to start it.

    Returns:
        The session the server started (and was asked to close).

    Raises:
        OpenabError: ``REALTIME_AUTH_FAILED``, ``REALTIME_MODEL_UNKNOWN``, ``REALTIME_CONNECTION_LOST`` ...
    """
    link = await connector.connect()
    try:
        started = await start_session(
            link,
            session or {"model": connector.model},
            model=connector.model,
            clock=clock,
            timeout_s=timeout_s,
        )
        with contextlib.suppress(OpenabError):  # the session ends with the socket anyway
            await link.send({"type": "session.close"})
        return started
    finally:
        await link.close()
