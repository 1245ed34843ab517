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


def test_run_without_a_token_names_the_setting(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    monkeypatch.delenv("DISCORD_TOKEN_FILE", raising=False)
    assert main(["run"]) == 2
    assert "DISCORD_TOKEN" in capsys.readouterr().err
