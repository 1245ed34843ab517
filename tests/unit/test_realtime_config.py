"""The realtime engine's settings: OPENAB_ENGINE, OPENAI_REALTIME_MODEL / _VOICE, the key from the
environment or a file; a bad value stops start-up naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.config import load_settings, public_view
from openab_voice.errors import ConfigError
from openab_voice.providers.realtime_openai import realtime_config
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL


def test_defaults_are_the_cascade_and_the_current_realtime_model() -> None:
    settings = load_settings({})
    assert settings.engine == "cascade"
    assert (settings.openai_realtime_model, settings.openai_realtime_voice) == (
        DEFAULT_REALTIME_MODEL,
        "marin",
    )


def test_the_realtime_connection_comes_from_the_openai_settings(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    env = {
        "OPENAB_ENGINE": "realtime",
        "OPENAI_REALTIME_MODEL": "gpt-realtime-mini",
        "OPENAI_REALTIME_VOICE": "cedar",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY_FILE": str(key),
    }
    settings = load_settings(env)
    config = realtime_config(settings)
    assert (config.model, config.voice, config.base_url) == (
        "gpt-realtime-mini",
        "cedar",
        "http://127.0.0.1:9/v1",
    )
    assert config.api_key == "sk-from-file"
    view = public_view(settings)
    assert view["OPENAB_ENGINE"] == "realtime" and view["OPENAI_API_KEY"] == "set"
    assert "sk-from-file" not in repr(view)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OPENAB_ENGINE", "speech2speech"),
        ("OPENAI_REALTIME_MODEL", "gpt realtime"),
        ("OPENAI_REALTIME_MODEL", ""),
        ("OPENAI_REALTIME_VOICE", "marin; rm -rf"),
    ],
)
def test_a_bad_value_names_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({name: value})
    assert info.value.setting == name
