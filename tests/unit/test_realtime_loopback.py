"""The loopback realtime server against the real ``openai`` SDK client (``client.realtime.connect``).

No model is loaded: a scripted listener stands in for STT, a tone per word for TTS, a scripted
responder for the model. Races are held with a fake clock (the server's pacing waits on it), never
with sleeps.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import (
    RealtimeConversationItemFunctionCall,
    RealtimeErrorEvent,
    ResponseDoneEvent,
    SessionUpdateEvent,
)

from openab_voice.clock import FakeClock
from openab_voice.testing.realtime import (
    CallFunction,
    Pacing,
    ScriptedListener,
    ToneVoice,
    Turn,
)
from tests.fakes.realtime_loopback import MODEL, Factory, client, loopback_servers, until

pytestmark = pytest.mark.timeout(20)

TOOLS = [
    {
        "type": "function",
        "name": "start_agent_task",
        "description": "Start a coding task",
        "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
    }
]


def pcm(ms: int) -> bytes:
    """``ms`` of 24 kHz mono PCM16 (a ramp, so it is not silence)."""
    n = ms * 24
    return bytes((i * 7) & 0xFF for i in range(2 * n))


def audio_of(events: list[Any]) -> bytes:
    return b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")


def transcript_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_audio_transcript.delta")


@pytest.fixture
def voice() -> ToneVoice:
    return ToneVoice(ms_per_word=200)


@pytest.fixture
def listener() -> ScriptedListener:
    return ScriptedListener("what time is it")


@pytest.fixture
async def make_server(voice: ToneVoice, listener: ScriptedListener) -> AsyncIterator[Factory]:
    async with loopback_servers(lambda: listener, lambda: voice) as make:
        yield make


async def manual_turns(connection: AsyncRealtimeConnection) -> None:
    """What a core-authoritative client sends first: turn detection off, and waits for the echo."""
    await until(connection, "session.created")
    await connection.session.update(
        session={"type": "realtime", "audio": {"input": {"turn_detection": None}}, "tools": TOOLS}  # type: ignore[typeddict-item]
    )
    await until(connection, "session.updated")


async def test_session_update_round_trip(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        created = (await until(connection, "session.created"))[-1]
        assert created.session.audio.input.turn_detection.type == "server_vad"
        assert created.session.audio.output.format.rate == 24000
        await connection.session.update(
            session={  # type: ignore[typeddict-item]
                "type": "realtime",
                "instructions": "Be brief.",
                "audio": {"input": {"turn_detection": None}},
                "tools": TOOLS,
            }
        )
        updated = (await until(connection, "session.updated"))[-1]
        session = server.sessions[0]
        assert updated.session.audio.input.turn_detection is None
        assert updated.session.instructions == "Be brief."
        assert updated.session.tools[0].name == "start_agent_task"
        assert updated.session.audio.input.format.type == "audio/pcm"  # unchanged fields stay
        assert session.config.audio is not None and session.config.audio.input is not None
        assert session.config.audio.input.turn_detection is None
        assert isinstance(session.client_events[0], SessionUpdateEvent)


async def test_commit_and_response_stream_the_synthesized_audio(
    make_server: Factory, voice: ToneVoice, listener: ScriptedListener
) -> None:
    answer = "It is noon. Time for lunch!"
    async with make_server([answer]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        spoken = pcm(300)
        await connection.input_audio_buffer.append(audio=base64.b64encode(spoken[:4000]).decode())
        await connection.input_audio_buffer.append(audio=base64.b64encode(spoken[4000:]).decode())
        await connection.input_audio_buffer.commit()
        committed = await until(connection, "conversation.item.done")
        assert [e.type for e in committed] == [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done",
        ]
        await connection.response.create()
        events = await until(connection, "response.done")

        assert audio_of(events) == voice.pcm_for("It is noon.") + voice.pcm_for("Time for lunch!")
        assert transcript_of(events) == answer
        assert events[-1].response.status == "completed"
        assert events[-1].response.output[0].content[0].transcript == answer
        assert listener.calls == [spoken]
        session = server.sessions[0]
        assert len(session.responses) == 1  # turn detection off: only the response asked for
        turn = session.responses[0].turn
        assert turn is not None and turn.last_user_text == "what time is it"
        assert [type(i).__name__ for i in session.conversation.items] == [
            "RealtimeConversationItemUserMessage",
            "RealtimeConversationItemAssistantMessage",
        ]


async def test_audio_is_paced_on_the_clock_after_the_first_audio_latency(make_server: Factory) -> None:
    clock = FakeClock()  # binary fractions of a second throughout, so the deadlines add up exactly
    pacing = Pacing(first_audio_latency_s=0.25, chunk_ms=125, realtime_factor=1.0)
    server = make_server(["one two"], clock=clock, pacing=pacing)  # 400 ms of audio: 4 deltas
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        session = server.sessions[0]

        def deltas() -> int:
            return sum(1 for e in session.sent if e.type == "response.output_audio.delta")

        await connection.response.create()
        await session.wait_for(lambda: any(e.type == "response.content_part.added" for e in session.sent))
        clock.advance(0.125)
        assert deltas() == 0
        clock.advance(0.125)
        await session.wait_for(lambda: deltas() == 1)
        for sent in (2, 3, 4):  # one chunk per 125 ms (a bigger step would read as an underrun)
            clock.advance(0.125)
            await session.wait_for(lambda: deltas() == sent)  # noqa: B023
        events = await until(connection, "response.done")
        assert len(audio_of(events)) == 400 * 24 * 2
        assert session.responses[0].first_audio_at == 1000.25
        assert session.client_events_at[-1] == 1000.0  # the response.create, on the same clock


async def test_cancel_mid_response_ends_it_cancelled_with_the_audio_sent(make_server: Factory) -> None:
    clock = FakeClock()  # never advanced: the second chunk waits until the cancel arrives
    long_answer = " ".join(["word"] * 20)
    server = make_server([long_answer], clock=clock, pacing=Pacing(realtime_factor=1.0))
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        await connection.response.create()
        head = await until(connection, "response.output_audio.delta")
        await connection.response.cancel()
        tail = await until(connection, "response.done")
        done = tail[-1]
        assert done.response.status == "cancelled"
        assert done.response.status_details.reason == "client_cancelled"
        assert len(audio_of(head + tail)) == 100 * 24 * 2
        record = server.sessions[0].responses[0]
        assert record.status == "cancelled"
        assert record.audio_ms_sent == pytest.approx(100.0)
        item = server.sessions[0].conversation.held[-1]
        assert item.item.status == "incomplete" and len(item.audio) == 100 * 24 * 2
        await connection.response.cancel()  # nothing active any more
        error = (await until(connection, "error"))[-1]
        assert error.error.code == "response_cancel_not_active"


async def until_all(connection: AsyncRealtimeConnection, *kinds: str) -> list[Any]:
    """Every server event until one of each of ``kinds`` came (or an ``error``)."""
    events: list[Any] = []
    waiting = set(kinds)
    async for event in connection:
        events.append(event)
        waiting.discard(event.type)
        if not waiting or event.type == "error":
            return events
    raise AssertionError(f"connection closed before {sorted(waiting)}")


@pytest.mark.parametrize("order", ["cancel_then_truncate", "truncate_then_cancel"])
async def test_a_truncate_sent_with_the_cancel_keeps_exactly_the_audio_played(
    make_server: Factory, order: str
) -> None:
    """A barge-in: the client cancels the response and truncates the item it was still streaming."""
    clock = FakeClock()  # advanced by hand: the response streams 500 ms, then waits for the cancel
    answer = "aa bb cc dd ee ff gg hh"  # eight words of 200 ms each: 1,600 ms
    server = make_server([answer], clock=clock, pacing=Pacing(chunk_ms=125, realtime_factor=1.0))
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        session = server.sessions[0]

        def deltas() -> int:
            return sum(1 for e in session.sent if e.type == "response.output_audio.delta")

        await connection.response.create()
        await session.wait_for(lambda: deltas() == 1)
        for sent in (2, 3, 4):
            clock.advance(0.125)
            await session.wait_for(lambda: deltas() == sent)  # noqa: B023
        item_id = session.responses[0].item_id
        assert item_id is not None
        if order == "cancel_then_truncate":
            await connection.response.cancel()
            await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=450)
        else:  # the item is certainly still streaming; what it streams after the cut is not kept
            await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=450)
            await session.wait_for(lambda: bool(session.conversation.truncations))
            clock.advance(0.125)
            await session.wait_for(lambda: deltas() == 5)
            await connection.response.cancel()
        events = await until_all(connection, "conversation.item.truncated", "response.done")

        assert [e for e in events if e.type == "error"] == [] and session.errors_sent == []
        truncated = next(e for e in events if e.type == "conversation.item.truncated")
        assert (truncated.item_id, truncated.content_index, truncated.audio_end_ms) == (item_id, 0, 450)
        (cut,) = session.conversation.truncations
        assert (cut.audio_ms_before, cut.transcript_before) == (500.0, "aa bb cc")
        assert cut.transcript_kept == "aa bb"  # the words whose audio ended by 450 ms
        done = next(e for e in events if e.type == "response.done")
        assert done.response.status == "cancelled"
        assert [(o.id, o.status, o.content[0].transcript) for o in done.response.output] == [
            (item_id, "incomplete", "aa bb")
        ]
        held = session.conversation.get(item_id)
        assert held is not None and held.item.status == "incomplete"
        assert held.audio == audio_of(session.sent)[: 450 * 24 * 2]  # the first 450 ms sent, no more
        assert held.item.content[0].transcript == "aa bb"  # type: ignore[union-attr]


async def test_truncate_keeps_only_the_audio_and_words_played(make_server: Factory) -> None:
    answer = "aa bb cc dd ee ff gg hh"  # eight words of 200 ms each: 1,600 ms
    replies: list[Any] = [answer, lambda turn: f"heard {len(turn.lines)}"]
    async with make_server(replies) as server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        await connection.response.create()
        events = await until(connection, "response.done")
        item_id = events[-1].response.output[0].id
        await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=900)
        truncated = (await until(connection, "conversation.item.truncated"))[-1]
        assert (truncated.item_id, truncated.audio_end_ms) == (item_id, 900)

        session = server.sessions[0]
        (cut,) = session.conversation.truncations
        assert cut.transcript_before == answer
        assert cut.transcript_kept == "aa bb cc dd"
        held = session.conversation.get(item_id)
        assert held is not None and len(held.audio) == 900 * 24 * 2
        assert held.item.content[0].transcript == "aa bb cc dd"  # type: ignore[union-attr]

        await connection.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=5000)
        error = (await until(connection, "error"))[-1]
        assert error.error.code == "invalid_value" and error.error.param == "audio_end_ms"

        await connection.response.create()
        await until(connection, "response.done")
        turn = session.responses[1].turn
        assert turn is not None and [line.text for line in turn.lines if line.role == "assistant"] == [
            "aa bb cc dd"
        ]


async def test_function_call_round_trip(make_server: Factory) -> None:
    def after_tool(turn: Turn) -> str:
        result = turn.last_tool_result
        assert result is not None
        return f"The task is {result.text}."

    call = CallFunction(name="start_agent_task", arguments='{"task": "add a test"}', call_id="call_1")
    async with (
        make_server([call, after_tool]) as server,
        client(server).realtime.connect(model=MODEL) as connection,
    ):
        await manual_turns(connection)
        await connection.response.create()
        events = await until(connection, "response.done")
        args = next(e for e in events if e.type == "response.function_call_arguments.done")
        assert (args.name, args.arguments, args.call_id) == (
            "start_agent_task",
            '{"task": "add a test"}',
            "call_1",
        )
        output = events[-1].response.output
        assert isinstance(output[0], RealtimeConversationItemFunctionCall) and output[0].status == "completed"
        assert audio_of(events) == b""

        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": "call_1", "output": "proposed"}
        )
        await until(connection, "conversation.item.done")
        await connection.response.create()
        events = await until(connection, "response.done")
        assert transcript_of(events) == "The task is proposed."
        turn = server.sessions[0].responses[1].turn
        assert turn is not None
        assert [line.role for line in turn.lines] == ["tool_call", "tool_result"]
        assert turn.tools[0].name == "start_agent_task"

        await connection.conversation.item.create(
            item={"type": "function_call_output", "call_id": "call_unknown", "output": "x"}
        )
        error = (await until(connection, "error"))[-1]
        assert error.error.param == "item.call_id"


async def test_malformed_client_events_get_error_events_and_are_counted(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await until(connection, "session.created")
        sent = [
            ("not json", "invalid_json", None),
            ('{"type": "session.explode", "event_id": "evt_1"}', "invalid_value", "type"),
            (
                '{"type": "conversation.item.truncate", "item_id": "x", "content_index": 0}',
                "missing_required_parameter",
                "audio_end_ms",
            ),
            (
                '{"type": "session.update", "session": {"type": "realtime", "volume": 11}}',
                "unknown_parameter",
                "session.volume",
            ),
            ('{"type": "input_audio_buffer.append", "audio": 5}', "invalid_type", "audio"),
        ]
        errors = []
        for raw, _, _ in sent:
            await connection.send_raw(raw)
            errors.append((await until(connection, "error"))[-1])
        assert [(e.error.code, e.error.param) for e in errors] == [(code, param) for _, code, param in sent]
        assert all(e.error.type == "invalid_request_error" for e in errors)
        assert errors[1].error.event_id == "evt_1"
        session = server.sessions[0]
        assert len(session.rejected) == len(sent)
        assert session.client_events == []
        assert len(session.errors_sent) == len(sent)


async def test_protocol_refusals(make_server: Factory) -> None:
    clock = FakeClock()
    server = make_server(["one two three"], clock=clock, pacing=Pacing())
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        await connection.input_audio_buffer.append(audio=base64.b64encode(pcm(50)).decode())
        await connection.input_audio_buffer.commit()
        error = (await until(connection, "error"))[-1]
        assert error.error.code == "input_audio_buffer_commit_empty"
        await connection.input_audio_buffer.clear()
        await until(connection, "input_audio_buffer.cleared")
        assert server.sessions[0].input_audio == bytearray()

        await connection.response.create()
        await until(connection, "response.output_audio.delta")  # held by the fake clock
        await connection.response.create()
        error = (await until(connection, "error"))[-1]
        assert error.error.code == "conversation_already_has_active_response"
        await connection.session.update(session={"type": "realtime", "audio": {"output": {"voice": "cedar"}}})
        await connection.response.cancel()
        await until(connection, "response.done")
        await connection.session.update(session={"type": "realtime", "audio": {"output": {"voice": "ash"}}})
        error = (await until(connection, "error"))[-1]
        assert error.error.code == "cannot_update_voice"


async def test_text_items_and_text_output(make_server: Factory) -> None:
    server = make_server([lambda turn: f"echo {turn.last_user_text}"])
    async with server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "alice: hello"}],
            }
        )
        added = (await until(connection, "conversation.item.done"))[0]
        assert added.type == "conversation.item.added" and added.item.id
        await connection.response.create(response={"output_modalities": ["text"]})
        events = await until(connection, "response.done")
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "echo alice: hello"
        assert audio_of(events) == b""
        user_id = added.item.id
        await connection.conversation.item.retrieve(item_id=user_id)
        retrieved = (await until(connection, "conversation.item.retrieved"))[-1]
        assert retrieved.item.content[0].text == "alice: hello"
        await connection.conversation.item.delete(item_id=user_id)
        await until(connection, "conversation.item.deleted")
        assert all(item.id != user_id for item in server.sessions[0].conversation.items)


async def test_unknown_model_is_an_error_at_start_up(make_server: Factory) -> None:
    from websockets.exceptions import ConnectionClosedError

    async with (
        make_server(["Hi."]) as server,
        client(server).realtime.connect(model="gpt-nonexistent") as connection,
    ):
        event = await connection.recv()
        assert isinstance(event, RealtimeErrorEvent) and event.error.code == "model_not_found"
        with pytest.raises(ConnectionClosedError) as closed:
            await connection.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert server.sessions == []


async def test_response_done_is_the_sdk_model(make_server: Factory) -> None:
    async with make_server(["Fine."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await manual_turns(connection)
        await connection.response.create()
        events = await until(connection, "response.done")
        assert isinstance(events[-1], ResponseDoneEvent)
        assert events[-1].response.usage is not None


async def test_out_of_band_responses_stay_out_of_the_conversation(make_server: Factory) -> None:
    async with (
        make_server(["A summary."]) as server,
        client(server).realtime.connect(model=MODEL) as connection,
    ):
        await manual_turns(connection)
        await connection.response.create(response={"conversation": "none", "instructions": "Summarize."})
        events = await until(connection, "response.done")
        assert not any(e.type.startswith("conversation.item") for e in events)
        assert events[-1].response.conversation_id is None
        assert transcript_of(events) == "A summary."
        session = server.sessions[0]
        assert session.conversation.items == []
        turn = session.responses[0].turn
        assert turn is not None and turn.instructions == "Summarize."


async def test_formats_other_than_pcm_are_refused(make_server: Factory) -> None:
    async with make_server(["Hi."]) as server, client(server).realtime.connect(model=MODEL) as connection:
        await until(connection, "session.created")
        await connection.session.update(
            session={"type": "realtime", "audio": {"output": {"format": {"type": "audio/pcmu"}}}}
        )
        error = (await until(connection, "error"))[-1]
        assert error.error.param == "session.audio.output.format.type"
        fmt = server.sessions[0].config.audio.output.format  # type: ignore[union-attr]
        assert fmt is not None and fmt.type == "audio/pcm"  # unchanged
