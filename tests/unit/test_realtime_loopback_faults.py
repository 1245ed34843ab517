"""Planned faults of the loopback realtime server as the real ``openai`` SDK client meets them, and
the round trip of every server event kind it emits through the SDK's ``RealtimeServerEvent`` types."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import RealtimeErrorEvent
from openai.types.realtime.rate_limits_updated_event import RateLimit
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from openab_voice.clock import FakeClock
from openab_voice.providers.chat import ChatMessage
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.realtime import (
    CallFunction,
    ChatModelResponder,
    Faults,
    Line,
    Pacing,
    ResponseFailure,
    ScriptedListener,
    Speak,
    ToneVoice,
    Turn,
)
from openab_voice.testing.realtime.pacing import Pacer
from openab_voice.testing.realtime.wire import dump_server_event, server_event_classes, unknown_parameters
from tests.fakes.realtime_loopback import MODEL, Factory, client, loopback_servers, until

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
async def make_server() -> AsyncIterator[Factory]:
    async with loopback_servers(
        lambda: ScriptedListener("hello"), lambda: ToneVoice(ms_per_word=200)
    ) as make:
        yield make


async def ready(connection: AsyncRealtimeConnection) -> None:
    await until(connection, "session.created")
    await connection.session.update(
        session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
    )
    await until(connection, "session.updated")


async def test_a_wrong_key_is_http_401_at_the_handshake(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server:
        with pytest.raises(InvalidStatus) as refused:
            async with client(server, key="sk-wrong-key").realtime.connect(model=MODEL):
                pass
        assert refused.value.response.status_code == 401
        body = json.loads(refused.value.response.body)
        assert body["error"]["code"] == "invalid_api_key"
        assert "sk-wrong-key" not in body["error"]["message"]  # never echoes the whole key

        server.faults.reject_auth = True
        with pytest.raises(InvalidStatus) as refused:
            async with client(server).realtime.connect(model=MODEL):
                pass
        assert refused.value.response.status_code == 401
        assert server.sessions == [] and len(server.refused_handshakes) == 2


async def test_a_dropped_connection_is_a_close_without_a_frame(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await ready(connection)
        session = await server.session(0)
        await session.drop()
        with pytest.raises(ConnectionClosedError) as closed:
            await connection.recv()
        assert closed.value.rcvd is None  # no close frame: 1006, what a network failure looks like
        await session.closed.wait()


async def test_the_sdk_reconnects_after_a_drop_to_a_fresh_session(make_server: Factory) -> None:
    attempts: list[Any] = []
    server = make_server(["Hi."])
    async with server:
        manager = client(server).realtime.connect(
            model=MODEL, on_reconnecting=attempts.append, initial_delay=0.0, max_delay=0.0
        )
        async with manager as connection:
            await ready(connection)
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
            )
            await until(connection, "conversation.item.done")
            await (await server.session(0)).drop()
            created = (await until(connection, "session.created"))[-1]  # the same iterator, a new socket
            fresh = await server.session(1)
            assert created.session.audio.input.turn_detection is not None  # defaults again: re-send config
            assert [a.close_code for a in attempts] == [1006]
            assert fresh.conversation.items == [] and len(server.sessions[0].conversation.items) == 1


async def test_a_planned_drop_cuts_the_audio_at_a_position(make_server: Factory) -> None:
    faults = Faults()
    faults.drop_before("response.output_audio.delta", after_audio_ms=300)
    server = make_server(["one two three four five"], faults=faults)  # 1,000 ms in 100 ms chunks
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await ready(connection)
        await connection.response.create()
        audio = b""
        with pytest.raises(ConnectionClosedError):
            async for event in connection:
                if event.type == "response.output_audio.delta":
                    audio += base64.b64decode(event.delta)
        assert len(audio) == 300 * 24 * 2
        assert faults.drops == []  # consumed


async def test_injected_errors_failed_responses_and_rate_limits(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await ready(connection)
        session = await server.session(0)
        await session.send_error(type="server_error", code="server_error", message="boom")
        error = await connection.recv()
        assert isinstance(error, RealtimeErrorEvent)
        assert (error.error.type, error.error.code) == ("server_error", "server_error")

        server.faults.fail_next_response(
            ResponseFailure(type="requests", code="rate_limit_exceeded", message="Rate limit reached.")
        )
        await connection.response.create()
        done = (await until(connection, "response.done"))[-1]
        assert done.response.status == "failed"
        assert done.response.status_details.error.code == "rate_limit_exceeded"
        await connection.response.create()  # the failure was for one response only
        assert (await until(connection, "response.done"))[-1].response.status == "completed"

        await session.send_rate_limits([RateLimit(name="tokens", limit=100, remaining=0, reset_seconds=2.0)])
        limits = (await until(connection, "rate_limits.updated"))[-1]
        assert limits.rate_limits[0].remaining == 0


class GatedClock(FakeClock):
    """A fake clock that says when someone is asleep on it, so a test advances it only then
    (advancing before the sleep is registered would push that sleep's deadline later)."""

    def __init__(self) -> None:
        super().__init__()
        self.asleep = 0
        self._changed = asyncio.Condition()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return await super().sleep(seconds)
        async with self._changed:
            self.asleep += 1
            self._changed.notify_all()
        try:
            await super().sleep(seconds)
        finally:
            self.asleep -= 1

    async def someone_asleep(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.asleep > 0)


async def test_latency_is_added_before_every_event(make_server: Factory) -> None:
    clock = GatedClock()
    server = make_server(["one"], clock=clock)
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await ready(connection)
        session = await server.session(0)
        server.faults.event_latency_s = 0.5
        before = len(session.sent)
        await connection.response.create()
        while not any(e.type == "response.done" for e in session.sent):
            sent = len(session.sent)
            await clock.someone_asleep()
            clock.advance(0.5)
            await session.wait_for(lambda: len(session.sent) > sent)  # noqa: B023
        times = session.sent_at[before:]
        assert [b - a for a, b in zip(times, times[1:], strict=False)] == [0.5] * (len(times) - 1)
        assert times[0] == 1000.5
        await until(connection, "response.done")


@pytest.mark.parametrize(("code", "clean"), [(1000, True), (None, False)])
async def test_close_after_n_responses(make_server: Factory, code: int | None, clean: bool) -> None:
    faults = Faults(close_after_responses=2, close_code=code)
    server = make_server(["Hi."], faults=faults)
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await ready(connection)
        await connection.response.create()
        await until(connection, "response.done")
        await connection.response.create()
        seen: list[str] = []
        try:
            async for event in connection:  # the SDK's iterator ends on a clean close
                seen.append(event.type)
            closed_cleanly = True
        except ConnectionClosedError:
            closed_cleanly = False
        assert seen[-1] == "response.done"
        assert closed_cleanly is clean


async def test_chat_model_responder_speaks_the_models_text() -> None:
    chat = ScriptedChatModel(FakeClock(), ["It is noon."], ttft_s=0.0, token_s=0.0)
    turn = Turn(lines=(Line(role="user", text="what time is it"),), items=(), instructions="Be brief.")
    reply = await ChatModelResponder(chat).respond(turn)
    assert reply == Speak(text="It is noon.")
    assert chat.requests[0] == (
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="what time is it"),
    )


