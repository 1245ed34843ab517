"""The loopback GPT-Live server against the real ``openai`` SDK client (``client.live.connect``).

No model is loaded: a scripted listener stands in for STT, a tone per word for TTS, a scripted
responder for the model. Time is a fake clock (mute silence, pacing, fixtures, expiry wait on it);
nothing waits on wall time beyond the socket.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pydantic
import pytest
from openai.resources.live.live import AsyncLiveConnection
from openai.types.live import (
    DelegationCreatedEvent,
    ErrorEvent,
    InputTranscriptDeltaEvent,
    OutputAudioDeltaEvent,
    OutputTranscriptDeltaEvent,
    ResponseEvent,
    SessionClosedEvent,
    SessionStartedEvent,
)
from openai.types.responses import ResponseStreamEvent
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from openab_voice.clock import FakeClock
from openab_voice.testing.live import (
    KNOWN_MODELS,
    CallFunction,
    Delegate,
    Faults,
    LiveTurn,
    LoopbackLiveServer,
    LoopbackLiveSession,
    Pacing,
    ScriptedListener,
    ScriptedLiveResponder,
    ToneVoice,
)
from openab_voice.testing.live.wire import client_event_classes, dump_server_event, server_event_classes

pytestmark = pytest.mark.timeout(20)

KEY = "sk-live-test"
MODEL = "gpt-live-1"
TOOLS = [
    {
        "type": "function",
        "name": "start_agent_task",
        "description": "Start a coding task",
        "parameters": {"type": "object", "properties": {"task": {"type": "string"}}},
    }
]
RESPONSES = {"type": "responses", "responses": {"model": "gpt-5-mini", "tools": TOOLS}}

Make = Callable[..., LoopbackLiveServer]


def loud(ms: int) -> bytes:
    """``ms`` of 24 kHz PCM16 at -6 dBFS (speech to the energy VAD)."""
    return b"\x00\x40" * 24 * ms


def silence(ms: int) -> bytes:
    return bytes(48 * ms)


def b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


@pytest.fixture
def voice() -> ToneVoice:
    return ToneVoice(ms_per_word=200)


@pytest.fixture
def listener() -> ScriptedListener:
    return ScriptedListener("what time is it")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make(voice: ToneVoice, listener: ScriptedListener, clock: FakeClock) -> AsyncIterator[Make]:
    """``make(replies, **kwargs)``: a server answering ``replies``, unpaced unless ``pacing`` is given."""
    servers: list[LoopbackLiveServer] = []

    def make(replies: list[Any], **kwargs: Any) -> LoopbackLiveServer:
        kwargs.setdefault("pacing", Pacing(realtime_factor=0))
        kwargs.setdefault("clock", clock)
        server = LoopbackLiveServer(
            api_key=KEY, responder=ScriptedLiveResponder(replies), listener=listener, voice=voice, **kwargs
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.aclose()


def client(server: LoopbackLiveServer, key: str = KEY) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=key)


def responder_of(server: LoopbackLiveServer) -> ScriptedLiveResponder:
    responder = server.responder
    assert isinstance(responder, ScriptedLiveResponder)
    return responder


class Reader:
    """The server events one connection received, read up to what a test waits for."""

    def __init__(self, connection: AsyncLiveConnection) -> None:
        self.connection = connection
        self.events: list[Any] = []

    async def until(self, match: str | Callable[[Any], bool]) -> list[Any]:
        """Every event from here up to and including the first that matches (a type, or a predicate)."""
        start = len(self.events)
        while True:
            event = await self.connection.recv()
            self.events.append(event)
            if event.type == match if isinstance(match, str) else match(event):
                return self.events[start:]

    async def caught_up(self, session: LoopbackLiveSession) -> list[Any]:
        """Every event from here up to the last the server has sent."""
        start = len(self.events)
        while len(self.events) < len(session.sent):
            self.events.append(await self.connection.recv())
        return self.events[start:]

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]


async def started(connection: AsyncLiveConnection, **session: Any) -> tuple[Reader, SessionStartedEvent]:
    await connection.session.start(session={"model": MODEL, **session}, event_id="evt_start")
    reader = Reader(connection)
    (event,) = await reader.until("session.started")
    return reader, event


def nested(kind: str) -> Callable[[Any], bool]:
    """Matches a ``response.event`` whose nested Responses event is ``kind``."""
    return lambda event: event.type == "response.event" and event.event["type"] == kind


def assert_round_trip(session: LoopbackLiveSession, connection: AsyncLiveConnection) -> set[str]:
    """Every event the session sent parses with the SDK into the class of its ``type``; returns the types."""
    classes = server_event_classes()
    stream = pydantic.TypeAdapter(ResponseStreamEvent)
    for event in session.sent:
        text = dump_server_event(event)
        parsed = connection.parse_event(text)
        strict = classes[event.type].model_validate(json.loads(text))
        # The class, not just the type: an unknown type would parse as SessionStartedEvent.
        assert type(parsed) is type(strict) is type(event) is classes[event.type]
        assert parsed.model_dump() == strict.model_dump() == event.model_dump()
        if isinstance(event, OutputAudioDeltaEvent):
            assert set(json.loads(text)) == {"type", "delta"}  # no timestamps on the primary socket
        if isinstance(event, ResponseEvent):
            inner = stream.validate_python(event.event)
            assert inner.model_dump(mode="json", by_alias=True, exclude_unset=True) == event.event
    return {event.type for event in session.sent}


def transcript(events: list[Any], kind: str) -> str:
    return "".join(event.delta for event in events if event.type == kind)


def audio(events: list[Any]) -> bytes:
    return b"".join(base64.b64decode(e.delta) for e in events if e.type == "session.output_audio.delta")


# --- the wire -----------------------------------------------------------------------------------


async def test_every_client_event_is_accepted_when_valid(make: Make, clock: FakeClock) -> None:
    call = CallFunction(name="start_agent_task", arguments='{"task": "fix it"}', call_id="call_1")
    server = make([call, "Done."])
    async with server:
        async with client(server).live.connect() as connection:
            reader, _ = await started(connection, delegation=RESPONSES)
            live = connection.session
            await live.update(
                session={"delegation": {"type": "responses", "responses": {"instructions": "Go."}}}
            )
            await reader.until("session.updated")
            await live.input_audio.append(audio=b64(loud(300) + silence(600)))
            await reader.until(nested("response.output_item.done"))
            await live.input_audio.mute(event_id="evt_mute")
            await live.input_audio.unmute()
            await reader.until("session.input_audio.unmuted")
            await live.output_audio.fixture.play(audio=b64(silence(100)), event_id="evt_fix")
            await reader.until("session.output_audio.fixture.playing")
            clock.advance(0.1)
            await reader.until("session.output_audio.fixture.played")
            await live.instructions.append(content="Alice says:", delegation_id=None)
            await live.thinking.append(content="Working on it.", delegation_id=None)
            await live.commentary.append(content="The build is green.", delegation_id=None)
            await reader.until("session.commentary.appended")
            await connection.decision.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
            )
            created = (await reader.until("decision.item.created"))[-1]
            await connection.decision.item.delete(item_id=created.item.id)
            await reader.until("decision.item.deleted")
            await connection.response.item.create(
                item={"type": "function_call_output", "call_id": "call_1", "output": "task 7 started"}
            )
            await connection.response.create()
            await reader.until(nested("response.completed"))
            session = await server.session(0)
            await session.wait_for(lambda: bool(session.spoken) and session.spoken[-1].status == "completed")
            await live.close(event_id="evt_close")
            await reader.until("session.closed")
            assert session.errors_sent == []
            kinds = assert_round_trip(session, connection)

        async with client(server).live.connect() as connection:
            questions = [{"type": "predicate", "instructions": "Is it urgent?", "name": "urgent"}]
            decisions = {"type": "decisions", "decisions": {"model": "gpt-5-mini", "questions": questions}}
            reader, _ = await started(connection, delegation=decisions)
            await connection.decision.create(event_id="evt_decide")
            decided = (await reader.until("decision.event"))[-1]
            assert decided.event.decision.answers[0].type == "refusal"
            assert decided.event.decision.answers[0].name == "urgent"
            second = await server.session(1)
            kinds |= assert_round_trip(second, connection)

    received = [event for s in server.sessions for event in s.client_events]
    classes = client_event_classes()
    assert {event.type for event in received} == set(classes)
    assert all(type(event) is classes[event.type] for event in received)
    assert all(not s.rejected for s in server.sessions)
    assert kinds >= {
        "session.started",
        "session.updated",
        "session.input_audio.muted",
        "session.input_audio.unmuted",
        "session.output_audio.fixture.playing",
        "session.output_audio.fixture.played",
        "session.instructions.appended",
        "session.thinking.appended",
        "session.commentary.appended",
        "session.input_transcript.delta",
        "session.output_transcript.delta",
        "session.output_audio.delta",
        "session.delegation.created",
        "response.event",
        "decision.item.created",
        "decision.item.deleted",
        "decision.event",
        "session.closed",
    }


async def test_unknown_types_parameters_and_early_commands_are_refused(make: Make) -> None:
    server = make(["Hi."])
    async with server, client(server).live.connect() as connection:
        reader = Reader(connection)
        await connection.session.input_audio.mute(event_id="evt_early")
        early = (await reader.until("error"))[-1]
        assert early.error.code == "session_not_started" and early.client_event_id == "evt_early"
        await started(connection)

        await connection.send_raw(json.dumps({"type": "whatever.new", "event_id": "evt_new"}))
        unknown = (await reader.until("error"))[-1]
        assert type(unknown) is ErrorEvent
        assert (unknown.error.code, unknown.error.param, unknown.error.type) == (
            "invalid_value",
            "type",
            "invalid_request_error",
        )
        assert "whatever.new" in unknown.error.message
        assert unknown.client_event_id == unknown.error.client_event_id == "evt_new"

        await connection.send_raw(json.dumps({"type": "session.input_audio.mute", "loudness": 3}))
        extra = (await reader.until("error"))[-1]
        assert (extra.error.code, extra.error.param) == ("unknown_parameter", "loudness")
        assert "loudness" in extra.error.message

        await connection.send_raw(json.dumps({"type": "session.thinking.append", "content": "hm"}))
        missing = (await reader.until("error"))[-1]
        assert (missing.error.code, missing.error.param) == ("missing_required_parameter", "delegation_id")

        await connection.response.create(event_id="evt_resp")
        no_backend = (await reader.until("error"))[-1]
        assert no_backend.error.code == "responses_delegation_required"

        await connection.session.update(session={"delegation": RESPONSES})
        changed = (await reader.until("error"))[-1]
        assert (changed.error.code, changed.error.param) == ("invalid_value", "session.delegation.type")

        session = await server.session(0)
        assert [failure.code for failure in session.rejected] == [
            "invalid_value",
            "unknown_parameter",
            "missing_required_parameter",
        ]
        assert assert_round_trip(session, connection) == {"error", "session.started"}


async def test_a_wrong_key_a_wrong_path_and_a_query_are_refused_at_the_handshake(make: Make) -> None:
    async with make(["Hi."]) as server:
        with pytest.raises(InvalidStatus) as refused:
            async with client(server, key="sk-wrong-key").live.connect():
                pass
        assert refused.value.response.status_code == 401
        body = json.loads(refused.value.response.body)
        assert body["error"]["code"] == "invalid_api_key"
        assert "sk-wrong-key" not in body["error"]["message"]

        server.faults.reject_auth = True
        with pytest.raises(InvalidStatus) as refused:
            async with client(server).live.connect():
                pass
        assert refused.value.response.status_code == 401
        server.faults.reject_auth = False

        headers = {"Authorization": f"Bearer {KEY}"}
        with pytest.raises(InvalidStatus) as refused:
            async with ws_connect(
                server.websocket_url.replace("/live/sessions", "/realtime"), additional_headers=headers
            ):
                pass
        assert refused.value.response.status_code == 404
        with pytest.raises(InvalidStatus) as refused:
            async with client(server).live.connect(extra_query={"model": MODEL}):
                pass
        assert refused.value.response.status_code == 400
        assert server.sessions == [] and [int(s) for s in server.refused_handshakes] == [401, 401, 404, 400]


async def test_an_unknown_model_is_an_error_then_a_1008_close(make: Make) -> None:
    assert {"gpt-live-1", "gpt-live-1.1"} <= KNOWN_MODELS
    server = make(["Hi."])
    async with server:
        async with client(server).live.connect() as connection:
            reader = Reader(connection)
            start = {"type": "session.start", "session": {"model": MODEL, "voice": "x"}}
            await connection.send_raw(json.dumps(start))
            malformed = (await reader.until("error"))[-1]  # not parsed, so not an admission: no close
            assert (malformed.error.code, malformed.error.param) == ("unknown_parameter", "session.voice")
            await connection.session.start(session={"model": "gpt-live-9"}, event_id="evt_start")
            refused = (await reader.until("error"))[-1]
            assert (refused.error.code, refused.error.param) == ("model_not_found", "session.model")
            assert refused.error.client_event_id == "evt_start"
            with pytest.raises(ConnectionClosedError) as closed:
                await connection.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            assert not (await server.session(0)).started

        async with client(server).live.connect() as connection:
            g711 = {"model": MODEL, "audio": {"format": {"type": "audio/pcmu", "rate": 8000}}}
            await connection.session.start(session=g711)
            refused = (await Reader(connection).until("error"))[-1]
            assert (refused.error.code, refused.error.param) == ("invalid_value", "session.audio.format")
            with pytest.raises(ConnectionClosedError):
                await connection.recv()


# --- turns --------------------------------------------------------------------------------------


async def test_a_burst_then_mute_is_heard_transcribed_and_answered(
    make: Make, clock: FakeClock, voice: ToneVoice, listener: ScriptedListener
) -> None:
    answer = "It is noon. Time for lunch!"
    server = make([answer, "Again?"])
    async with server, client(server).live.connect() as connection:
        reader, _ = await started(connection)
        session = await server.session(0)
        await connection.session.input_audio.append(audio=b64(loud(600)))
        await connection.session.input_audio.mute(event_id="evt_mute")
        assert (await reader.until("session.input_audio.muted"))[-1].client_event_id == "evt_mute"
        assert session.dialogue.turns == []  # a speech without silence is still open
        clock.advance(0.5)  # the VAD's silence, on the clock, after the mute
        await session.wait_for(lambda: bool(session.spoken) and session.spoken[0].status == "completed")
        events = await reader.caught_up(session)

        assert listener.calls == [loud(600)]
        heard = [e for e in events if isinstance(e, InputTranscriptDeltaEvent)]
        assert "".join(e.delta for e in heard) == "what time is it"
        assert heard[0].start_ms == 0 and heard[-1].end_ms == 600
        assert audio(events) == voice.pcm_for("It is noon.") + voice.pcm_for("Time for lunch!")
        said = [e for e in events if isinstance(e, OutputTranscriptDeltaEvent)]
        assert "".join(e.delta for e in said) == answer
        # After the speech and its silence; word by word along the 1200 ms of audio (six words).
        assert said[0].start_ms == 1100 and said[-1].end_ms == 2300
        assert all(a.end_ms <= b.start_ms + 1 for a, b in zip(said, said[1:], strict=False))
        assert session.dialogue.turns[0].transcript == "what time is it"

        # Unmuted, a burst that carries its own silence ends in sample time: no clock needed.
        await connection.session.input_audio.unmute()
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        await session.wait_for(lambda: len(session.spoken) == 2 and session.spoken[1].status == "completed")
        assert transcript(await reader.caught_up(session), "session.output_transcript.delta") == "Again?"
        turn = responder_of(server).turns[1]
        assert [line.role for line in turn.lines] == ["user", "assistant", "user"]
        assert turn.lines[1].text == answer


async def test_speech_over_the_voice_stops_it_at_once(make: Make, clock: FakeClock) -> None:
    pacing = Pacing(chunk_ms=100, realtime_factor=1.0)  # 1000 ms of speech in 10 chunks, on the clock
    server = make(["one two three four five", "Sorry."], pacing=pacing)
    async with server, client(server).live.connect() as connection:
        await started(connection)
        session = await server.session(0)

        def deltas() -> int:
            return len(session.sent_of("session.output_audio.delta"))

        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        await session.wait_for(lambda: deltas() == 1)
        clock.advance(0.1)
        await session.wait_for(lambda: deltas() == 2)
        await connection.session.input_audio.append(audio=b64(loud(200)))  # the user talks over it
        await session.wait_for(lambda: session.spoken[0].status == "stopped")
        clock.advance(2.0)

        spoken = session.spoken[0]
        assert (spoken.stop_reason, spoken.audio_ms_sent, session.barge_ins) == ("barge_in", 200.0, 1)
        assert spoken.words_sent == ["one", "two"]
        assert session.dialogue.turns[0].stopped == "barge_in"
        await connection.session.input_audio.append(audio=b64(silence(600)))
        responder = responder_of(server)
        await session.wait_for(lambda: len(responder.turns) == 2)
        assert deltas() <= 3  # nothing more of the first reply; at most the first chunk of "Sorry."
        assert [(line.role, line.text) for line in responder.turns[1].lines[1:]] == [
            ("assistant", "one two"),
            ("user", "what time is it"),
        ]


# --- delegation ---------------------------------------------------------------------------------


async def test_responses_delegation_round_trip(make: Make, voice: ToneVoice) -> None:
    call = CallFunction(name="start_agent_task", arguments='{"task": "fix it"}', call_id="call_1")
    rogue = CallFunction(name="rm_everything", arguments="{}", call_id="call_2")

    def follow_up(turn: LiveTurn) -> str:
        result = turn.last_tool_result
        assert turn.source == "backend" and result is not None
        return f"Started: {result.text}."

    server = make([call, follow_up, rogue])
    async with server, client(server).live.connect() as connection:
        reader, started_event = await started(connection, delegation=RESPONSES)
        assert started_event.session.delegation.responses.tools[0].name == "start_agent_task"
        session = await server.session(0)
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        events = await reader.until(nested("response.output_item.done"))
        created = next(e for e in events if isinstance(e, DelegationCreatedEvent))
        delegation = created.delegation
        assert (delegation.target, delegation.type) == ("responses", "delegation")
        assert delegation.response_id == session.backend.runs[0].id and created.offset_ms >= 600
        stream = [e for e in events if isinstance(e, ResponseEvent)]
        assert [e.event["type"] for e in stream] == [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ]
        assert {e.delegation_id for e in stream} == {delegation.id}
        item = stream[-1].event["item"]
        assert {k: item[k] for k in ("type", "call_id", "name", "arguments", "status")} == {
            "type": "function_call",
            "call_id": "call_1",
            "name": "start_agent_task",
            "arguments": '{"task": "fix it"}',
            "status": "completed",
        }

        await connection.session.instructions.append(content="Note.", delegation_id=delegation.id)
        assert (await reader.until("error"))[-1].error.param == "delegation_id"  # non-null: refused here
        await connection.response.create(event_id="evt_early")
        assert (await reader.until("error"))[-1].error.code == "tool_output_missing"
        await connection.response.item.create(
            item={"type": "function_call_output", "call_id": "call_1", "output": "task 7"}
        )
        await connection.response.create()
        events = await reader.until(nested("response.completed"))
        texts = [e.event["delta"] for e in events if nested("response.output_text.delta")(e)]
        assert texts == ["Started: task 7."]
        await session.wait_for(lambda: bool(session.spoken) and session.spoken[0].status == "completed")
        events = await reader.caught_up(session)
        assert transcript(events, "session.output_transcript.delta") == "Started: task 7."
        assert audio(events) == voice.pcm_for("Started: task 7.")
        assert session.spoken[0].source == "backend"

        # A function the session does not declare is still called: the client must refuse it.
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        done = (await reader.until(nested("response.output_item.done")))[-1]
        assert done.event["item"]["name"] == "rm_everything"
        assert_round_trip(session, connection)


async def test_client_delegation_speaks_the_commentary_for_it(make: Make, clock: FakeClock) -> None:
    server = make([Delegate(acknowledgement="One moment.")])
    async with server, client(server).live.connect() as connection:
        client_delegation = {"type": "client", "acknowledgement_delay_ms": 400}
        reader, _ = await started(connection, delegation=client_delegation)
        session = await server.session(0)
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        created = (await reader.until("session.delegation.created"))[-1]
        assert created.delegation.target == "client" and created.delegation.response_id is None
        assert (
            "response_id" not in json.loads(dump_server_event(session.sent_of(created.type)[0]))["delegation"]
        )

        await connection.session.commentary.append(
            content="Task seven is running.", delegation_id="deleg_nope"
        )
        assert (await reader.until("error"))[-1].error.param == "delegation_id"
        await connection.session.commentary.append(
            content="Task seven is running.", delegation_id=created.delegation.id, event_id="evt_c"
        )
        appended = (await reader.until("session.commentary.appended"))[-1]
        assert appended.client_event_id == "evt_c" and appended.start_ms == appended.end_ms
        await session.wait_for(lambda: bool(session.spoken) and session.spoken[0].status == "completed")
        clock.advance(1.0)  # the acknowledgement's delay: it was cancelled by the commentary
        events = await reader.caught_up(session)
        assert transcript(events, "session.output_transcript.delta") == "Task seven is running."
        assert [s.source for s in session.spoken] == ["commentary"]
        assert session.delegations.records[created.delegation.id].commentary == ["Task seven is running."]
        assert session.appended[-1].delegation_id == created.delegation.id
        assert_round_trip(session, connection)


# --- faults and endings --------------------------------------------------------------------------


async def test_a_planned_drop_closes_the_socket_without_a_frame(make: Make) -> None:
    faults = Faults()
    faults.drop_before("session.output_audio.delta", nth=2)
    server = make(["one two three"], faults=faults)
    async with server, client(server).live.connect() as connection:
        reader, _ = await started(connection)
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        with pytest.raises(ConnectionClosedError) as closed:
            await reader.until("session.closed")
        assert closed.value.rcvd is None  # no close frame: a network failure (1006)
        session = await server.session(0)
        await session.closed.wait()
        assert len(reader.of("session.output_audio.delta")) == 1 and faults.drops == []


async def test_close_and_expiry_end_the_session_with_session_closed(make: Make, clock: FakeClock) -> None:
    server = make(["Hi."], session_s=60.0)
    async with server:
        async with client(server).live.connect() as connection:
            reader, _ = await started(connection)
            await connection.session.close(event_id="evt_bye")
            closed = (await reader.until("session.closed"))[-1]
            assert isinstance(closed, SessionClosedEvent)
            assert (closed.reason, closed.client_event_id, closed.session.status) == (
                "close_requested",
                "evt_bye",
                "active",
            )
            assert [event async for event in connection] == []  # a clean close ends the iterator
        async with client(server).live.connect() as connection:
            reader, _ = await started(connection)
            clock.advance(60.0)
            expired = (await reader.until("session.closed"))[-1]
            assert (expired.reason, expired.usage.seconds) == ("expired", 60.0)
        assert [s.close_reason for s in server.sessions] == ["close_requested", "expired"]


async def test_a_fixture_stops_the_voice_and_blocks_appends_while_it_plays(
    make: Make, clock: FakeClock
) -> None:
    server = make(["one two three"], pacing=Pacing(chunk_ms=100, realtime_factor=1.0))
    async with server, client(server).live.connect() as connection:
        reader, _ = await started(connection)
        session = await server.session(0)
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        await session.wait_for(lambda: len(session.sent_of("session.output_audio.delta")) == 1)
        await connection.session.output_audio.fixture.play(audio=b64(silence(200)))
        await reader.until("session.output_audio.fixture.playing")
        await session.wait_for(lambda: session.spoken[0].status == "stopped")
        assert session.spoken[0].stop_reason == "fixture"
        await connection.session.thinking.append(content="hm", delegation_id=None)
        assert (await reader.until("error"))[-1].error.code == "fixture_active"
        clock.advance(0.2)
        await reader.until("session.output_audio.fixture.played")
        await connection.session.thinking.append(content="hm", delegation_id=None)
        await reader.until("session.thinking.appended")
        assert len(session.sent_of("session.output_audio.delta")) == 1


async def test_a_planned_failure_is_an_error_and_a_planned_close_follows_the_reply(make: Make) -> None:
    faults = Faults(close_after_responses=1, close_code=1011)
    faults.fail_next_response()
    server = make(["Hi there."], faults=faults)
    async with server, client(server).live.connect() as connection:
        reader, _ = await started(connection)
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        failed = (await reader.until("error"))[-1]
        assert (failed.error.type, failed.error.code) == ("server_error", "server_error")
        await connection.session.input_audio.append(audio=b64(loud(300) + silence(600)))
        with pytest.raises(ConnectionClosedError) as closed:
            await reader.until("session.closed")
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        assert transcript(reader.events, "session.output_transcript.delta") == "Hi there."
        session = await server.session(0)
        assert [turn.failure is not None for turn in session.dialogue.turns] == [True, False]


async def test_a_16_khz_session_hears_and_speaks_16_khz(make: Make, voice: ToneVoice) -> None:
    server = make(["one two"])
    async with server, client(server).live.connect() as connection:
        reader, event = await started(connection, audio={"format": {"type": "audio/pcm", "rate": 16000}})
        assert event.session.audio.format.rate == 16000
        session = await server.session(0)
        await connection.session.input_audio.append(audio=b64(b"\x00\x40" * 16 * 300 + bytes(32 * 600)))
        await session.wait_for(lambda: bool(session.spoken) and session.spoken[0].status == "completed")
        events = await reader.caught_up(session)
        assert len(audio(events)) == len(voice.pcm_for("one two")) * 2 // 3  # 400 ms at 16 kHz
        heard = [e for e in events if isinstance(e, InputTranscriptDeltaEvent)]
        assert heard[0].start_ms == 0 and heard[-1].end_ms == 300
        await session.send_usage(usage_ratio=0.25)
        usage = (await reader.until("session.usage.updated"))[-1]
        assert usage.context_window.usage_ratio == 0.25
        assert assert_round_trip(session, connection) >= {
            "session.usage.updated",
            "session.output_audio.delta",
        }
