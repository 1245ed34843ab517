"""A short soak in CI: ``openab-voice bench soak`` for two minutes on the emulator (DAVE on, 2 % loss,
20 ms jitter; two speakers talking to and over the bot, a third joining and leaving, a forced 4015
close), asserting the soak's own targets (RSS growth with a looser bound: see below) and that the
call went on after the forced close.

The full 30-minute run is the same code with ``--minutes 30`` (its JSON goes in the closing note of
issue 12). Over two minutes the RSS target compares the samples from 60 s on (first third against
last third).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openab_voice.bench.soak import TARGETS, run

# Two minutes of call, the models loading and the last round ending: well past the default 120 s.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]


def test_a_two_minute_soak_meets_its_targets(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    report = run(
        minutes=2.0,
        sample_s=15.0,
        warmup_minutes=1.0,
        resume="4015",
        resume_every_s=50.0,
        churn_every_s=40.0,
        out=out,
    )
    summary = report["summary"]
    print(json.dumps({k: summary[k] for k in (*TARGETS, "rss_window", "forced_voice_events")}, indent=1))
    assert report["complete"] and out.is_file()
    # Every queue within its bound, every packet accounted for, nothing unhandled: as in the full run.
    strict = [name for name in TARGETS if name != "rss_growth_pct"]
    assert {name: report["meets_targets"][name] for name in strict} == dict.fromkeys(strict, True), summary
    for name in TARGETS:  # meets_targets compares exactly the statistic named by each target
        assert report["meets_targets"][name] == (summary[name] <= TARGETS[name])
    # RSS: the 5 % target is for the 25 minutes after a 5-minute warm-up (the 30-minute run). Here the
    # window is the second minute, where the models' buffers still grow and the allocator swings by
    # tens of MB (4.3 % measured); this bound catches a leak like the harness's 0.8 MB/s recording.
    assert summary["rss_window"]["first_third_s"][0] >= 60.0
    assert summary["rss_growth_pct"] <= 15.0, summary["rss_window"]

    samples = report["samples"]
    assert len(samples) == 8
    for sample in samples:
        assert sample["rss_mb"] > 0 and sample["loop_lag_ms"]["n"] > 0
        assert sample["queues"], "no queue was found in the voice session"
        assert not sample["queues_over_bound"]
    last = samples[-1]
    assert last["members"]["joins"] >= 2 and last["members"]["leaves"] >= 1
    assert last["conversation"]["answered"] >= 4 and last["conversation"]["interruptions"] >= 1
    assert summary["packets"]["sent"] > 0

    # The forced close was applied and the call went on: the bot answered and transcribed after it.
    forced = summary["forced_voice_events"]
    assert [event["kind"] for event in forced] == ["4015", "4015"]
    assert forced[0]["applied"] and forced[0]["recovered"], forced
    assert forced[0]["gap"] is not None and forced[0]["gap"]["recovered"], forced
    assert forced[1]["recovered"] is None  # 20 s before the end: reported, not judged
