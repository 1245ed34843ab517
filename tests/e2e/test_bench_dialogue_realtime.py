"""Smoke test of ``bench dialogue --engine realtime``: one round of each kind on the realtime engine
against the loopback realtime server; the report's shape, the realtime figures measured, no targets."""

from __future__ import annotations

import math

import pytest

from openab_voice.bench import dialogue

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_one_realtime_trial_measures_the_truncation() -> None:
    report = dialogue.run(trials=1, engine="realtime", first_audio_latency_ms=200.0)
    assert report["engine"] == "realtime" and report["first_audio_latency_ms"] == 200.0
    assert report["preemptive_generation"] is False
    for metric in ("barge_in_ms", "eou_to_first_audio_ms", "truncate_sent_ms", "audio_end_error_ms"):
        stats = report[metric]
        assert stats["n"] >= 1, metric
        assert isinstance(stats["p95"], float) and math.isfinite(stats["p95"]) and stats["p95"] >= 0, metric
    assert "tts_first_chunk_ms" not in report["targets"]  # the provider speaks: no TTS of ours
    assert report["targets"]["truncate_sent_ms"] == 20.0 and report["targets"]["audio_end_error_ms"] == 40.0
    assert set(report["meets_targets"]) == set(report["targets"])
