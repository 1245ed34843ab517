"""The realtime model names: the default is one the installed ``openai`` SDK lists, and ``check-config``
warns (exit 0) on a retired or legacy name, never on the default."""

from __future__ import annotations

import json
import typing

import pytest
from openai.types.realtime import RealtimeSessionCreateRequest

from openab_voice.cli import main
from openab_voice.config import config_warnings, load_settings
from openab_voice.providers.realtime import DEFAULT_MODEL
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL, RETIRED_REALTIME_MODELS


def _sdk_models() -> set[str]:
    """The names of the SDK's ``model`` Literal, read now (not copied): an SDK that drops one fails here."""
    names: set[str] = set()
    for arg in typing.get_args(RealtimeSessionCreateRequest.model_fields["model"].annotation):
        names.update(a for a in typing.get_args(arg) if isinstance(a, str))
    return names


def test_the_default_is_a_current_model_the_sdk_lists() -> None:
    sdk = _sdk_models()
    assert DEFAULT_REALTIME_MODEL in sdk
    assert DEFAULT_REALTIME_MODEL not in RETIRED_REALTIME_MODELS
    assert "mini" not in DEFAULT_REALTIME_MODEL
    assert load_settings({}).openai_realtime_model == DEFAULT_MODEL == DEFAULT_REALTIME_MODEL


def test_the_retired_names_are_the_sdks() -> None:
    # Decided from the SDK's Literal; a name it no longer lists is shut down and the server refuses it
    # (REALTIME_MODEL_UNKNOWN, an error): drop it from the list then.
    assert _sdk_models() >= RETIRED_REALTIME_MODELS
    assert {
        "gpt-realtime",
        "gpt-4o-realtime-preview",
        "gpt-4o-mini-realtime-preview",
    } <= RETIRED_REALTIME_MODELS


@pytest.mark.parametrize("model", ["gpt-realtime", "gpt-4o-realtime-preview-2024-12-17"])
def test_check_config_warns_on_a_retired_model(model: str, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_REALTIME_MODEL", model)
    assert main(["check-config", "--json"]) == 0  # a warning, not an error
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and "error" not in data
    [warning] = data["warnings"]
    assert warning["code"] == "CONFIG_REALTIME_MODEL_RETIRED"
    assert warning["setting"] == "OPENAI_REALTIME_MODEL"
    assert model in warning["message"] and DEFAULT_REALTIME_MODEL in warning["message"]
    assert main(["check-config"]) == 0
    err = capsys.readouterr().err
    assert "warning: [CONFIG_REALTIME_MODEL_RETIRED]" in err


def test_check_config_does_not_warn_on_the_default(monkeypatch, capsys) -> None:
    monkeypatch.delenv("OPENAI_REALTIME_MODEL", raising=False)
    assert main(["check-config", "--json"]) == 0
    assert "warnings" not in json.loads(capsys.readouterr().out)
    assert config_warnings(load_settings({"OPENAI_REALTIME_MODEL": "gpt-realtime-2"})) == []
