"""The GPT-Live wire (providers/live_openai.py) against a scripted ``websockets`` server on 127.0.0.1:
the unmodified SDK opens ``/v1/live/sessions`` with the Bearer key, ``session.start`` is answered by
``session.started`` or an ``error``, and every failure is one of our structured errors with the
provider ``openai-live`` (the codes are the realtime family's), never carrying the key."""

from __future__ import annotations

import asyncio
import json
import sys
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import pytest
from openai.types.live import Error, ErrorEvent, SessionConfig, SessionResource, SessionStartedEvent
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from openab_voice.clock import FakeClock
from openab_voice.errors import OpenabError, ProviderUnavailable
from openab_voice.providers.live import DEFAULT_LIVE_MODEL, LIVE_MODELS, LIVE_RATE, LiveConfig, LiveLink
from openab_voice.providers.live_openai import OpenAILive, live_connection_error, probe, start_session
from openab_voice.providers.realtime_openai import connection_error, server_error

pytestmark = pytest.mark.timeout(30)

KEY = "sk-live-test-secret"
Script = Callable[[ServerConnection], Awaitable[None]]


@dataclass
class _Server:
    """What the scripted server saw."""

    base_url: str = ""
    paths: list[str] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)


def _started(model: str = DEFAULT_LIVE_MODEL) -> str:
    session = SessionResource(id="sess_1", expires_at=1_900_000_000, model=model, status="active")
    return SessionStartedEvent(type="session.started", event_id="evt_1", session=session).to_json()


def _error(code: str, param: str | None, kind: str = "invalid_request_error") -> str:
    error = Error(code=code, message=f"refused ({code})", type=kind, param=param)
    return ErrorEvent(type="error", event_id="evt_e", error=error).to_json()


async def _recv(ws: ServerConnection) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await ws.recv())
    return event


async def _drain(ws: ServerConnection) -> list[str]:
    """The types of the client's events until it closes."""
    return [json.loads(message)["type"] async for message in ws]


@asynccontextmanager
async def _live_server(script: Script, *, status: HTTPStatus | None = None) -> AsyncIterator[_Server]:
    """One Live-speaking socket per connection: the handshake checks the key (or refuses with
    ``status``), then ``script`` plays the server's side."""
    seen = _Server()

    def handshake(connection: ServerConnection, request: Request) -> Response | None:
        seen.paths.append(request.path)
        auth = request.headers.get("Authorization")
        seen.authorizations.append(auth)
        refusal = status or (None if auth == f"Bearer {KEY}" else HTTPStatus.UNAUTHORIZED)
        if refusal is None:
            return None
        body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        return connection.respond(refusal, json.dumps(body))

    async with serve(script, "127.0.0.1", 0, process_request=handshake) as server:
        port = server.sockets[0].getsockname()[1]
        seen.base_url = f"http://127.0.0.1:{port}/v1"
        yield seen


@asynccontextmanager
async def _connector(server: _Server, key: str = KEY) -> AsyncIterator[OpenAILive]:
    connector = OpenAILive(LiveConfig(base_url=server.base_url, api_key=key))
    try:
        yield connector
    finally:
        await connector.aclose()


async def test_probe_starts_a_session_on_live_sessions_with_the_bearer_key() -> None:
    received: list[dict[str, Any]] = []

    async def script(ws: ServerConnection) -> None:
        received.append(await _recv(ws))
        await ws.send(_started())
        received.extend({"type": t} for t in await _drain(ws))

    async with _live_server(script) as server, _connector(server) as connector:
        session = await probe(connector)
    assert (session.id, session.model, session.status) == ("sess_1", DEFAULT_LIVE_MODEL, "active")
    assert server.paths == ["/v1/live/sessions"]  # no query: the model goes in session.start
    assert server.authorizations == [f"Bearer {KEY}"]
    assert received == [
        {"type": "session.start", "session": {"model": DEFAULT_LIVE_MODEL}},
        {"type": "session.close"},
    ]


