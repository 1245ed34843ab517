"""OpenAI-compatible TTS against a fake /v1/audio/speech server on 127.0.0.1 streaming 24 kHz PCM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from openab_voice.errors import ProviderRequestFailed, ProviderRequestRejected
from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.providers.tts_openai import OpenAiTts
from tests.fakes.http import serve_post

TONE_HZ = 440.0


def _tone(seconds: float, rate: int = 24_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * TONE_HZ * t) * 12_000).astype("<i2").tobytes()


@dataclass
class FakeSpeechServer:
    """Streams a tone as raw PCM in odd-sized chunks (splitting samples), or fails, or never ends."""

    pcm: bytes = field(default_factory=lambda: _tone(1.0))
    chunk_bytes: int = 4_801
    status: int = 200
    endless: bool = False
    cut_short: bool = False  # drop the connection after the first chunk
    requests: list[dict[str, Any]] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        if self.status != 200:
            return web.json_response({"error": {"message": "scripted"}}, status=self.status)
        response = web.StreamResponse(headers={"Content-Type": "audio/pcm"})
        await response.prepare(request)
        try:
            for start in range(0, len(self.pcm), self.chunk_bytes):
                await response.write(self.pcm[start : start + self.chunk_bytes])
                if self.cut_short:
                    assert request.transport is not None
                    request.transport.close()
                    return response
            while self.endless:
                await response.write(_tone(0.1))
                await asyncio.sleep(0.01)  # real time: the endless stream is paced as a server's is
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        return response


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeSpeechServer, str]]:
    fake = FakeSpeechServer()
    async with serve_post("/audio/speech", fake.handle) as base_url:
        yield fake, base_url


@pytest.fixture
async def tts(server: tuple[FakeSpeechServer, str]) -> AsyncIterator[TextToSpeech]:
    _, base_url = server
    provider = tts_registry().create(
        "openai", TtsConfig(base_url=base_url, api_key="sk-test", model="tts-fake", voice="nova")
    )
    yield provider
    await provider.aclose()


async def test_pcm_stream_becomes_48k_stereo(server: tuple[FakeSpeechServer, str], tts: TextToSpeech) -> None:
    fake, _ = server
    chunks = [chunk async for chunk in tts.synthesize("Hello there.")]
    assert isinstance(tts, OpenAiTts)
    assert tts.capabilities.streaming and tts.capabilities.native_rate == 24_000
    assert len(chunks) > 1  # streamed, not buffered into one piece
    assert all(len(chunk) % 4 == 0 for chunk in chunks)  # whole stereo frames
    pcm = np.frombuffer(b"".join(chunks), dtype="<i2").reshape(-1, 2)
    assert np.array_equal(pcm[:, 0], pcm[:, 1])
    assert abs(len(pcm) - 48_000) <= 48  # one second in, one second out
    spectrum = np.abs(np.fft.rfft(pcm[:, 0].astype(np.float64)))
    assert abs(np.argmax(spectrum) * 48_000 / len(pcm) - TONE_HZ) < 2
    request = fake.requests[0]
    assert request["response_format"] == "pcm"
    assert (request["model"], request["voice"], request["input"]) == ("tts-fake", "nova", "Hello there.")


async def test_closing_early_closes_the_response(
    server: tuple[FakeSpeechServer, str], tts: TextToSpeech
) -> None:
    fake, _ = server
    fake.endless = True
    stream = tts.synthesize("Talk forever.")
    first = await anext(aiter(stream))
    assert first
    await stream.aclose()  # type: ignore[attr-defined]
    await asyncio.wait_for(fake.disconnected.wait(), 5)


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, ProviderRequestFailed), (429, ProviderRequestFailed), (400, ProviderRequestRejected)],
)
async def test_http_errors_are_structured(
    server: tuple[FakeSpeechServer, str], tts: TextToSpeech, status: int, error: type[Exception]
) -> None:
    fake, _ = server
    fake.status = status
    with pytest.raises(error) as caught:
        async for _ in tts.synthesize("Hello."):
            pass
    assert getattr(caught.value, "details")["status"] == status  # noqa: B009


async def test_empty_text_makes_no_request(server: tuple[FakeSpeechServer, str], tts: TextToSpeech) -> None:
    fake, _ = server
    assert [chunk async for chunk in tts.synthesize("   ")] == []
    assert fake.requests == []


async def test_connection_lost_mid_audio_is_retryable(
    server: tuple[FakeSpeechServer, str], tts: TextToSpeech
) -> None:
    fake, _ = server
    fake.cut_short = True
    with pytest.raises(ProviderRequestFailed) as caught:
        async for _ in tts.synthesize("Hello."):
            pass
    assert caught.value.retryable
