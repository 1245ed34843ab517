import json
import sys

from openab_voice.cli import main


def test_self_test_audio_fails_when_the_configured_apm_cannot_start(monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAB_APM_PROVIDER", "webrtc-audio-processing")
    monkeypatch.setitem(sys.modules, "webrtc_audio_processing", None)  # as if the extra were not installed
    assert main(["self-test", "audio", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is False
    assert result["apm"]["provider"] == "webrtc-audio-processing"
    providers = next(c for c in result["checks"] if c["name"] == "providers")
    assert providers["passed"] is False and "webrtc-audio-processing" in providers["detail"]


def test_self_test_agent_fails_on_a_memory_health_error(monkeypatch, capsys) -> None:
    from openab_voice.memory.vectors import VectorLog

    # The saved record's vector is lost: the memory's consistency check reports MEMORY_INDEX_MISMATCH.
    monkeypatch.setattr(VectorLog, "add", lambda self, record_id, vector: None)
    assert main(["self-test", "agent", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["passed"] is False and result["memory"]["code"] == "MEMORY_INDEX_MISMATCH"
    memory = next(t for t in result["turns"] if t["name"] == "memory_search")
    healthy = next(c for c in memory["checks"] if c["name"] == "memory healthy")
    assert healthy["passed"] is False and healthy["detail"].startswith("MEMORY_INDEX_MISMATCH")


def test_run_without_a_token_names_the_setting(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    monkeypatch.delenv("DISCORD_TOKEN_FILE", raising=False)
    assert main(["run"]) == 2
    assert "DISCORD_TOKEN" in capsys.readouterr().err
