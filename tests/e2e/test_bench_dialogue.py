"""Smoke test of the dialogue benchmark: one round of each kind through the emulator, with real
faster-whisper and Piper; checks the report's shape and that every latency was measured (no targets)."""

from __future__ import annotations

import math

import pytest

from openab_voice.bench import dialogue

pytestmark = pytest.mark.e2e

METRICS = ("barge_in_ms", "first_stable_partial_ms", "eou_to_first_audio_ms", "tts_first_chunk_ms")


def test_one_trial_measures_every_metric() -> None:
    report = dialogue.run(trials=1)  # owns its event loop (asyncio.run): a plain, synchronous test

    assert report["trials"] == 1 and report["ttft_ms"] == 0.0 and report["preemptive_generation"] is True
    for metric in METRICS:
        stats = report[metric]
        assert set(stats) == {"p50", "p95", "n", "max"}, metric
        assert stats["n"] >= 1, metric
        for key in ("p50", "p95"):
            value = stats[key]
            assert isinstance(value, float) and math.isfinite(value) and value > 0, (metric, key, value)
    assert isinstance(report["echo_false_interrupts"], int) and report["echo_false_interrupts"] >= 0
    assert set(report["targets"]) == set(METRICS) | {"echo_false_interrupts"}
    assert set(report["meets_targets"]) == set(report["targets"])
    assert all(isinstance(ok, bool) for ok in report["meets_targets"].values())
    for metric in METRICS:  # every latency target is a P95
        assert report["meets_targets"][metric] is (report[metric]["p95"] <= report["targets"][metric])
