"""Agent credentials named apart from ours (issue 10, finding 4): ``OPENAB_ACP_ENV`` entries.

An agent gets its own ``OPENAI_API_KEY`` (from another variable, or a file read at each spawn) while
ours never reaches it; ``OPENAB_ACP_AUTH_METHOD`` is the ACP ``authenticate`` method.
"""

from __future__ import annotations

import pytest

from openab_voice.config import load_settings, parse_agent_env_entry
from openab_voice.errors import ConfigError

BASE = {
    "OPENAB_ACTIONS_ENABLED": "1",
    "OPENAB_OPERATOR_USER_ID": "1",
    "OPENAB_ACP_AGENT_COMMAND": "codex-acp",
}


def test_entries_name_the_agent_variable_and_where_its_value_comes_from() -> None:
    settings = load_settings(
        BASE
        | {
            "OPENAB_ACP_ENV": "OPENAI_API_KEY=CODEX_OPENAI_API_KEY, ANTHROPIC_API_KEY=@/run/secrets/claude",
            "OPENAB_ACP_AUTH_METHOD": "openai-api-key",
        }
    )
    assert settings.acp_env == (
        "OPENAI_API_KEY=CODEX_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY=@/run/secrets/claude",
    )
    assert settings.acp_auth_method == "openai-api-key"
    assert [parse_agent_env_entry(e) for e in settings.acp_env] == [
        ("OPENAI_API_KEY", "CODEX_OPENAI_API_KEY"),
        ("ANTHROPIC_API_KEY", "@/run/secrets/claude"),
    ]


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("OPENAI_API_KEY=OPENAI_API_KEY", "not a variable the agent may be given"),  # ours
        ("KEY=OPENAI_API_KEY_FILE", "not a variable the agent may be given"),
        ("KEY=DISCORD_TOKEN", "not a variable the agent may be given"),
        ("KEY=OPENAB_DATABASE_URL", "not a variable the agent may be given"),
        ("KEY=OPENAB_OPERATOR_USER_ID", "openab-voice's own settings"),
        ("HOME=MY_HOME", "not the agent's to set"),
        ("OPENAB_X=Y", "not the agent's to set"),
        ("KEY=@relative/file", "absolute path"),
        ("JUSTANAME", "expected NAME=FROM_VAR"),
        ("1BAD=X", "expected NAME=FROM_VAR"),
    ],
)
def test_entries_that_would_leak_ours_or_are_malformed_are_refused(entry: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(BASE | {"OPENAB_ACP_ENV": entry})
    assert caught.value.setting == "OPENAB_ACP_ENV" and why in caught.value.message
