"""``OPENAB_LANGUAGE``: every stage that hears or speaks must be able to do the language, checked at
start-up naming the setting at fault; the language reaches the STT and the model's instructions."""

from __future__ import annotations

import pytest

from openab_voice.app.providers import _speech_to_speech_dialogue
from openab_voice.config import load_settings
from openab_voice.engine.settings import DEFAULT_SYSTEM_PROMPT, language_instruction
from openab_voice.errors import ConfigError

DIALOGUE = {"OPENAB_PLAYBACK_ENABLED": "true", "OPENAB_DIALOGUE_ENABLED": "true"}


@pytest.mark.parametrize("language", ["zh", "auto"])
def test_an_english_only_stage_fails_at_start_up_naming_its_setting(language: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"OPENAB_LANGUAGE": language})
    assert caught.value.details["setting"] == "OPENAB_STT_MODEL"
    assert "tiny.en transcribes English only" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        load_settings({"OPENAB_LANGUAGE": language, "OPENAB_STT_MODEL": "base", **DIALOGUE})
    assert caught.value.details["setting"] == "OPENAB_TTS_PROVIDER"
    with pytest.raises(ConfigError) as caught:
        load_settings({"OPENAB_LANGUAGE": "fr"})
    assert caught.value.details["setting"] == "OPENAB_LANGUAGE"


def test_a_stage_that_can_do_the_language_starts() -> None:
    heard_only = load_settings({"OPENAB_LANGUAGE": "zh", "OPENAB_STT_MODEL": "base"})
    assert heard_only.language == "zh"  # transcription only: no voice needed
    spoken = {"OPENAB_LANGUAGE": "zh", "OPENAB_STT_MODEL": "base", **DIALOGUE}
    assert load_settings({**spoken, "OPENAB_TTS_PROVIDER": "openai"}).tts_provider == "openai"
    assert load_settings({**spoken, "OPENAB_ENGINE": "live"}).engine == "live"  # the model speaks
    assert load_settings({}).language == "en"  # English unchanged


def test_the_model_is_told_the_users_language() -> None:
    english = _speech_to_speech_dialogue(load_settings(DIALOGUE | {"OPENAB_ENGINE": "realtime"}))
    assert english.system_prompt == DEFAULT_SYSTEM_PROMPT
    chinese = _speech_to_speech_dialogue(
        load_settings(
            {**DIALOGUE, "OPENAB_ENGINE": "live", "OPENAB_LANGUAGE": "zh", "OPENAB_STT_MODEL": "base"}
        )
    )
    instruction = language_instruction("zh")
    assert instruction is not None and chinese.system_prompt.endswith(instruction)
    assert "Chinese" in instruction
    assert language_instruction("en") is None
