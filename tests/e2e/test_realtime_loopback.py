"""The loopback realtime server with its real ears and voice: a shipped speech clip goes in through the
``openai`` SDK client, the server hears it with local faster-whisper (tiny.en), answers through a
scripted responder and speaks with local Piper; the spoken answer is transcribed back to check it is
speech that says the answer. Shipped models only, nothing downloaded."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path

import numpy as np
import openai
import pytest
import soxr

from openab_voice.providers.tts import TtsConfig, tts_registry
from openab_voice.stt.base import SpeechToText, SttConfig, stt_registry
from openab_voice.testing.emulator import load_wav_48k_stereo
from openab_voice.testing.realtime import (
    LoopbackRealtimeServer,
    Pacing,
    PiperVoice,
    ScriptedResponder,
    Turn,
    WhisperListener,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

ASSETS = Path(str(resources.files("openab_voice.testing") / "assets"))
KEY = "sk-loopback-e2e"


def clip_24k(name: str) -> bytes:
    """A shipped clip as the Realtime API's input format: 24 kHz mono PCM16."""
    stereo = np.frombuffer(load_wav_48k_stereo(ASSETS / name), dtype="<i2")
    return np.asarray(soxr.resample(stereo[0::2], 48_000, 24_000), dtype="<i2").tobytes()


def answer(turn: Turn) -> str:
    return f"You said {turn.last_user_text}"


@pytest.fixture
async def served() -> AsyncIterator[tuple[LoopbackRealtimeServer, SpeechToText]]:
    stt = stt_registry().create("faster-whisper", SttConfig())
    tts = tts_registry().create("piper", TtsConfig())
    server = LoopbackRealtimeServer(
        api_key=KEY,
        responder=ScriptedResponder([answer]),
        listener=WhisperListener(stt),
        voice=PiperVoice(tts),
        pacing=Pacing(first_audio_latency_s=0.1, realtime_factor=4.0),
    )
    try:
        async with server:
            yield server, stt
    finally:
        stt.close()
        await tts.aclose()


async def test_a_spoken_question_gets_a_spoken_answer(
    served: tuple[LoopbackRealtimeServer, SpeechToText],
) -> None:
    server, stt = served
    spoken = clip_24k("alice.wav")
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY)
    async with client.realtime.connect(model="gpt-realtime") as connection:
        await connection.session.update(
            session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
        )
        chunk = 24_000 * 2 // 10  # 100 ms, as a client streams its microphone
        for start in range(0, len(spoken), chunk):
            await connection.input_audio_buffer.append(
                audio=base64.b64encode(spoken[start : start + chunk]).decode()
            )
        await connection.input_audio_buffer.commit()
        await connection.response.create()
        audio, transcript = b"", ""
        async for event in connection:
            if event.type == "response.output_audio.delta":
                audio += base64.b64decode(event.delta)
            elif event.type == "response.output_audio_transcript.delta":
                transcript += event.delta
            elif event.type == "response.done":
                assert event.response.status == "completed"
                break

    turn = server.sessions[0].responses[0].turn
    assert turn is not None
    heard = turn.last_user_text
    assert len(heard.split()) >= 3, heard  # the clip is a sentence
    assert transcript == f"You said {heard}"
    assert len(audio) / 2 / 24_000 > 1.0  # seconds of speech, not a click

    # The answer is speech that says it: local STT hears "you said" in what the server spoke.
    said = await WhisperListener(stt).transcribe(audio)
    assert "you said" in said.lower(), said
