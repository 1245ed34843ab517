"""End-of-turn benchmark: false cut-offs and end-of-turn latency, silence alone against the model.

The pause set is made with the shipped Piper voice: questions and requests with a pause of 300-900 ms
spliced into them, most after a word no sentence ends on ("of", "the", "and", as in LiveKit's
eot-bench), some after a word that could end one ("I need the report ... from yesterday"), and
complete utterances. Each sentence is synthesized whole, so the words before the pause keep the
sentence's running intonation, and cut at the quietest 10 ms around the end of the word before the
pause (found with faster-whisper's word timestamps); a sentence whose words the timestamps do not match is left out and counted. (Said
in two takes instead, each part synthesized alone, the part before the pause ends with a sentence's
falling intonation: ADR 0021 has that set's figures.) Every utterance goes through the real front
end (APM, Silero VAD), then the
real transcriber (faster-whisper decodes, speculative finals) and, for the detector policies, the real
end-of-turn stage (:class:`~openab_voice.bench.replay.Replay`: each decode and model run lands at its
start plus its measured duration).

A **false cut-off** is a final that ends before the utterance's last word (at the planted pause, or at
any other pause in it); the rate is over the utterances with a planted pause, and, apart, over the
complete ones. **End-of-turn latency** runs from the end of the last word to the last final. Each
policy sees the same audio; the detector policies judge a pause at the same point (200 ms) and wait
at most the same 1,500 ms. Method and results: docs/adr/0021-semantic-end-of-turn.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import soxr
from faster_whisper import WhisperModel

from openab_voice.audio import scenes
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bench.replay import Replay, front_end
from openab_voice.bench.stats import summary
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.providers.turn import TurnCapabilities, TurnConfig, TurnDetector, turn_registry
from openab_voice.stt.base import SttConfig, stt_registry
from openab_voice.stt.endpointing import EndOfTurnSettings, EndOfTurnStage
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal, TurnDecided
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.utterances import TranscriberSettings
from openab_voice.stt.whisper_models import resolve_model_dir

__all__ = ["COMPLETE", "PAUSED", "TARGET_FALSE_CUTOFF", "run"]

TARGET_FALSE_CUTOFF = 0.10
# (before the pause, after it, the pause comes after a word no sentence ends on)
PAUSED: tuple[tuple[str, str, bool], ...] = (
    ("What is the capital of", "France?", True),
    ("I was thinking of", "getting a new laptop.", True),
    ("Can you tell me about the", "weather tomorrow?", True),
    ("Let me know if you want the", "report by Friday.", True),
    ("I want to book a table and", "order some wine.", True),
    ("Could you check the logs for", "any errors today?", True),
    ("Please remind me to call my", "sister tonight.", True),
    ("Tell me a story about", "a brave little robot.", True),
    ("We need to fix the build and", "then deploy it.", True),
    ("What do you think about", "the new design?", True),
    ("Send a message to the", "whole team.", True),
    ("I would like a summary of", "the last meeting.", True),
    ("I need the report", "from yesterday's meeting.", False),
    ("Can you schedule a call", "with the design team?", False),
    ("Open the pull request", "that fixes the parser.", False),
    ("Turn off the lights", "in the kitchen.", False),
)
COMPLETE: tuple[str, ...] = (
    "What time is it in Tokyo?",
    "Tell me a joke.",
    "Thanks, that is all.",
    "Can you add a unit test for the parser?",
    "What is the capital of France?",
    "Please summarize the meeting.",
    "Stop.",
    "Yes, go ahead.",
    "How is the weather today?",
    "Run the tests again.",
    "I think we should schedule the meeting for next Tuesday.",
    "Okay, thank you.",
)
PAUSES_S = (0.3, 0.5, 0.7, 0.9)
_LEAD_S = 1.0
_GAP_S = 2.5  # after each utterance: longer than the longest wait of any policy
_START = 1000.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Item:
    text: str
    start: float  # where the item's region of the timeline begins
    end: float  # the end of its last word
    pause: tuple[float, float] | None  # the planted pause (from the end of a word to the next)
    after_function_word: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _Policy:
    name: str
    min_silence_ms: int
    detector: str | None  # "model", "words", "model+words"


POLICIES = (
    _Policy("silence 200 ms", 200, None),
    _Policy("silence 400 ms (default VAD)", 400, None),
    _Policy("silence 800 ms", 800, None),
    _Policy("model only", 400, "model"),
    _Policy("words only", 400, "words"),
    _Policy("model + words", 400, "model+words"),
)


class _SaysComplete:
    """The "words only" policy's detector: every pause is complete unless its words continue."""

    capabilities = TurnCapabilities(name="always-complete", sample_rate=16_000, max_seconds=8.0)

    def completion_probability(self, samples: np.ndarray) -> float:
        return 1.0

    def close(self) -> None:
        pass


