"""``bench executor`` on a small run: real workers on the test PostgreSQL, every job once."""

from __future__ import annotations

from openab_voice.bench.executor import run


def test_bench_executor_runs_every_job_once_and_reports_its_figures(postgres_server_url: str) -> None:
    result = run(
        workers=(2,), jobs=4, latency_jobs=2, cancels=2, heartbeat_cancels=0, postgres_url=postgres_server_url
    )

    two = result["workers"]["2"]
    assert result["double_executions"] == 0 and two["not_succeeded"] == 0, result
    assert two["worker_exit_codes"] == [0, 0]  # drained on SIGTERM
    assert two["confirm_to_running_ms"]["n"] == 2 and two["queued_confirm_to_running_ms"]["n"] == 4
    assert 0 < two["confirm_to_running_ms"]["p50"] < 30_000
    assert two["jobs_per_s"] > 0
    cancel = result["cancel"]
    assert cancel["not_cancelled"] == 0 and cancel["worker_exit_code"] == 0, cancel
    # Notified: well inside the 10 s heartbeat that carried every cancel before.
    assert cancel["to_acp_cancel_ms"]["n"] == 2 and 0 < cancel["to_acp_cancel_ms"]["max"] < 5_000
