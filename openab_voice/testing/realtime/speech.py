"""The loopback server's ears and voice: a :class:`Listener` (STT) and a :class:`Voice` (TTS).

Both work in the session's format, 24 kHz mono PCM16. The local ones wrap the project's providers
and load them lazily, on first use and off the event loop, so a server that is never asked to hear
or speak loads no model: :class:`WhisperListener` (faster-whisper with the packaged tiny.en weights,
``openab-voice[audio]``) and :class:`PiperVoice` (Piper with the packaged voice,
``openab-voice[tts]``). :class:`ScriptedListener` and :class:`ToneVoice` need no model, for unit
tests.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import soxr

from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.stt.base import SpeechToText, SttConfig, stt_registry
from openab_voice.testing.realtime.session_config import PCM_RATE

__all__ = ["Listener", "PiperVoice", "ScriptedListener", "ToneVoice", "Voice", "WhisperListener"]

_STT_RATE = 16_000
_TTS_RATE = 48_000


class Listener(Protocol):
    """Transcribes one committed user turn (24 kHz mono PCM16)."""

    async def transcribe(self, pcm: bytes) -> str: ...

    async def aclose(self) -> None: ...


class Voice(Protocol):
    """Synthesizes one sentence into 24 kHz mono PCM16."""

    async def synthesize(self, text: str) -> bytes: ...

    async def aclose(self) -> None: ...


class WhisperListener:
    """Local STT through the project's faster-whisper provider.

    Args:
        stt: an already loaded provider (tests share one); else created from ``config`` on first use.
        config: provider settings (the packaged tiny.en by default).
    """

    def __init__(self, stt: SpeechToText | None = None, *, config: SttConfig | None = None) -> None:
        self._stt = stt
        self._owned = stt is None
        self._config = config or SttConfig()
        self._loading = asyncio.Lock()

    async def _provider(self) -> SpeechToText:
        async with self._loading:
            if self._stt is None:
                self._stt = await asyncio.to_thread(stt_registry().create, "faster-whisper", self._config)
            return self._stt

    async def transcribe(self, pcm: bytes) -> str:
        if not pcm:
            return ""
        stt = await self._provider()
        samples = np.frombuffer(pcm, dtype="<i2")
        mono16 = np.asarray(soxr.resample(samples, PCM_RATE, _STT_RATE), dtype=np.int16)
        hypothesis = await asyncio.to_thread(stt.transcribe, mono16, final=True)
        return hypothesis.text.strip()

    async def aclose(self) -> None:
        stt, self._stt = self._stt, None
        if stt is not None and self._owned:
            await asyncio.to_thread(stt.close)


class PiperVoice:
    """Local TTS through the project's Piper provider, brought from 48 kHz stereo to 24 kHz mono.

    Args:
        tts: an already loaded provider (tests share one); else created from ``config`` on first use.
        config: provider settings (the packaged voice by default).
    """

    def __init__(self, tts: TextToSpeech | None = None, *, config: TtsConfig | None = None) -> None:
        self._tts = tts
        self._owned = tts is None
        self._config = config or TtsConfig()
        self._loading = asyncio.Lock()

    async def _provider(self) -> TextToSpeech:
        async with self._loading:
            if self._tts is None:
                self._tts = await asyncio.to_thread(tts_registry().create, "piper", self._config)
            return self._tts

    async def synthesize(self, text: str) -> bytes:
        tts = await self._provider()
        chunks = [chunk async for chunk in tts.synthesize(text)]
        stereo = np.frombuffer(b"".join(chunks), dtype="<i2")
        if not stereo.size:
            return b""
        left = stereo[0::2]  # Piper's stereo is the mono signal duplicated
        mono: Any = soxr.resample(left, _TTS_RATE, PCM_RATE)
        return np.asarray(mono, dtype="<i2").tobytes()

    async def aclose(self) -> None:
        tts, self._tts = self._tts, None
        if tts is not None and self._owned:
            await tts.aclose()


class ScriptedListener:
    """Hears what it is told: fixed text, or a function of the audio. Records every call."""

    def __init__(self, heard: str | Callable[[bytes], str] = "") -> None:
        self._heard = heard
        self.calls: list[bytes] = []

    async def transcribe(self, pcm: bytes) -> str:
        self.calls.append(pcm)
        return self._heard(pcm) if callable(self._heard) else self._heard

    async def aclose(self) -> None:
        return None


class ToneVoice:
    """A deterministic stand-in for TTS: ``ms_per_word`` of a 440 Hz tone per word.

    The PCM length is exact (``words * ms_per_word`` ms at 24 kHz), so tests can check the audio
    deltas add up to it.
    """

    def __init__(self, *, ms_per_word: int = 200, amplitude: int = 8000) -> None:
        self.ms_per_word = ms_per_word
        self._amplitude = amplitude
        self.sentences: list[str] = []

    def pcm_for(self, text: str) -> bytes:
        """The audio this voice produces for ``text``."""
        n = len(text.split()) * self.ms_per_word * PCM_RATE // 1000
        t = np.arange(n) / PCM_RATE
        wave = self._amplitude * np.sin(2 * math.pi * 440.0 * t)
        return np.asarray(wave, dtype="<i2").tobytes()

    async def synthesize(self, text: str) -> bytes:
        self.sentences.append(text)
        return self.pcm_for(text)

    async def aclose(self) -> None:
        return None