async def test_a_refused_key_is_auth_failed_without_the_key() -> None:
    async def script(ws: ServerConnection) -> None:
        raise AssertionError("a refused upgrade opens no session")

    async with _live_server(script) as server, _connector(server, key="sk-wrong-secret") as connector:
        with pytest.raises(OpenabError) as info:
            await probe(connector)
    err = info.value
    assert (err.code, err.retryable, err.details["provider"], err.details["status"]) == (
        "REALTIME_AUTH_FAILED",
        False,
        "openai-live",
        401,
    )
    assert err.message == "the live server refused the key (HTTP 401)"
    assert "sk-wrong-secret" not in str(err) and "sk-wrong-secret" not in repr(err.to_dict())
    assert "sk-wrong-secret" not in repr(connector.config)


@pytest.mark.parametrize(
    ("code", "param", "expected"),
    [
        ("model_not_found", "session.model", "REALTIME_MODEL_UNKNOWN"),
        ("invalid_value", "session.model", "REALTIME_MODEL_UNKNOWN"),  # undocumented code: the param says
        ("unknown_parameter", "session.voice", "REALTIME_REQUEST_REJECTED"),
    ],
)
async def test_an_error_before_session_started_is_the_refusal(code: str, param: str, expected: str) -> None:
    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        await ws.send(_error(code, param))
        await ws.close(1008)

    async with _live_server(script) as server, _connector(server) as connector:
        with pytest.raises(OpenabError) as info:
            await probe(connector, {"model": "gpt-nope"})
    err = info.value
    assert (err.code, err.retryable, err.details["provider"]) == (expected, False, "openai-live")
    assert code in err.message


async def test_session_started_returns_the_session_and_unknown_events_keep_their_type() -> None:
    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        await ws.send(_started("gpt-live-1.1"))
        await ws.send(json.dumps({"type": "whatever.new", "event_id": "evt_2", "payload": 1}))
        await ws.send(json.dumps({"type": "session.output_audio.delta", "delta": "AAAA"}))
        await _drain(ws)

    async with _live_server(script) as server, _connector(server) as connector:
        link = await connector.connect()
        try:
            session = await start_session(link, {"model": "gpt-live-1.1"}, model="gpt-live-1.1")
            events = link.events()
            first, second = await anext(events), await anext(events)
            await events.aclose()
        finally:
            await link.close()
    assert isinstance(session, SessionResource) and session.model == "gpt-live-1.1"
    # The SDK builds an unknown type as SessionStartedEvent: only the type string tells them apart.
    assert first.type == "whatever.new" and second.type == "session.output_audio.delta"


async def _started_link(connector: OpenAILive) -> LiveLink:
    link = await connector.connect()
    await start_session(link, {"model": DEFAULT_LIVE_MODEL}, model=DEFAULT_LIVE_MODEL)
    return link


async def test_a_dropped_connection_mid_stream_is_connection_lost() -> None:
    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        await ws.send(_started())
        await ws.send(json.dumps({"type": "session.output_transcript.delta", "delta": "Hi", "start_ms": 0}))
        ws.transport.abort()  # no close frame: the network went away

    async with _live_server(script) as server, _connector(server) as connector:
        link = await _started_link(connector)
        seen: list[str] = []
        with pytest.raises(OpenabError) as info:
            async for event in link.events():
                seen.append(event.type)
        with pytest.raises(OpenabError) as sending:
            await link.send({"type": "session.input_audio.mute"})
        await link.close()
    assert seen == ["session.output_transcript.delta"]
    err = info.value
    assert (err.code, err.retryable, err.details["provider"]) == (
        "REALTIME_CONNECTION_LOST",
        True,
        "openai-live",
    )
    assert sending.value.code == "REALTIME_CONNECTION_LOST"


