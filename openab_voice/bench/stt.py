"""Streaming speech-to-text benchmark: first stable partial, final latency, WER and CER on shipped speech.

Prepared, not timed: the shipped clips go through the real audio front end on a fake clock. Timed:
the processed frames are replayed through :class:`~openab_voice.stt.redecode.RedecodeCore` on a second
fake clock; every decode runs for real and its result lands at its start plus its measured duration.
Reported: first stable partial, final latency, WER, per-decode times, fast-path vs padded decodes;
target: :data:`TARGET_FIRST_STABLE_MS`. Method: docs/adr/0018-benchmarks-on-real-components.md.
The clips are English Piper speech (:data:`CLIPS`) unless ``clips`` names others (the Chinese ones:
:mod:`openab_voice.bench.stt_languages`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from openab_voice.audio import scenes
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bench.replay import Replay, front_end
from openab_voice.bench.stats import summary
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event, LatencyMeasured
from openab_voice.clock import FakeClock, perf_ns
from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.scripts import has_cjk
from openab_voice.stt.base import SttConfig
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal, TranscriptPartial
from openab_voice.stt.faster_whisper import create
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.stability import normalize_words
from openab_voice.stt.utterances import TranscriberSettings

__all__ = ["CLIPS", "TARGET_FIRST_STABLE_MS", "character_error_rate", "run", "word_error_rate"]

TARGET_FIRST_STABLE_MS = 800.0
# What Piper was asked to say for each shipped clip (scripts/make_assets.py).
CLIPS: dict[str, str] = {
    "alice": "Hello, can you tell me what time it is in Tokyo right now?",
    "bob": "I think we should schedule the meeting for next Tuesday afternoon.",
    "far_end": "Sure, the build finished a few minutes ago, and all of the integration tests passed.",
}
_GAP_S = 1.0


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the reference length (case and punctuation ignored)."""
    return _edit_rate(normalize_words(reference), normalize_words(hypothesis))


def character_error_rate(reference: str, hypothesis: str) -> float:
    """Character-level Levenshtein distance over the reference length, on the words
    :func:`~openab_voice.stt.stability.normalize_words` keeps (case and punctuation ignored; spaces
    between Latin words count, CJK writes none). Traditional characters are compared as simplified:
    Whisper writes either for Mandarin, and "發佈" is not a mistake for "发布".

    Raises:
        ProviderUnavailable: Chinese text without OpenCC (the ``multilingual`` extra).
    """
    return _edit_rate(_characters(reference), _characters(hypothesis))


def _characters(text: str) -> list[str]:
    if has_cjk(text):
        return list("".join(normalize_words(_simplified(text))))
    return list(" ".join(normalize_words(text)))


def _simplified(text: str) -> str:
    try:
        import opencc  # noqa: PLC0415 (the multilingual extra: needed for Chinese only)
    except ImportError as exc:
        raise ProviderUnavailable(
            "the character error rate of Chinese needs OpenCC",
            kind="bench",
            provider="opencc",
            extra="multilingual",
        ) from exc
    return str(opencc.OpenCC("t2s").convert(text))


def _edit_rate(ref: list[str], hyp: list[str]) -> float:
    row = list(range(len(hyp) + 1))
    for i, unit in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (unit != other))
    return row[len(hyp)] / max(1, len(ref))


@dataclasses.dataclass(frozen=True, slots=True)
class _Spoken:
    clip: str
    onset: float  # true speech onset / end on the timeline (clip's active span)
    end: float


def _timeline(utterances: int, start: float, clips: dict[str, str]) -> tuple[np.ndarray, list[_Spoken]]:
    parts, spoken, t = [], [], start
    names = list(clips)
    for i in range(utterances):
        name = names[i % len(names)]
        clip = scenes.load_clip(name)
        lo, hi = scenes.active_span(clip)
        parts += [scenes.silence(_GAP_S), clip]
        spoken.append(_Spoken(name, t + _GAP_S + lo, t + _GAP_S + hi))
        t += _GAP_S + clip.size / scenes.CLIP_RATE
    parts.append(scenes.silence(_GAP_S))
    return np.concatenate(parts), spoken


