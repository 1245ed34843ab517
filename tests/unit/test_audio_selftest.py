"""The audio self-test and the front-end benchmark: real providers, real numbers, no faked pass."""

from __future__ import annotations

import json
import sys

from openab_voice.audio import FrontEndSettings
from openab_voice.bench.frontend import run as bench_frontend
from openab_voice.diagnostics.audio import ERLE_TARGET_DB, run_audio_self_test


def test_self_test_shape_and_acoustic_checks() -> None:
    result = run_audio_self_test()
    json.dumps(result)  # the CLI prints it as JSON
    assert set(result) == {"passed", "apm", "echo_only", "double_talk", "vad", "checks", "apm_comparison"}
    assert set(result["apm"]) == {"provider", "erle_db", "frame_us_p50", "frame_us_p95"}
    assert result["apm"]["provider"] == "webrtc" and result["vad"]["provider"] == "silero"
    checks = {c["name"]: c for c in result["checks"]}
    assert set(checks) == {
        "providers",
        "apm_erle",
        "apm_latency",
        "echo_only",
        "double_talk",
        "vad_speech",
        "vad_noise",
    }
    # Timing depends on the machine; the acoustic results do not.
    for name in ("providers", "apm_erle", "echo_only", "double_talk", "vad_speech", "vad_noise"):
        assert checks[name]["passed"], checks[name]
    assert result["apm"]["erle_db"] >= ERLE_TARGET_DB
    assert result["echo_only"] == {"speech_starts": 0, "interruptions": 0}
    assert result["double_talk"]["user_speech_detected"] is True
    assert 0 < result["apm"]["frame_us_p50"] <= result["apm"]["frame_us_p95"]
    assert result["vad"]["frame_us_p95"] > 0
    assert result["passed"] == all(c["passed"] for c in result["checks"])
    # Both APMs on the same echo path, side by side; informational, not a check.
    comparison = {row["provider"]: row for row in result["apm_comparison"]}
    assert list(comparison) == ["webrtc", "webrtc-audio-processing"]
    for row in comparison.values():
        assert row["available"] and row["erle_db"] >= 30.0 and 0 < row["frame_us_p50"] <= row["frame_us_p95"]


def test_self_test_fails_when_a_provider_is_unavailable_or_degraded(monkeypatch) -> None:
    # As if the optional binding were not installed (None in sys.modules makes its import fail).
    monkeypatch.setitem(sys.modules, "webrtc_audio_processing", None)
    unavailable = run_audio_self_test(FrontEndSettings(apm_provider="webrtc-audio-processing"))
    assert unavailable["passed"] is False
    assert unavailable["checks"][0]["name"] == "providers" and not unavailable["checks"][0]["passed"]
    assert "PROVIDER_UNAVAILABLE" in unavailable["checks"][0]["detail"]
    missing = unavailable["apm_comparison"][1]
    assert missing["available"] is False and missing["erle_db"] is None
    assert missing["error"]["code"] == "PROVIDER_UNAVAILABLE"
    assert missing["error"]["extra"] == "webrtc-audio-processing"
    degraded = run_audio_self_test(FrontEndSettings(apm_provider="disabled"))
    assert degraded["passed"] is False
    assert "degraded" in degraded["checks"][0]["detail"]


def test_frontend_benchmark_reports_cpu_per_speaker() -> None:
    result = bench_frontend(seconds=1.0, speakers=2)
    json.dumps(result)
    assert result["speakers"] == 2 and result["seconds"] == 1.0
    assert result["cpu_ms_per_speaker_per_audio_s"] > 0
    assert result["realtime_speakers_per_core"] == int(1000 / result["cpu_ms_per_speaker_per_audio_s"])
    assert result["meets_target"] == (result["realtime_speakers_per_core"] >= 25)
    stages = result["stage_us_per_20ms_frame"]
    assert all(stages[k] is not None and stages[k] > 0 for k in ("opus_decode", "resample", "apm", "vad"))
    assert result["aec_reference"] == "auto" and result["other_reference"]["aec_reference"] == "always"
    assert result["other_reference"]["cpu_ms_per_speaker_per_audio_s"] > 0
    assert [row["provider"] for row in result["apm_comparison"]] == ["webrtc", "webrtc-audio-processing"]
    assert all(row["available"] and row["frame_us_p50"] > 0 for row in result["apm_comparison"])