async def test_our_own_close_ends_the_events_quietly() -> None:
    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        await ws.send(_started())
        await _drain(ws)

    async with _live_server(script) as server, _connector(server) as connector:
        link = await _started_link(connector)
        await link.close()
        await link.close()  # idempotent
        assert [event async for event in link.events()] == []
        with pytest.raises(OpenabError) as info:
            await link.send({"type": "session.close"})
    assert info.value.code == "REALTIME_CONNECTION_LOST"


async def test_a_frame_that_is_not_an_event_is_a_server_error() -> None:
    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        await ws.send("not json")
        await _drain(ws)

    async with _live_server(script) as server, _connector(server) as connector:
        link = await connector.connect()
        with pytest.raises(OpenabError) as info:
            await start_session(link, {"model": DEFAULT_LIVE_MODEL}, model=DEFAULT_LIVE_MODEL)
        await link.close()
    assert (info.value.code, info.value.retryable) == ("REALTIME_SERVER_ERROR", True)


async def test_no_session_started_in_time_is_a_bounded_server_error() -> None:
    start_seen = asyncio.Event()

    async def script(ws: ServerConnection) -> None:
        await _recv(ws)
        start_seen.set()
        await _drain(ws)  # never answers

    clock = FakeClock()
    async with _live_server(script) as server, _connector(server) as connector:
        link = await connector.connect()
        waiting = asyncio.create_task(
            start_session(
                link, {"model": DEFAULT_LIVE_MODEL}, model=DEFAULT_LIVE_MODEL, clock=clock, timeout_s=5
            )
        )
        await start_seen.wait()
        assert clock.next_deadline() == clock.monotonic() + 5
        clock.advance(5)
        with pytest.raises(OpenabError) as info:
            await waiting
        await link.close()
    err = info.value
    assert (err.code, err.retryable, err.details["timeout_s"]) == ("REALTIME_SERVER_ERROR", True, 5)


async def test_a_server_without_live_is_a_rejected_request_not_an_unknown_model() -> None:
    async def script(ws: ServerConnection) -> None:
        raise AssertionError("a refused upgrade opens no session")

    async with (
        _live_server(script, status=HTTPStatus.NOT_FOUND) as server,
        _connector(server) as connector,
    ):
        with pytest.raises(OpenabError) as info:
            await connector.connect()
    assert (info.value.code, info.value.retryable) == ("REALTIME_REQUEST_REJECTED", False)


async def test_without_websockets_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "websockets", None)  # import websockets now fails
    with pytest.raises(ProviderUnavailable) as info:
        await OpenAILive(LiveConfig(api_key=KEY)).connect()
    assert info.value.details["extra"] == "openai" and "openai[realtime]" in info.value.message
    assert KEY not in str(info.value)


def test_the_models_and_rate_are_the_sdks() -> None:
    names: set[str] = set()
    for arg in typing.get_args(SessionConfig.model_fields["model"].annotation):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    assert set(LIVE_MODELS) == names and DEFAULT_LIVE_MODEL in names
    assert LIVE_RATE == 24_000
    assert (LiveConfig().model, LiveConfig().voice) == ("gpt-live-1", "marin")


class _Refused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.response = type("R", (), {"status_code": status})()


def test_the_realtime_messages_are_unchanged_and_live_names_itself() -> None:
    realtime = connection_error(_Refused(401), model="gpt-realtime")
    assert realtime.message == "the realtime server refused the key (HTTP 401)"
    assert realtime.details["provider"] == "openai-realtime"
    lost = connection_error(ConnectionResetError(), model="gpt-realtime")
    assert lost.message == "realtime connection lost: ConnectionResetError"
    assert server_error(kind="server_error", code=None, message="m", model="x").details == {
        "provider": "openai-realtime"
    }
    live = live_connection_error(ConnectionResetError(), model=DEFAULT_LIVE_MODEL)
    assert (live.message, live.details["provider"]) == (
        "live connection lost: ConnectionResetError",
        "openai-live",
    )
