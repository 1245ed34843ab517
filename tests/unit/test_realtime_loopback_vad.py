"""What the loopback realtime server does with user audio by itself: server turn detection when the
client leaves it on (the API's default), nothing when it sends ``turn_detection: null``, and input
transcription when asked for. Through the real ``openai`` SDK client; no model loaded."""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import openai
import pytest
from openai.resources.realtime.realtime import AsyncRealtimeConnection

from openab_voice.clock import FakeClock
from openab_voice.testing.realtime import (
    LoopbackRealtimeServer,
    Pacing,
    ScriptedListener,
    ToneVoice,
)
from tests.fakes.realtime_loopback import KEY, MODEL, Factory, loopback_servers, until

pytestmark = pytest.mark.timeout(20)


def tone(ms: int) -> bytes:
    t = np.arange(ms * 24) / 24_000
    return np.asarray(8000 * np.sin(2 * math.pi * 440 * t), dtype="<i2").tobytes()


def silence(ms: int) -> bytes:
    return bytes(ms * 48)


@pytest.fixture
async def make_server() -> AsyncIterator[Factory]:
    async with loopback_servers(lambda: ScriptedListener("turn the lights on"), ToneVoice) as make:
        yield functools.partial(make, ["Yes?"])


async def append(connection: AsyncRealtimeConnection, pcm: bytes) -> None:
    await connection.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())


def connect(server: LoopbackRealtimeServer) -> Any:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY).realtime.connect(model=MODEL)


async def test_with_turn_detection_left_on_the_server_answers_by_itself(make_server: Factory) -> None:
    server = make_server()
    async with server, connect(server) as connection:
        await until(connection, "session.created")
        await append(connection, tone(500) + silence(400))
        events = await until(connection, "response.done")
        kinds = [e.type for e in events]
        assert kinds[:3] == [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
        ]
        started, stopped, committed = events[:3]
        assert started.item_id == stopped.item_id == committed.item_id
        assert (started.audio_start_ms, stopped.audio_end_ms) == (0, 500)
        assert events[-1].response.status == "completed"
        assert server.sessions[0].client_events[-1].type == "input_audio_buffer.append"  # never asked


async def test_with_turn_detection_null_the_server_never_answers_by_itself(make_server: Factory) -> None:
    server = make_server()
    async with server, connect(server) as connection:
        await until(connection, "session.created")
        await connection.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        await until(connection, "session.updated")
        await append(connection, tone(500) + silence(400))
        await connection.input_audio_buffer.commit()
        # Events go out in order: anything the append caused would come before the commit's answer.
        before_commit = await until(connection, "input_audio_buffer.committed")
        assert [e.type for e in before_commit] == ["input_audio_buffer.committed"]
        await until(connection, "conversation.item.done")
        assert server.sessions[0].responses == []


async def test_speech_interrupts_the_response_in_progress(make_server: Factory) -> None:
    clock = FakeClock()  # not advanced: the response holds after its first audio chunk
    server = make_server(clock=clock, pacing=Pacing(realtime_factor=1.0))
    async with server, connect(server) as connection:
        await until(connection, "session.created")
        await connection.response.create()
        await until(connection, "response.output_audio.delta")
        await append(connection, tone(100))
        events = await until(connection, "response.done")
        assert events[0].type == "input_audio_buffer.speech_started"
        assert events[-1].response.status == "cancelled"
        assert events[-1].response.status_details.reason == "turn_detected"


async def test_input_transcription_when_the_session_asks_for_it(make_server: Factory) -> None:
    server = make_server()
    async with server, connect(server) as connection:
        await until(connection, "session.created")
        await connection.session.update(
            session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": None, "transcription": {"model": "whisper-1"}}},
            }
        )
        await until(connection, "session.updated")
        await append(connection, tone(300))
        await connection.input_audio_buffer.commit()
        item_id = (await until(connection, "input_audio_buffer.committed"))[-1].item_id
        completed = (await until(connection, "conversation.item.input_audio_transcription.completed"))[-1]
        assert (completed.item_id, completed.transcript) == (item_id, "turn the lights on")
        assert completed.usage.seconds == pytest.approx(0.3)
