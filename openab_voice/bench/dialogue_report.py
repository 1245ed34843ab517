"""What the dialogue benchmark records in its rounds, and its report: every figure's summary and
whether it meets its target (:data:`TARGETS`, :data:`REALTIME_TARGETS`).

``diagnostics`` splits barge-in into its stages and gives the engine's own figures, so a missed
target points at its cause. Which figure comes from where: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openab_voice.bench.stats import summary

TARGETS: dict[str, float] = {
    "barge_in_ms": 120.0,
    "first_stable_partial_ms": 700.0,
    "tts_first_chunk_ms": 250.0,
    "eou_to_first_audio_ms": 700.0,
    "echo_false_interrupts": 0,
}
REALTIME_TARGETS: dict[str, float] = {
    **{k: v for k, v in TARGETS.items() if k != "tts_first_chunk_ms"},
    "truncate_sent_ms": 20.0,
    "audio_end_error_ms": 40.0,
}
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


def report(samples: Samples, *, trials: int, ttft_ms: float, realtime: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"barge_in_ms": summary(samples.barge_in)}
    out.update({m: summary(v) for m, v in samples.metrics.items()})
    out["eou_to_first_audio_ms"] = summary(samples.heard_eou)
    targets = REALTIME_TARGETS if realtime else TARGETS
    if realtime:
        out["truncate_sent_ms"] = summary(samples.truncate_sent)
        out["audio_end_error_ms"] = summary(samples.audio_end_error)
    false_interrupts = sum(samples.echo_false_interrupts)
    out.update(echo_false_interrupts=false_interrupts, trials=trials, ttft_ms=ttft_ms)
    out["targets"] = dict(targets)
    meets: dict[str, bool] = {}
    for name, target in targets.items():
        if name == "echo_false_interrupts":
            meets[name] = false_interrupts <= target
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
    }
    return out
