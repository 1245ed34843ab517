import json

import pytest

from openab_voice.cli import main
from openab_voice.config import load_settings, public_view
from openab_voice.errors import ConfigError


def test_defaults_are_receive_only() -> None:
    s = load_settings({})
    assert s.playback_enabled is False
    assert s.discord_token is None


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"OPENAB_JITTER_DEPTH": "0"}, "OPENAB_JITTER_DEPTH"),
        ({"OPENAB_PLAYBACK_ENABLED": "maybe"}, "OPENAB_PLAYBACK_ENABLED"),
        ({"OPENAB_JITER_DEPTH": "3"}, "OPENAB_JITER_DEPTH"),
        ({"OPENAB_GUILD_ID": "-4"}, "OPENAB_GUILD_ID"),
        ({"DISCORD_TOKEN_FILE": "/nonexistent/token"}, "DISCORD_TOKEN_FILE"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert info.value.setting == setting
    assert setting in info.value.message


def test_secret_from_file_and_never_shown(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-value\n")
    s = load_settings({"DISCORD_TOKEN_FILE": str(token)})
    assert s.discord_token is not None and s.discord_token.get_secret_value() == "s3cr3t-value"
    view = public_view(s)
    assert view["DISCORD_TOKEN"] == "set"
    assert "s3cr3t-value" not in json.dumps(view) and "s3cr3t-value" not in repr(s)


def test_secret_and_file_together_is_ambiguous(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("a")
    with pytest.raises(ConfigError) as info:
        load_settings({"DISCORD_TOKEN": "b", "DISCORD_TOKEN_FILE": str(token)})
    assert info.value.setting == "DISCORD_TOKEN_FILE"


def test_empty_secret_file_rejected(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        load_settings({"DISCORD_TOKEN_FILE": str(token)})


def test_check_config_json_hides_secrets(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "tok-123456")
    monkeypatch.setenv("OPENAB_JITTER_DEPTH", "5")
    assert main(["check-config", "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["settings"]["OPENAB_JITTER_DEPTH"] == 5
    assert data["settings"]["DISCORD_TOKEN"] == "set"
    assert "tok-123456" not in out


def test_check_config_bad_setting_exits_2(monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAB_RECEIVE_QUEUE_PACKETS", "1")
    assert main(["check-config", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["error"]["code"] == "CONFIG_INVALID"
    assert data["error"]["setting"] == "OPENAB_RECEIVE_QUEUE_PACKETS"


def test_action_settings_parse_lists_and_refuse_our_secrets_in_the_agent_env() -> None:
    s = load_settings(
        {
            "OPENAB_ACTIONS_ENABLED": "true",
            "OPENAB_OPERATOR_USER_ID": "42",
            "OPENAB_ACP_AGENT_COMMAND": "claude-code-acp",
            "OPENAB_TRUSTED_LISTENER_IDS": "1, 2",
            "OPENAB_ACP_ENV_ALLOWLIST": "PATH,ANTHROPIC_API_KEY",
            "OPENAB_DATABASE_URL": "postgresql+psycopg://u:hunter2@db/x",
        }
    )
    assert s.trusted_listener_ids == (1, 2) and s.acp_env_allowlist == ("PATH", "ANTHROPIC_API_KEY")
    view = public_view(s)
    assert view["OPENAB_DATABASE_URL"] == "set" and "hunter2" not in json.dumps(view)
    for bad in ("PATH,DISCORD_TOKEN", "OPENAI_API_KEY_FILE", "OPENAB_DATABASE_URL"):
        with pytest.raises(ConfigError) as info:
            load_settings({"OPENAB_ACP_ENV_ALLOWLIST": bad})
        assert info.value.setting == "OPENAB_ACP_ENV_ALLOWLIST"
    with pytest.raises(ConfigError) as missing:
        load_settings({"OPENAB_ACTIONS_ENABLED": "true", "OPENAB_ACP_AGENT_COMMAND": "x"})
    assert missing.value.setting == "OPENAB_OPERATOR_USER_ID"
