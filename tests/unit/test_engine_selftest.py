"""``openab-voice self-test agent``: passes on the real engine, and fails when the engine is wrong."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from openab_voice.diagnostics.agent import run_agent_self_test
from openab_voice.engine.handle import SpeechHandle
from openab_voice.memory.embedder import MiniLMEmbedder
from openab_voice.memory.vectors import VectorLog


def _failed(result: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: c["detail"] for t in result["turns"] for c in t["checks"] if not c["passed"]}


def test_agent_self_test_passes_with_three_turns() -> None:
    result = run_agent_self_test()
    json.dumps(result)  # JSON-friendly
    assert result["passed"] is True, json.dumps(result, indent=1)
    assert [t["name"] for t in result["turns"]] == ["question_answer", "interruption", "memory_search"]
    assert all(t["passed"] and t["checks"] for t in result["turns"])
    interruption = result["turns"][1]
    assert (
        "speaking->interrupted" in interruption["states"]
        and "interrupted->listening" in interruption["states"]
    )
    assert result["turns"][2]["states"][1] == "thinking->tool_running"
    assert set(result["latency_ms"]) == {"tts_first_chunk_ms", "eou_to_first_audio_ms", "barge_in_ms"}
    assert result["errors"] == []


def test_the_memory_round_searches_the_real_memory_through_the_router() -> None:
    result = run_agent_self_test()
    assert result["memory"] == {"code": None, "reason": "1 records verified", "records": 1, "record_id": 1}
    memory = result["turns"][2]
    checks = {c["name"]: c for c in memory["checks"]}
    assert all(c["passed"] for c in checks.values()), json.dumps(memory, indent=1)
    assert checks["memory healthy"]["detail"] == "ok: 1 records verified"
    assert checks["tool ran through the router"]["detail"] == [["memory_search", True]]
    assert checks["search audited, no virtual time spent"]["detail"] == [["memory_search", "ok", 0.0]]
    (hit,) = json.loads(checks["stored record reaches the model"]["detail"])["results"]
    assert (hit["id"], hit["text"]) == (1, "Alice takes her coffee black, without sugar.")
    assert memory["played"] == ["You told me this:", "Alice takes her coffee black, without sugar."]


def test_slow_memory_work_does_not_race_the_virtual_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a slow machine: the search's embedding, on its worker thread, takes real time. The virtual
    # clock must wait for it, not run past the tool's 5 s timeout meanwhile (TOOL_TIMEOUT) or charge
    # the call whatever virtual time went by.
    embed = MiniLMEmbedder.embed

    def slow(self: MiniLMEmbedder, texts: list[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread() is not threading.main_thread():
            threading.Event().wait(0.3)  # the slow dependency itself, not a test waiting
        return embed(self, texts)

    monkeypatch.setattr(MiniLMEmbedder, "embed", slow)
    result = run_agent_self_test()
    assert result["passed"] is True, json.dumps(_failed(result), indent=1)
    checks = {c["name"]: c["detail"] for c in result["turns"][2]["checks"]}
    assert checks["search audited, no virtual time spent"] == [["memory_search", "ok", 0.0]]


def test_an_index_inconsistent_with_the_rows_fails_the_memory_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # The saved record's vector never reaches the file: reopened, the memory finds a row without a vector.
    monkeypatch.setattr(VectorLog, "add", lambda self, record_id, vector: None)
    result = run_agent_self_test()
    assert result["passed"] is False
    assert result["memory"]["code"] == "MEMORY_INDEX_MISMATCH"
    failed = _failed(result)
    assert (
        failed["memory healthy"] == "MEMORY_INDEX_MISMATCH: 1 rows without a vector, 0 vectors without a row"
    )
    assert "stored record reaches the model" in failed
    assert [t["passed"] for t in result["turns"]] == [True, True, False]


def test_faiss_unavailable_fails_the_memory_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # as if faiss-cpu were not installed
    result = run_agent_self_test()
    assert result["passed"] is False
    assert result["memory"]["code"] == "PROVIDER_UNAVAILABLE"
    failed = _failed(result)
    assert failed["memory healthy"].startswith("PROVIDER_UNAVAILABLE: long-term memory needs faiss-cpu")
    assert "stored record reaches the model" in failed


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
