"""``bench actions``: each target is compared with the statistic it names; the sandbox part measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.acp.sandbox import find_bwrap
from openab_voice.bench.actions import TARGETS, meets_targets, sandbox_overhead


def test_targets_compare_the_statistic_they_name() -> None:
    result = {
        "cancel_race": {"lost": 0},
        # A P50 within the target must not pass a P95 target.
        "sandbox": {
            "overhead_ms": {"n": 50, "p50": 4.0, "p95": TARGETS["sandbox.overhead_ms.p95"] + 1, "max": 90.0}
        },
    }
    assert meets_targets(result) == {"cancel_race.lost": True, "sandbox.overhead_ms.p95": False}
    result["cancel_race"]["lost"] = 1
    result["sandbox"] = {"error": {"code": "BENCH_NO_SANDBOX", "message": "no bwrap"}}
    assert meets_targets(result) == {"cancel_race.lost": False, "sandbox.overhead_ms.p95": False}


def test_sandbox_overhead_is_measured_in_a_real_sandbox(tmp_path: Path) -> None:
    if find_bwrap() is None:
        pytest.fail("bubblewrap is not installed: run scripts/setup.sh", pytrace=False)
    result = sandbox_overhead(tmp_path, trials=3)
    assert result["trials"] == 3, result
    assert result["sandboxed_start_ms"]["n"] == result["overhead_ms"]["n"] == 3
    assert result["sandboxed_start_ms"]["p50"] > 0
