"""``openab-voice self-test agent``: passes on the real engine, and fails when the engine is wrong."""

from __future__ import annotations

import json

import pytest

from openab_voice.diagnostics.agent import run_agent_self_test
from openab_voice.engine.handle import SpeechHandle


def test_agent_self_test_passes_with_three_turns() -> None:
    result = run_agent_self_test()
    json.dumps(result)  # JSON-friendly
    assert result["passed"] is True, json.dumps(result, indent=1)
    assert [t["name"] for t in result["turns"]] == ["question_answer", "interruption", "tool_call"]
    assert all(t["passed"] and t["checks"] for t in result["turns"])
    interruption = result["turns"][1]
    assert (
        "speaking->interrupted" in interruption["states"]
        and "interrupted->listening" in interruption["states"]
    )
    assert result["turns"][2]["states"][1] == "thinking->tool_running"
    assert set(result["latency_ms"]) == {"tts_first_chunk_ms", "eou_to_first_audio_ms", "barge_in_ms"}
    assert result["errors"] == []


def test_committing_unheard_text_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # An engine that commits everything it meant to say, heard or not, must not pass.
    monkeypatch.setattr(SpeechHandle, "heard_text", lambda self: self.text)
    result = run_agent_self_test()
    assert result["passed"] is False
    failed = {c["name"] for t in result["turns"] for c in t["checks"] if not c["passed"]}
    assert "only heard text committed" in failed


def test_ignoring_barge_in_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    from openab_voice.engine.interruption import InterruptionController

    monkeypatch.setattr(InterruptionController, "on_speech_started", lambda self, state, event: None)
    result = run_agent_self_test()
    assert result["passed"] is False
    assert result["turns"][1]["passed"] is False
