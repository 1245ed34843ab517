"""``bench dialogue --engine realtime``: one round of each kind on the realtime engine against the
loopback realtime server (the realtime figures measured, counted once per round and within the
bench's own 30 s wait; no targets asserted), and its targets compared on samples whose P50, P95
and max disagree."""

from __future__ import annotations

import pytest

from openab_voice.bench import dialogue, dialogue_report
from tests.e2e.test_bench_dialogue import assert_measured, assert_target_splits_the_statistics

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_one_realtime_trial_measures_the_truncation() -> None:
    trials, provider_ms = 1, 200.0
    report = dialogue.run(trials=trials, engine="realtime", first_audio_latency_ms=provider_ms)
    assert report["engine"] == "realtime" and report["first_audio_latency_ms"] == provider_ms
    assert report["preemptive_generation"] is False and report["trials"] == trials
    assert_measured(report["barge_in_ms"], n=trials)
    assert_measured(report["eou_to_first_audio_ms"], n=2 * trials)
    # The provider answers no earlier than its own latency after the request, which comes after
    # the end of speech: what the listener waits for includes it.
    assert report["eou_to_first_audio_ms"]["p50"] >= provider_ms
    # One truncation per barge-in; both can round to 0.0 ms (sent at once, cut where heard).
    assert_measured(report["truncate_sent_ms"], n=trials, positive=False)
    assert_measured(report["audio_end_error_ms"], n=trials, positive=False)
    assert report["tts_first_chunk_ms"]["n"] == 0  # the provider speaks: no TTS of ours
    assert report["targets"] == dialogue.REALTIME_TARGETS and "tts_first_chunk_ms" not in report["targets"]
    for metric, target in report["targets"].items():
        if metric != "echo_false_interrupts":
            assert report["meets_targets"][metric] is (report[metric]["p95"] <= target), metric


def test_realtime_targets_are_met_on_the_p95_they_name() -> None:
    samples = dialogue_report.Samples(
        barge_in=[50.0] * 19 + [5000.0],  # P95 297.5: over 120 (P50 within it)
        heard_eou=[400.0] * 19 + [1000.0],  # P95 430 within 700, max over it
        metrics={
            "first_stable_partial_ms": [300.0] * 18 + [900.0] * 2,  # P50 within 700, P95 over it
            "eou_to_first_audio_ms": [],
            "tts_first_chunk_ms": [],
        },
        truncate_sent=[5.0] * 18 + [50.0] * 2,  # P50 within 20, P95 over it
        audio_end_error=[10.0] * 19 + [400.0],  # P95 29.5 within 40, max over it
        echo_false_interrupts=[0],
    )
    report = dialogue_report.report(samples, trials=20, ttft_ms=0.0, engine="realtime")
    assert_target_splits_the_statistics(report)
    assert report["meets_targets"] == {
        "barge_in_ms": False,
        "first_stable_partial_ms": False,
        "eou_to_first_audio_ms": True,
        "echo_false_interrupts": True,
        "truncate_sent_ms": False,
        "audio_end_error_ms": True,
    }