def _fast_vs_padded(config: SttConfig, clips: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("fast", "padded"):
        stt = create(dataclasses.replace(config, final_mode=mode))
        times, errors, char_errors = [], [], []
        try:
            for name, text in clips.items():
                clip = scenes.load_clip(name)
                began = perf_ns()
                hyp = stt.transcribe(clip, final=True)
                times.append((perf_ns() - began) / 1e6)
                errors.append(word_error_rate(text, hyp.text))
                char_errors.append(character_error_rate(text, hyp.text))
        finally:
            stt.close()
        out[mode] = {
            "final_ms": summary(times),
            "wer": round(float(np.mean(errors)), 3),
            "cer": round(float(np.mean(char_errors)), 3),
        }
    return out


def run(
    *,
    utterances: int = 5,
    config: SttConfig | None = None,
    settings: TranscriberSettings | None = None,
    frontend: FrontEndSettings | None = None,
    compare_padded: bool = True,
    clips: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Benchmark streaming transcription of ``utterances`` utterances of ``clips`` (name: what it says;
    default the English :data:`CLIPS`), said in turn.

    Returns:
        A JSON-friendly dict: first-stable-partial and final latencies (P50/P95/max), WER, CER, decode
        times, the fast-vs-padded comparison and whether the P95 first stable partial is within 800 ms.

    Raises:
        ProviderUnavailable: the model or a front-end provider is missing.
    """
    if utterances < 1:
        raise ValueError("need at least one utterance")
    config = config or SttConfig()
    settings = settings or TranscriberSettings()
    start = 1000.0
    clips = clips or CLIPS
    samples, spoken = _timeline(utterances, start, clips)
    frames = front_end(samples, start, frontend or FrontEndSettings())

    stt = create(config)
    bus, clock = EventBus(), FakeClock(start)
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    transcriber = RedecodeCore(stt.capabilities, emit=bus.publish, clock=clock, settings=settings)
    replay = Replay(transcriber, stt, clock)
    try:
        replay.run(frames)
    finally:
        stt.close()
    result = _report(events, spoken, replay.decode_ms, clips, stt_stats=dict(getattr(stt, "stats", {})))
    result.update(model=config.model_path or config.model, language=config.language)
    result.update(compute_type=config.compute_type)
    result.update(cpu_threads=config.cpu_threads, settings=dataclasses.asdict(settings))
    if compare_padded:
        result["fast_vs_padded_final"] = _fast_vs_padded(config, clips)
    return result


def _report(
    events: list[Event],
    spoken: list[_Spoken],
    decode_ms: dict[str, list[float]],
    clips: dict[str, str],
    *,
    stt_stats: dict[str, int],
) -> dict[str, Any]:
    def owner(audio_start: float) -> int:
        # The utterance belongs to the clip whose speech it starts in (or just before: pre-roll).
        return min(range(len(spoken)), key=lambda i: abs(spoken[i].onset - audio_start))

    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    discarded = [e for e in events if isinstance(e, TranscriptDiscarded)]
    stable = [e for e in events if isinstance(e, LatencyMeasured) and e.metric == "first_stable_partial_ms"]
    first_stable: dict[str, TranscriptPartial] = {}
    for event in events:
        if isinstance(event, TranscriptPartial) and event.stable:
            first_stable.setdefault(event.utterance_id, event)
    texts: dict[int, list[str]] = {i: [] for i in range(len(spoken))}
    final_ms, after_end_ms, per = [], [], []
    for final in finals:
        i = owner(final.audio_start)
        texts[i].append(final.text)
        final_ms.append((final.at - final.audio_end) * 1000.0)
        after_end_ms.append((final.at - spoken[i].end) * 1000.0)
    from_onset = [(p.at - spoken[owner(p.audio_start)].onset) * 1000.0 for p in first_stable.values()]
    errors, words, char_errors, chars = 0.0, 0, 0.0, 0
    for i, item in enumerate(spoken):
        reference, heard = clips[item.clip], " ".join(texts[i])
        wer, cer = word_error_rate(reference, heard), character_error_rate(reference, heard)
        errors += wer * len(normalize_words(reference))
        words += len(normalize_words(reference))
        char_errors += cer * len(_characters(reference))
        chars += len(_characters(reference))
        per.append({"clip": item.clip, "text": heard, "wer": round(wer, 3), "cer": round(cer, 3)})
    p95 = summary([e.value_ms for e in stable])["p95"]  # the target is a P95
    return {
        "utterances": len(spoken),
        "finals": len(finals),
        "discarded": [e.reason for e in discarded],
        "first_stable_partial_ms": summary([e.value_ms for e in stable]),
        "first_stable_from_true_onset_ms": summary(from_onset),
        "final_latency_ms": summary(final_ms),
        "final_after_true_speech_end_ms": summary(after_end_ms),
        "wer": round(errors / max(1, words), 3),
        "cer": round(char_errors / max(1, chars), 3),
        "decode_ms": {kind: summary(values) for kind, values in decode_ms.items()},
        "provider_decodes": stt_stats,
        "target_first_stable_ms": TARGET_FIRST_STABLE_MS,
        "target_statistic": "p95",
        "meets_target": p95 is not None and p95 <= TARGET_FIRST_STABLE_MS,
        "per_utterance": per,
    }
