"""The soak's report: the summary figures, each against its target, and every sample.

``summary`` holds each statistic under its target's name (:data:`TARGETS`, plus
``silent_phase_missed`` when ``silence_s`` is set) and ``meets_targets`` compares exactly that value.
What each figure means: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from openab_voice.bench.soak_sampler import Sampler
from openab_voice.bench.soak_script import Script, recovery
from openab_voice.testing.harness import BotOnEmulator

TARGETS: dict[str, float] = {
    "rss_growth_pct": 5.0,
    "queue_overruns": 0,
    "uncounted_packets": 0,
    "unhandled_exceptions": 0,
}
# Receive drops that are not a speaker's audio (the server's and discord.py's own datagrams).
_NOT_SPEECH = frozenset({"rtcp", "keepalive", "ip_discovery"})


def soak_report(
    sampler: Sampler,
    h: BotOnEmulator,
    script: Script,
    options: dict[str, Any],
    *,
    started: float,
    silent_phase: dict[str, Any] | None,
    final: bool,
) -> dict[str, Any]:
    """The soak's report so far (``final``: after the last sample, every packet accounted for)."""
    counts = script.counts
    drops, attributed = sampler.receive(h)
    sent = sum(counts.sent_packets.values())
    counted = attributed + sum(
        v
        for k, v in drops.items()
        if k.startswith("receive.unattributed.") and k.rsplit(".", 1)[1] not in _NOT_SPEECH
    )
    rss = _rss_window(sampler, options)
    all_lag = [s["loop_lag_ms"] for s in sampler.samples if s["loop_lag_ms"]["n"]]
    result = {
        "rss_growth_pct": rss.pop("growth_pct"),
        "rss_window": rss,
        "queue_overruns": sampler.queue_overruns,
        "queues": {n: {"max": d.depth, "bound": d.bound} for n, d in sorted(sampler.queues_seen.items())},
        "uncounted_packets": sent - counted if final else None,
        "packets": {
            "sent": sent,
            "attributed": attributed,
            "counted": counted,
            "impairment_drops": counts.impairment_drops,
        },
        "drops_by_reason": drops,
        "unhandled_exceptions": sampler.exceptions.count,
        "unhandled_messages": list(sampler.exceptions.messages),
        "loop_lag_ms_p95_max": max((s["p95"] or 0.0 for s in all_lag), default=None),
        "loop_lag_ms_max": max((s["max"] or 0.0 for s in all_lag), default=None),
        "forced_voice_events": [
            recovery(
                r,
                answers_at=counts.answers_at,
                finals_at=sampler.tally.finals_at,
                gaps=sampler.tally.gaps,
                ended_at=min(sampler.clock.monotonic(), started + options["minutes"] * 60.0),
            )
            for r in counts.forced
        ],
        "script_notes": list(counts.errors),
    }
    targets = _silent_phase_target(result, options, silent_phase, final=final)
    meets = {k: result[k] is not None and result[k] <= v for k, v in targets.items()}
    return {
        "minutes": options["minutes"],
        "complete": final,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()},
        "summary": result,
        "targets": targets,
        "meets_targets": meets,
        "samples": sampler.samples,
    }


def _silent_phase_target(
    result: dict[str, Any], options: dict[str, Any], phase: dict[str, Any] | None, *, final: bool
) -> dict[str, float]:
    """The targets, with ``silent_phase_missed`` (and the phase in ``result``) when there was one."""
    targets = dict(TARGETS)
    if options["silence_s"] > 0:
        result["silent_phase"] = phase
        result["silent_phase_missed"] = (
            None if phase is None else int(phase["final_after_s"] is None) if final else None
        )
        targets["silent_phase_missed"] = 0
    return targets


def _rss_window(sampler: Sampler, options: dict[str, Any]) -> dict[str, Any]:
    """RSS growth after the warm-up: the median of the last third of the samples taken after it
    against the median of the first third (medians, so one allocator swing is not growth)."""
    warm = [s["rss_mb"] for s in sampler.samples if s["t_s"] >= options["warmup_s"] - 1e-6]
    if len(warm) < 2:
        return {"growth_pct": None, "note": "fewer than two samples after the warm-up"}
    third = max(1, len(warm) // 3)
    first, last = statistics.median(warm[:third]), statistics.median(warm[-third:])
    times = [s["t_s"] for s in sampler.samples if s["t_s"] >= options["warmup_s"] - 1e-6]
    return {
        "growth_pct": round((last - first) / first * 100.0, 2),
        "definition": "(median RSS of the last third of the samples after the warm-up - median of "
        "the first third) / median of the first third * 100",
        "first_third_s": [times[0], times[third - 1]],
        "first_third_median_mb": first,
        "last_third_s": [times[-third], times[-1]],
        "last_third_median_mb": last,
        "peak_after_warmup_mb": max(warm),
        "start_mb": round(sampler.rss_start / 2**20, 1),
        "end_mb": warm[-1],
        "warmup_s": options["warmup_s"],
    }


def write_report(report: dict[str, Any], out: Path | None) -> None:
    """Write ``report`` as JSON to ``out``, when given."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n", encoding="utf-8")
