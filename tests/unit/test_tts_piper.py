"""Piper TTS with the real packaged voice: format, plausible audio, first-chunk latency, early close."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import numpy as np
import pytest

from openab_voice import priority
from openab_voice.clock import perf_ns
from openab_voice.errors import ConfigError, ProviderUnavailable
from openab_voice.providers.chat import chat_registry
from openab_voice.providers.registry import refuse
from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.providers.tts_piper import PiperTts, load_voice
from openab_voice.stt.base import stt_registry
from tests.fakes.waiting import cancel_once_started

# 3 to 15 words each, like the segmenter's output.
SENTENCES = (
    "Hello there.",
    "I can hear you now.",
    "The meeting starts at ten tomorrow.",
    "Sure, I will post the summary in the text channel.",
    "That build failed because a test timed out on the runner.",
    "Your request is waiting for the operator to confirm it in the pinned message.",
)


class CountingVoice:
    """The real Piper voice, counting its synthesis runs (one per unit: a sentence or part of one)."""

    def __init__(self, voice: Any) -> None:
        self._voice = voice
        self.config = voice.config
        self.sentences = 0

    def phonemize(self, text: str) -> list[list[str]]:
        return self._voice.phonemize(text)  # type: ignore[no-any-return]

    def phonemes_to_ids(self, phonemes: list[str]) -> list[int]:
        return self._voice.phonemes_to_ids(phonemes)  # type: ignore[no-any-return]

    def phoneme_ids_to_audio(self, ids: list[int], syn_config: Any = None) -> Any:
        self.sentences += 1
        return self._voice.phoneme_ids_to_audio(ids, syn_config)


class GatedVoice(CountingVoice):
    """Every run after the first waits for ``gate``: what arrives before it is the first unit alone."""

    def __init__(self, voice: Any) -> None:
        super().__init__(voice)
        self.gate = threading.Event()
        self.ids: list[list[int]] = []

    def phoneme_ids_to_audio(self, ids: list[int], syn_config: Any = None) -> Any:
        if self.ids and not self.gate.wait(timeout=30):
            raise TimeoutError("the test never opened the gate")
        self.ids.append(ids)
        return super().phoneme_ids_to_audio(ids, syn_config)


@pytest.fixture(scope="module")
def voice() -> Any:
    return load_voice(TtsConfig())


@pytest.fixture
async def tts(voice: Any) -> Any:
    provider = PiperTts(TtsConfig(), voice=voice)
    provider.warm_up()
    yield provider
    await provider.aclose()


def _stereo(chunks: list[bytes]) -> np.ndarray[Any, np.dtype[np.int16]]:
    return np.frombuffer(b"".join(chunks), dtype="<i2").reshape(-1, 2)


async def test_speech_is_48k_stereo_and_plausibly_long(tts: PiperTts) -> None:
    assert isinstance(tts, TextToSpeech)
    assert tts.capabilities.native_rate == 22_050 and tts.capabilities.voice == "en_US-joe-medium"
    chunks = [chunk async for chunk in tts.synthesize("The quick brown fox jumps over the lazy dog.")]
    assert all(len(chunk) % 4 == 0 for chunk in chunks)
    pcm = _stereo(chunks)
    assert np.array_equal(pcm[:, 0], pcm[:, 1])
    seconds = len(pcm) / 48_000
    assert 1.5 < seconds < 5.0, seconds  # nine words of ordinary speech
    rms = float(np.sqrt(np.mean(pcm[:, 0].astype(np.float64) ** 2)))
    assert rms > 500, rms  # speech, not silence
    # Speech energy sits below 4 kHz; a wrong rate assumption would shift it by 48/22.05.
    spectrum = np.abs(np.fft.rfft(pcm[:, 0].astype(np.float64)))
    freqs = np.fft.rfftfreq(len(pcm), 1 / 48_000)
    assert spectrum[freqs < 4_000].sum() > 0.8 * spectrum.sum()


async def test_first_chunk_latency(tts: PiperTts) -> None:
    latencies_ms: list[float] = []
    for sentence in SENTENCES:
        start = perf_ns()
        stream = tts.synthesize(sentence)
        first = await anext(aiter(stream))
        latencies_ms.append((perf_ns() - start) / 1e6)
        assert first
        async for _ in stream:
            pass
    p50 = float(np.percentile(latencies_ms, 50))
    print(
        f"piper first chunk: P50 {p50:.0f} ms, max {max(latencies_ms):.0f} ms over {len(latencies_ms)} sentences"
    )
    # Generous: measured ~80-360 ms on an idle 2-core machine; CI cores are shared.
    assert p50 < 1_500, latencies_ms


async def test_a_long_sentence_is_heard_from_its_first_words_before_the_rest_is_synthesized(
    voice: Any,
) -> None:
    gated = GatedVoice(voice)
    tts = PiperTts(TtsConfig(first_chunk_words=4), voice=gated)
    sentence = "The error comes from a timeout in the database connection pool when traffic spikes."
    phonemes = voice.phonemize(sentence)[0]
    fourth_space = [i for i, p in enumerate(phonemes) if p == " "][3]
    stream = tts.synthesize(sentence)
    first = await anext(aiter(stream))
    assert gated.ids == [voice.phonemes_to_ids(phonemes[:fourth_space])]  # "The error comes from"
    assert 0.8 < len(first) / (48_000 * 4) < 2.0  # four words of speech, not the sentence's 4-5 s
    gated.gate.set()
    rest = b"".join([chunk async for chunk in stream])
    await tts.aclose()
    assert gated.ids[1:] == [voice.phonemes_to_ids(phonemes[fourth_space + 1 :])]
    assert len(first) + len(rest) > 3.5 * 48_000 * 4


async def test_first_chunk_words_zero_synthesizes_whole_sentences(voice: Any) -> None:
    gated = GatedVoice(voice)
    gated.gate.set()
    tts = PiperTts(TtsConfig(first_chunk_words=0), voice=gated)
    sentence = "The error comes from a timeout in the database connection pool when traffic spikes."
    assert not tts.capabilities.streaming
    assert [chunk async for chunk in tts.synthesize(sentence)]
    await tts.aclose()
    assert gated.ids == [voice.phonemes_to_ids(voice.phonemize(sentence)[0])]


async def test_closing_early_stops_synthesis(voice: Any) -> None:
    counting = CountingVoice(voice)
    tts = PiperTts(TtsConfig(), voice=counting)
    text = " ".join(SENTENCES)
    stream = tts.synthesize(text)
    first = await anext(aiter(stream))
    assert first
    await stream.aclose()  # type: ignore[attr-defined]
    await tts.aclose()  # waits for the sentence in flight
    assert counting.sentences <= 3 < len(SENTENCES)  # the first, the one in flight, one of slack


async def test_cancelling_the_consumer_stops_synthesis(voice: Any) -> None:
    counting = CountingVoice(voice)
    tts = PiperTts(TtsConfig(), voice=counting)
    got_audio = asyncio.Event()

    async def play() -> None:
        async for _ in tts.synthesize(" ".join(SENTENCES)):
            got_audio.set()

    await cancel_once_started(asyncio.create_task(play()), got_audio, within_s=30)
    await tts.aclose()
    assert counting.sentences <= 3 < len(SENTENCES)  # the first, the one in flight, one of slack


async def test_empty_text_yields_nothing(tts: PiperTts) -> None:
    assert [chunk async for chunk in tts.synthesize("  ")] == []


def test_registry_names_the_extra_when_piper_is_missing() -> None:
    registry = tts_registry().with_importer(refuse({"piper"}))
    with pytest.raises(ProviderUnavailable) as caught:
        registry.create("piper", TtsConfig())
    assert caught.value.details["extra"] == "tts"
    assert caught.value.details["missing_module"] == "piper"
    with pytest.raises(ConfigError):
        tts_registry().create("espeak", TtsConfig())


def test_missing_voice_file_is_provider_unavailable(tmp_path: Any) -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        load_voice(TtsConfig(model_path=tmp_path / "absent.onnx"))
    assert caught.value.details["extra"] == "tts"


def test_speech_registries_list_the_shipped_providers() -> None:
    assert stt_registry().names() == ("faster-whisper",)
    assert tts_registry().names() == ("piper", "openai")
    assert chat_registry().names() == ("llama", "openai")
    with pytest.raises(ProviderUnavailable) as caught:
        stt_registry().with_importer(refuse({"ctranslate2"})).create("faster-whisper", None)
    assert caught.value.details["extra"] == "audio"
    with pytest.raises(ProviderUnavailable) as openai_missing:
        tts_registry().with_importer(refuse({"openai"})).create("openai", TtsConfig())
    assert openai_missing.value.details["extra"] == "openai"


def _thread_nices() -> dict[int, int]:
    """nice value of each of this process's threads (field 19 of /proc/self/task/TID/stat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        out[int(tid)] = int(fields[16])
    return out


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.isdir("/proc/self/task"),
    reason="raising a thread's priority needs CAP_SYS_NICE (CI runs as root); Linux /proc",
)
async def test_synthesis_and_its_onnxruntime_pool_run_above_normal_priority() -> None:
    main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    before = _thread_nices()
    provider = PiperTts(TtsConfig(threads=2))
    try:
        started = {tid: nice for tid, nice in _thread_nices().items() if tid not in before}
        # The worker and onnxruntime's intra-op pool thread, both started from the raised worker.
        assert len(started) >= 2
        assert set(started.values()) == {max(-20, main - priority.RESPONSE_BOOST)}
        assert b"".join([chunk async for chunk in provider.synthesize("Hello there.")])
    finally:
        await provider.aclose()
