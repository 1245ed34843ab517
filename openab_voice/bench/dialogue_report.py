"""What the dialogue benchmark records in its rounds, and its report: every figure's summary and
whether it meets its target (:data:`TARGETS`, :data:`REALTIME_TARGETS`, :data:`LIVE_TARGETS`).

``diagnostics`` splits barge-in into its stages and gives the engine's own figures, so a missed
target points at its cause. Which figure comes from where: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openab_voice.bench.stats import summary

# P95 targets (counts: totals) on an idle machine, and with one core busy (``--load 1`` or more).
TARGETS: dict[str, float] = {
    "barge_in_ms": 100.0,
    "first_stable_partial_ms": 700.0,
    "tts_first_chunk_ms": 150.0,
    "eou_to_first_audio_ms": 450.0,
    "echo_false_interrupts": 0,
    "backchannel_cutoffs": 0,
    "real_interruptions_missed": 0,
}
LOADED_TARGETS: dict[str, float] = {**TARGETS, "tts_first_chunk_ms": 250.0, "eou_to_first_audio_ms": 550.0}
REALTIME_TARGETS: dict[str, float] = {
    # No TTS of ours, no backchannel rounds (cascade only); first audio waits on the provider, whose
    # latency the loopback server sets (--first-audio-ms).
    **{
        k: v
        for k, v in TARGETS.items()
        if k in ("barge_in_ms", "first_stable_partial_ms", "echo_false_interrupts")
    },
    "eou_to_first_audio_ms": 700.0,
    "truncate_sent_ms": 20.0,
    "audio_end_error_ms": 40.0,
}
LIVE_TARGETS: dict[str, float] = {
    # As the realtime engine's, but GPT-Live has no truncation: the heard position is the one the
    # note to the model names (ProviderToldHeard), held against what the listener got.
    **{k: v for k, v in REALTIME_TARGETS.items() if k not in ("truncate_sent_ms", "audio_end_error_ms")},
    "heard_position_error_ms": 40.0,
}
_COUNTS = ("echo_false_interrupts", "backchannel_cutoffs", "real_interruptions_missed")


def targets_for(*, engine: str = "cascade", load: int) -> dict[str, float]:
    """The targets a run is held to: the realtime or live engine's, or the cascade's idle or loaded ones."""
    if engine == "realtime":
        return REALTIME_TARGETS
    if engine == "live":
        return LIVE_TARGETS
    return LOADED_TARGETS if load > 0 else TARGETS


ENGINE_METRICS = ("first_stable_partial_ms", "eou_to_first_audio_ms", "tts_first_chunk_ms")


@dataclass(slots=True)
class Samples:
    barge_in: list[float] = field(default_factory=list)
    heard_eou: list[float] = field(default_factory=list)  # end of the question -> first answer packet
    metrics: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in ENGINE_METRICS})
    stages: dict[str, list[float]] = field(default_factory=dict)
    engine_barge_in: list[float] = field(default_factory=list)
    speech_end_to_final: list[float] = field(default_factory=list)
    echo_false_interrupts: list[int] = field(default_factory=list)  # per echo round
    missed_barge_ins: int = 0
    truncate_sent: list[float] = field(default_factory=list)  # realtime only
    audio_end_error: list[float] = field(default_factory=list)  # realtime only
    heard_position_error: list[float] = field(default_factory=list)  # live only
    backchannels: int = 0  # said over the bot (backchannel rounds)
    backchannel_cutoffs: int = 0  # of those, answered as a turn, or the answer never went on
    backchannel_barge_ins: int = 0  # of those, the bot stopped on the onset (then resumed or not)
    backchannel_gap: list[float] = field(default_factory=list)  # bot's last packet -> resumed audio
    backchannel_heard: list[str] = field(default_factory=list)  # per backchannel: its finals, and "cut"
    real_interruptions: int = 0  # "wait, stop please" over the bot (backchannel rounds)
    real_interruptions_missed: int = 0  # of those, the bot did not stop, or resumed after it


def report(
    samples: Samples, *, trials: int, ttft_ms: float, engine: str = "cascade", load: int = 0
) -> dict[str, Any]:
    out: dict[str, Any] = {"barge_in_ms": summary(samples.barge_in)}
    out.update({m: summary(v) for m, v in samples.metrics.items()})
    out["eou_to_first_audio_ms"] = summary(samples.heard_eou)
    targets = targets_for(engine=engine, load=load)
    if engine == "realtime":
        out["truncate_sent_ms"] = summary(samples.truncate_sent)
        out["audio_end_error_ms"] = summary(samples.audio_end_error)
    if engine == "live":
        out["heard_position_error_ms"] = summary(samples.heard_position_error)
    false_interrupts = sum(samples.echo_false_interrupts)
    out.update(echo_false_interrupts=false_interrupts, trials=trials, ttft_ms=ttft_ms)
    out.update(
        backchannel_cutoffs=samples.backchannel_cutoffs,
        backchannels=samples.backchannels,
        real_interruptions_missed=samples.real_interruptions_missed,
        real_interruptions=samples.real_interruptions,
    )
    out["targets"] = dict(targets)
    meets: dict[str, bool] = {}
    for name, target in targets.items():
        if name in _COUNTS:
            meets[name] = out[name] <= target
        else:
            p95 = out[name]["p95"]
            meets[name] = p95 is not None and p95 <= target
    out["meets_targets"] = meets
    out["diagnostics"] = {
        "engine_barge_in_ms": summary(samples.engine_barge_in),
        "engine_eou_to_first_audio_ms": summary(samples.metrics["eou_to_first_audio_ms"]),
        "speech_end_to_final_ms": summary(samples.speech_end_to_final),
        "missed_barge_ins": samples.missed_barge_ins,
        "echo_false_interrupts_per_trial": samples.echo_false_interrupts,
        "barge_in_stages_ms": {k: summary(v) for k, v in samples.stages.items()},
        "backchannel_barge_ins": samples.backchannel_barge_ins,
        "backchannel_resume_gap_ms": summary(samples.backchannel_gap),
        "backchannels_heard": samples.backchannel_heard,
    }
    return out
