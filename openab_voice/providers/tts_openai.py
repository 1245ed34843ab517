"""TTS on any OpenAI-compatible ``/audio/speech`` endpoint, streamed as raw PCM.

``response_format="pcm"`` is 24 kHz mono signed 16-bit little-endian with no header, so audio can be
played while the rest of the sentence is still being generated. Each network chunk is resampled to
48 kHz by a soxr stream that lives for the whole call (microseconds per chunk: it stays on the event
loop) and duplicated to stereo for Discord. A chunk boundary can split a sample; the odd byte is
carried to the next chunk. Closing the iterator closes the HTTP response, which stops generation
on the server.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import Final

import numpy as np
import numpy.typing as npt
import openai
import soxr

from openab_voice.providers.chat_openai import openai_client
from openab_voice.providers.request_errors import request_error
from openab_voice.providers.tts import TtsCapabilities, TtsConfig

__all__ = ["OUTPUT_RATE", "PCM_RATE", "OpenAiTts", "TtsConfig", "create"]

PCM_RATE: Final = 24_000
"""The rate of OpenAI's ``pcm`` response format."""
OUTPUT_RATE: Final = 48_000
PROVIDER: Final = "openai"


def _transport_errors() -> tuple[type[Exception], ...]:
    """Errors a response body can raise while streaming.

    The openai client wraps failures of the request itself, but reading the body goes straight to
    its HTTP library (``httpx`` in openai 1.x, ``httpx2`` in 3.x), whose errors are not wrapped.
    """
    errors: list[type[Exception]] = [openai.APIError]
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).HTTPError)
        except ImportError:
            continue
    return tuple(errors)


_ERRORS: Final = _transport_errors()


class OpenAiTts:
    """:class:`~openab_voice.providers.tts.TextToSpeech` over ``audio.speech`` streaming.

    Args:
        config: server, model, voice and speed.
        client: an existing client (tests, connection sharing); built from ``config`` when None.
    """

    def __init__(self, config: TtsConfig, *, client: openai.AsyncOpenAI | None = None) -> None:
        self._config = config
        self._client = client or openai_client(config.base_url, config.api_key, config.timeout_s, 0)
        self._owns_client = client is None
        self._capabilities = TtsCapabilities(
            name=PROVIDER, streaming=True, voice=config.voice, native_rate=PCM_RATE
        )

    @property
    def capabilities(self) -> TtsCapabilities:
        return self._capabilities

    async def synthesize(self, text: str) -> AsyncIterator[bytes]:
        """Yield 48 kHz stereo s16le chunks for ``text`` as the server streams them.

        Raises:
            ProviderRequestFailed: retryable failure (connection, timeout, 429, 5xx, broken body).
            ProviderRequestRejected: the server refused the request.
        """
        if not text.strip():
            return
        cfg = self._config
        resampler = soxr.ResampleStream(PCM_RATE, OUTPUT_RATE, 1, dtype="int16")
        carry = b""
        try:
            async with self._client.audio.speech.with_streaming_response.create(
                model=cfg.model,
                voice=cfg.voice,
                input=text,
                response_format="pcm",
                speed=cfg.speed,
                instructions=cfg.instructions or openai.omit,
            ) as response:
                async for data in response.iter_bytes():
                    data = carry + data
                    whole = len(data) - len(data) % 2
                    carry = data[whole:]
                    out = resampler.resample_chunk(np.frombuffer(data[:whole], dtype="<i2"))
                    if out.size:
                        yield _stereo(out)
        except _ERRORS as exc:
            raise request_error("tts", PROVIDER, exc) from exc
        tail = resampler.resample_chunk(np.zeros(0, dtype=np.int16), last=True)
        if tail.size:
            yield _stereo(tail)

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it. Idempotent."""
        if self._owns_client:
            await self._client.close()


def _stereo(mono: npt.NDArray[np.int16]) -> bytes:
    return np.repeat(mono.astype("<i2", copy=False), 2).tobytes()


def create(config: TtsConfig) -> OpenAiTts:
    """Registry factory (no network traffic until the first sentence)."""
    return OpenAiTts(config)
