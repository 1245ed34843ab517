"""TTS benchmark: Piper's first chunk on typical first sentences of a model's answer.

``tts_first_chunk_ms`` is the engine's figure (:mod:`~openab_voice.engine.speaking`): from the call to
``synthesize`` to its first audio chunk, here for every sentence of :data:`SENTENCES` (the dialogue
bench's answer and typical assistant first sentences of 1-17 words) over ``rounds`` rounds, with the
configured ``first_chunk_words`` and, in the same sitting, with whole sentences (``0``) and with the
split sentences' first words as a text of their own (``text_cut``: what a segmenter cut would give).
``rest_late`` counts split sentences whose rest arrived after their first unit would have finished
playing (a gap a listener hears). Target: P95 <= :data:`TARGET_IDLE_MS` idle, :data:`TARGET_LOADED_MS`
with a core busy (``--load 1``). Method and figures: docs/adr/0020-tts-first-chunk.md.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from openab_voice.bench.dialogue_clips import SENTENCES as DIALOGUE_SENTENCES
from openab_voice.bench.stats import summary
from openab_voice.clock import SystemClock
from openab_voice.providers.tts import TtsConfig
from openab_voice.providers.tts_piper import OUTPUT_RATE, PiperTts, load_voice
from openab_voice.providers.tts_piper_units import split_first_unit

__all__ = ["SENTENCES", "TARGET_IDLE_MS", "TARGET_LOADED_MS", "Timings", "report", "run"]

TARGET_IDLE_MS: Final = 150.0
TARGET_LOADED_MS: Final = 250.0
SENTENCES: Final = (
    *DIALOGUE_SENTENCES,
    "Absolutely.",
    "Sure, I can help you with that.",
    "Let me check the latest commit on the main branch for you.",
    "Okay, I've created the branch and pushed your changes to it.",
    "You can run the benchmark with one command from the project root.",
    "There are three open pull requests waiting for your review right now.",
    "Yes, the deployment finished about ten minutes ago without any errors.",
    "I'm not sure, but I think the meeting was moved to Thursday afternoon.",
    "Python lists are ordered, mutable collections that can hold items of any type.",
    "The main difference between a process and a thread is that threads share memory.",
    "To answer your question, the build takes roughly four minutes on the main branch.",
    "The quickest way to fix this is to restart the service and check the logs again.",
    "Good morning, here is a short summary of what changed in the repository overnight.",
    "The weather in Tokyo today is mostly sunny with a high of twenty two degrees.",
    "That function returns None when the cache is empty, which is why the caller crashes.",
    "Here's what I found after reading through the three files you mentioned earlier today.",
    "I looked at the failing test and the problem is a missing import in the helper module.",
    "The error comes from a timeout in the database connection pool when traffic spikes in the evening.",
)
_BYTES_PER_S: Final = OUTPUT_RATE * 4  # 48 kHz stereo s16le


@dataclass(slots=True)
class Timings:
    """One configuration's samples: first chunk and whole synthesis per sentence (ms), and of the
    split sentences, how many and how many had their rest arrive after the first unit played."""

    first_chunk_ms: list[float] = field(default_factory=list)
    whole_ms: list[float] = field(default_factory=list)
    rest_late: int = 0
    split: int = 0


def run(*, rounds: int = 3, load: int = 0, first_chunk_words: int | None = None) -> dict[str, Any]:
    """Time Piper's first chunk per sentence, as configured and with whole sentences, back to back.

    Args:
        rounds: passes over :data:`SENTENCES` (each alternates the two configurations).
        load: busy cores beside the run (``--load``; the caller starts them): picks the target.
        first_chunk_words: the configuration measured (None: the setting's default).

    Returns:
        ``{"tts_first_chunk_ms": {"n", "p50", "p95", "max"}, "targets", "meets_targets",
        "first_chunk_words", "sentences", "rounds", "diagnostics": {"whole_sentence_first_chunk_ms",
        "whole_sentence_synthesis_ms", "text_cut_first_chunk_ms", "synthesis_ms", "split_sentences",
        "rest_late"}}``.

    Raises:
        ValueError: ``rounds`` < 1.
        ProviderUnavailable: Piper is not installed.
    """
    if rounds < 1:
        raise ValueError("need at least one round")
    config = TtsConfig() if first_chunk_words is None else TtsConfig(first_chunk_words=first_chunk_words)
    voice = load_voice(config)
    measured, whole, text_cut = Timings(), Timings(), Timings()
    asyncio.run(_bench(config, voice, rounds, measured, whole, text_cut))
    result = report(measured, whole, rounds=rounds, load=load, first_chunk_words=config.first_chunk_words)
    result["diagnostics"]["text_cut_first_chunk_ms"] = summary(text_cut.first_chunk_ms)
    return result


def report(
    measured: Timings, whole: Timings, *, rounds: int, load: int, first_chunk_words: int
) -> dict[str, Any]:
    """The JSON report: the configured run's figures against the target for ``load``, the whole
    sentences' beside them."""
    target = TARGET_IDLE_MS if load == 0 else TARGET_LOADED_MS
    first_chunk = summary(measured.first_chunk_ms)
    p95 = first_chunk["p95"]
    return {
        "tts_first_chunk_ms": first_chunk,
        "targets": {"tts_first_chunk_ms": target},
        "meets_targets": {"tts_first_chunk_ms": p95 is not None and p95 <= target},
        "first_chunk_words": first_chunk_words,
        "sentences": len(SENTENCES),
        "rounds": rounds,
        "diagnostics": {
            "whole_sentence_first_chunk_ms": summary(whole.first_chunk_ms),
            "synthesis_ms": summary(measured.whole_ms),
            "whole_sentence_synthesis_ms": summary(whole.whole_ms),
            "split_sentences": measured.split // rounds,
            "rest_late": measured.rest_late,
        },
    }


async def _bench(
    config: TtsConfig, voice: Any, rounds: int, measured: Timings, whole: Timings, text_cut: Timings
) -> None:
    clock = SystemClock()
    configured = PiperTts(config, voice=voice)
    baseline = PiperTts(TtsConfig(first_chunk_words=0), voice=voice)
    try:
        configured.warm_up()
        for _ in range(rounds):
            for sentence in SENTENCES:
                phonemes = voice.phonemize(sentence)[0]
                split = split_first_unit(phonemes, config.first_chunk_words) is not None
                await _time(configured, sentence, clock, measured, split=split)
                await _time(baseline, sentence, clock, whole, split=False)
                words = sentence.split()
                if split and len(words) > config.first_chunk_words:
                    # Option (a): the segmenter hands the first words on as a piece of their own.
                    head = " ".join(words[: config.first_chunk_words])
                    await _time(baseline, head, clock, text_cut, split=False)
    finally:
        await configured.aclose()
        await baseline.aclose()


async def _time(tts: PiperTts, sentence: str, clock: SystemClock, into: Timings, *, split: bool) -> None:
    """One sentence: its first chunk, its whole synthesis, and whether the rest came in time."""
    start = clock.monotonic()
    arrivals: list[tuple[float, int]] = []
    async for chunk in tts.synthesize(sentence):
        arrivals.append((clock.monotonic(), len(chunk)))
    into.first_chunk_ms.append((arrivals[0][0] - start) * 1000.0)
    into.whole_ms.append((arrivals[-1][0] - start) * 1000.0)
    if split:  # chunks: the first unit, the rest, the resampler's tail
        into.split += 1
        first_at, first_bytes = arrivals[0]
        if arrivals[1][0] > first_at + first_bytes / _BYTES_PER_S:
            into.rest_late += 1