def test_pacer_restarts_the_schedule_after_an_underrun() -> None:
    pacer = Pacer(Pacing(first_audio_latency_s=0.5, realtime_factor=1.0), started_at=10.0)
    assert pacer.delay(0, now=10.0) == 0.5  # the first audio waits for the latency
    assert pacer.delay(100, now=10.5) == pytest.approx(0.1)
    assert pacer.delay(200, now=11.0) == 0.0  # 300 ms late: synthesis fell behind
    assert pacer.delay(300, now=11.0) == pytest.approx(0.1)  # paced from when it resumed


def assert_round_trip(sent: list[Any], connection: AsyncRealtimeConnection) -> None:
    """Each event serializes to JSON that validates strictly as its SDK class, with no field the SDK
    does not model, and that the SDK's own parser turns back into the same model."""
    classes = server_event_classes()
    for event in sent:
        raw = dump_server_event(event)
        data = json.loads(raw)
        strict = classes[data["type"]].model_validate(data)  # validated, not just constructed
        assert list(unknown_parameters(strict)) == [], data["type"]
        parsed = connection.parse_event(raw)  # what the SDK's recv() makes of it
        assert type(parsed) is type(event) is type(strict)
        assert parsed.model_dump() == strict.model_dump() == event.model_dump()


async def test_every_server_event_round_trips_through_the_sdk_types(make_server: Factory) -> None:
    call = CallFunction(name="clock_now", arguments="{}", call_id="call_rt")
    server = make_server(["one two three", call, "It is noon.", "text only"])
    async with server:
        async with client(server).realtime.connect(model=MODEL) as connection:
            await ready(connection)
            await connection.input_audio_buffer.append(audio=base64.b64encode(b"\1\0" * 4800).decode())
            await connection.input_audio_buffer.commit()
            await connection.response.create()
            spoken = (await until(connection, "response.done"))[-1].response.output[0].id
            await connection.conversation.item.truncate(item_id=spoken, content_index=0, audio_end_ms=200)
            await until(connection, "conversation.item.truncated")
            await connection.response.create()
            await until(connection, "response.done")
            await connection.conversation.item.create(
                item={"type": "function_call_output", "call_id": "call_rt", "output": "12:00"}
            )
            await connection.response.create()
            await until(connection, "response.done")
            await connection.response.create(response={"output_modalities": ["text"]})
            await until(connection, "response.done")
            await connection.conversation.item.retrieve(item_id=spoken)
            await connection.conversation.item.delete(item_id=spoken)
            await connection.input_audio_buffer.clear()
            await connection.send_raw("{}")
            await until(connection, "error")
            session = await server.session(0)
            await session.send_rate_limits()
            await until(connection, "rate_limits.updated")

            assert_round_trip(session.sent, connection)
            kinds = {event.type for event in session.sent}

        # Server turn detection (left on) and input transcription, on a second connection.
        async with client(server).realtime.connect(model=MODEL) as connection:
            await until(connection, "session.created")
            await connection.session.update(
                session={"type": "realtime", "audio": {"input": {"transcription": {"model": "whisper-1"}}}}
            )
            loud = bytes(b"\x00\x40" * 24 * 300)  # 300 ms at -6 dBFS, then 300 ms of silence
            await connection.input_audio_buffer.append(
                audio=base64.b64encode(loud + bytes(48 * 300)).decode()
            )
            seen: set[str] = set()
            async for event in connection:
                seen.add(event.type)
                if {"response.done", "conversation.item.input_audio_transcription.completed"} <= seen:
                    break
            session = await server.session(1)
            assert_round_trip(session.sent, connection)
            kinds |= {event.type for event in session.sent}
    assert kinds >= {
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "conversation.item.input_audio_transcription.completed",
        "session.created",
        "session.updated",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.truncated",
        "conversation.item.retrieved",
        "conversation.item.deleted",
        "response.created",
        "rate_limits.updated",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.done",
        "error",
    }