def _synthesize(tts: TextToSpeech, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """Piper's speech for each text, as 16 kHz mono int16."""

    async def all_of() -> dict[str, np.ndarray]:
        out = {}
        for text in texts:
            pcm = b"".join([chunk async for chunk in tts.synthesize(text)])
            stereo = np.frombuffer(pcm, dtype=np.int16).reshape(-1, 2)
            mono = soxr.resample(stereo[:, 0].astype(np.float32), 48_000, scenes.CLIP_RATE)
            out[text] = np.clip(np.round(mono), -32768, 32767).astype(np.int16)
        return out

    return asyncio.run(all_of())


def _trimmed(clip: np.ndarray) -> np.ndarray:
    lo, hi = scenes.active_span(clip)
    rate = scenes.CLIP_RATE
    return clip[int(lo * rate) : int(hi * rate)]


def _normalized(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalpha() or c == "'")


def _cut_points(model: WhisperModel, clip: np.ndarray, before: str) -> tuple[float, float] | None:
    """Where ``before``'s last word ends in ``clip`` and the next word starts (seconds), from
    faster-whisper's word timestamps; None when the words heard are not the words said."""
    segments, _ = model.transcribe(clip.astype(np.float32) / 32768.0, word_timestamps=True, beam_size=1)
    words = [w for segment in segments for w in segment.words]
    said = [_normalized(w) for w in before.split()]
    heard = [_normalized(w.word) for w in words]
    n = len(said)
    if heard[:n] != said or len(words) <= n:
        return None
    # Word timestamps are rough (tens of ms), and a cut inside a word leaves part of it: cut at the
    # quietest 10 ms around the boundary instead.
    step = scenes.CLIP_RATE // 100
    lo = max(0, int((words[n - 1].end - 0.12) * scenes.CLIP_RATE) // step)
    hi = min(clip.size // step, int((words[n].start + 0.12) * scenes.CLIP_RATE) // step)
    if hi <= lo:
        return None
    frames = clip[lo * step : hi * step].astype(np.float64).reshape(-1, step)
    quietest = (lo + int(np.argmin((frames * frames).mean(axis=1)))) * step / scenes.CLIP_RATE
    return quietest, quietest


def _timeline(
    speech: dict[str, np.ndarray], model: WhisperModel
) -> tuple[np.ndarray, list[_Item], list[str]]:
    parts: list[np.ndarray] = []
    items: list[_Item] = []
    skipped: list[str] = []
    t = _START
    rate = scenes.CLIP_RATE

    def add(pieces: list[np.ndarray], text: str, pause: float | None, function_word: bool) -> None:
        nonlocal t
        start = t
        parts.append(scenes.silence(_LEAD_S))
        t += _LEAD_S
        planted = None
        for i, piece in enumerate(pieces):
            if i:
                parts.append(scenes.silence(pause or 0.0))
                planted = (t, t + (pause or 0.0))
                t += pause or 0.0
            parts.append(piece)
            t += piece.size / rate
        items.append(_Item(text, start, t, planted, function_word))
        parts.append(scenes.silence(_GAP_S))
        t += _GAP_S

    for i, (before, after, function_word) in enumerate(PAUSED):
        whole = _trimmed(speech[f"{before} {after}"])
        cut = _cut_points(model, whole, before)
        if cut is None:
            skipped.append(f"{before} {after}")
            continue
        pieces = [whole[: int(cut[0] * rate)], whole[int(cut[1] * rate) :]]
        for pause in (PAUSES_S[i % 4], PAUSES_S[(i + 2) % 4]):
            add(pieces, f"{before} ... {after}", pause, function_word)
    for text in COMPLETE:
        add([_trimmed(speech[text])], text, None, False)
    return np.concatenate(parts), items, skipped


def _run_policy(
    policy: _Policy, frames_by_silence: dict[int, Any], detector: TurnDetector | None, stt: Any
) -> tuple[list[Event], Replay]:
    clock = FakeClock(_START)
    events: list[Event] = []
    stage = None
    if policy.detector is not None:
        assert detector is not None
        settings = EndOfTurnSettings(read_words=policy.detector != "model")
        stage = EndOfTurnStage(settings, rate=16_000, window_s=detector.capabilities.max_seconds)
    core = RedecodeCore(
        stt.capabilities, emit=events.append, clock=clock, settings=TranscriberSettings(), turns=stage
    )
    used = None if policy.detector is None else _SaysComplete() if policy.detector == "words" else detector
    replay = Replay(core, stt, clock, used)
    replay.run(frames_by_silence[policy.min_silence_ms])
    return events, replay


def _score(items: list[_Item], events: list[Event], replay: Replay) -> dict[str, Any]:
    def owner(audio_start: float) -> _Item | None:
        inside = [item for item in items if item.start <= audio_start]  # items are in time order
        return inside[-1] if inside else None

    ended: dict[int, list[TranscriptFinal | TranscriptDiscarded]] = {id(item): [] for item in items}
    starts: dict[str, float] = {}
    for event in events:
        if isinstance(event, TranscriptFinal):
            starts[event.utterance_id] = event.audio_start
            item = owner(event.audio_start)
            if item is not None:
                ended[id(item)].append(event)
    cut_paused = cut_paused_fw = cut_paused_cw = cut_complete = 0
    latencies: list[float] = []
    complete_latencies: list[float] = []
    by_pause: dict[float, list[int]] = {p: [0, 0] for p in PAUSES_S}
    for item in items:
        finals = [f for f in ended[id(item)] if isinstance(f, TranscriptFinal)]
        early = [f for f in finals if f.audio_end < item.end - 0.15]
        if finals:
            latencies.append((max(f.at for f in finals) - item.end) * 1000.0)
        if item.pause is None:
            cut_complete += bool(early)
            complete_latencies += latencies[-1:] if finals else []
            continue
        length = round(item.pause[1] - item.pause[0], 1)
        by_pause[length][1] += 1
        if early:
            cut_paused += 1
            by_pause[length][0] += 1
            cut_paused_fw += item.after_function_word
            cut_paused_cw += not item.after_function_word
    paused = [i for i in items if i.pause is not None]
    fw = sum(i.after_function_word for i in paused)
    decided = [e for e in events if isinstance(e, TurnDecided)]
    return {
        "false_cutoff_rate": round(cut_paused / len(paused), 3),
        "false_cutoffs": cut_paused,
        "paused_utterances": len(paused),
        "false_cutoffs_after_function_word": f"{cut_paused_fw}/{fw}",
        "false_cutoffs_after_content_word": f"{cut_paused_cw}/{len(paused) - fw}",
        "false_cutoffs_by_pause_s": {str(k): f"{v[0]}/{v[1]}" for k, v in by_pause.items()},
        "complete_utterances_cut": f"{cut_complete}/{len(items) - len(paused)}",
        "end_of_turn_latency_ms": summary(latencies),
        "end_of_turn_latency_complete_ms": summary(complete_latencies),
        "checks": len(decided),
        "check_ms": summary(replay.check_ms),
        "decode_ms": {kind: summary(v) for kind, v in replay.decode_ms.items()},
    }


def run(*, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every policy on the pause set; returns the JSON-friendly comparison.

    Raises:
        ProviderUnavailable: Piper, faster-whisper, the front end's providers or Smart Turn missing.
    """
    tts = tts_registry().create("piper", TtsConfig())
    try:
        texts = [f"{before} {after}" for before, after, _ in PAUSED] + list(COMPLETE)
        speech = _synthesize(tts, texts)
    finally:
        asyncio.run(tts.aclose())
    aligner = WhisperModel(str(resolve_model_dir(SttConfig())), device="cpu", compute_type="int8")
    samples, items, skipped = _timeline(speech, aligner)
    del aligner
    frames = {
        ms: front_end(samples, _START, FrontEndSettings(vad_min_silence_ms=ms))
        for ms in sorted({p.min_silence_ms for p in POLICIES})
    }
    stt = stt_registry().create("faster-whisper", SttConfig())
    detector = turn_registry().create("smart-turn", TurnConfig())
    results: dict[str, Any] = {}
    try:
        for policy in POLICIES:
            if progress is not None:
                progress(policy.name)
            events, replay = _run_policy(policy, frames, detector, stt)
            results[policy.name] = _score(items, events, replay)
    finally:
        stt.close()
        detector.close()
    product = results["model + words"]
    p95 = product["end_of_turn_latency_ms"]["p95"]
    return {
        "policies": results,
        "utterances": len(items),
        "left_out": skipped,
        "pauses_s": list(PAUSES_S),
        "settings": dataclasses.asdict(EndOfTurnSettings()),
        "targets": {"false_cutoff_rate": TARGET_FALSE_CUTOFF},
        "target_statistic": "rate over the utterances with a planted pause (model + words)",
        "meets_targets": product["false_cutoff_rate"] <= TARGET_FALSE_CUTOFF,
        "model_plus_words_latency_p95_ms": p95,
    }
