"""The real speech models of the e2e dialogue tests, loaded once per module, and the lines their
speakers say, synthesized with the same Piper voice the bot answers in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.stt.base import SpeechToText, SttConfig, stt_registry

Voices = tuple[SpeechToText, TextToSpeech, dict[str, bytes]]


def voices_for(lines: Mapping[str, str]) -> Iterator[Voices]:
    """faster-whisper and Piper, and each of ``lines`` as Piper's PCM by its key; closed after."""
    stt = stt_registry().create("faster-whisper", SttConfig())
    tts = tts_registry().create("piper", TtsConfig())

    async def synthesize() -> dict[str, bytes]:
        return {key: b"".join([c async for c in tts.synthesize(text)]) for key, text in lines.items()}

    speech = asyncio.run(synthesize())
    yield stt, tts, speech
    asyncio.run(tts.aclose())
    stt.close()
