"""Agent credentials named apart from ours (issue 10, finding 4): ``OPENAB_ACP_ENV`` entries.

An agent gets its own ``OPENAI_API_KEY`` (from another variable, or a file read at each spawn) while
ours never reaches it; ``OPENAB_ACP_AUTH_METHOD`` is the ACP ``authenticate`` method.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from openab_voice.actions.events import AgentPromptSent
from openab_voice.actions.ports import CONFIRM
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.errors import ConfigError
from openab_voice.jobs import JobStatus
from openab_voice.settings.agent_env import parse_agent_env_entry
from openab_voice.store.records import ActionRecord
from tests.fakes.actions import OPERATOR, PlaneRig, plane_rig, request

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


# --- through the executor, with the scripted agent playing codex-acp (``--mode login``) ---------------

OURS = "sk-ours-never-leaks-0123456789"
THEIRS = "sk-agent-own-key-9876543210"


async def run_login(rig: PlaneRig) -> ActionRecord:
    outcome = await rig.broker.propose(request("fix the build"))
    assert outcome.ok and outcome.action is not None, outcome
    action_id = outcome.action.id
    clicked = await rig.broker.click(
        decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=rig.channel.message_ids[action_id]
    )
    assert clicked.ok, clicked
    await rig.executor.wait_idle()
    return rig.store.require(action_id)


def agent_env(record: ActionRecord) -> dict[str, str]:
    assert record.result_text is not None
    line = next(line for line in record.result_text.splitlines() if line.startswith("ENV "))
    env: dict[str, str] = json.loads(line.removeprefix("ENV "))
    return env


async def test_the_agent_authenticates_with_its_own_key_and_never_sees_ours(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="login",
        environ={"OPENAI_API_KEY": OURS, "AGENT_OPENAI_KEY": THEIRS, "PATH": os.environ["PATH"]},
        env_allowlist=("PATH", "OPENAI_API_KEY"),  # allowlisting ours is refused at spawn too
        credentials=(("OPENAI_API_KEY", "AGENT_OPENAI_KEY"),),
        auth_method="api-key",
    ) as rig:
        record = await run_login(rig)

        assert record.status is JobStatus.SUCCEEDED, (record.error_code, record.detail)
        assert agent_env(record)["OPENAI_API_KEY"] == THEIRS
        assert OURS not in rig.channel.everything_posted()
        assert all(OURS not in str(entry.detail) for entry in rig.store.audit_entries())


async def test_a_credential_file_is_read_at_spawn(db_url: str, tmp_path: Path) -> None:
    key_file = tmp_path / "codex.key"
    key_file.write_text(THEIRS + "\n")
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="login",
        credentials=(("OPENAI_API_KEY", f"@{key_file}"),),
        auth_method="api-key",
    ) as rig:
        record = await run_login(rig)
        assert record.status is JobStatus.SUCCEEDED, (record.error_code, record.detail)
        assert agent_env(record)["OPENAI_API_KEY"] == THEIRS


@pytest.mark.parametrize(
    ("auth_method", "credentials", "code", "said"),
    [
        (None, (("OPENAI_API_KEY", "AGENT_OPENAI_KEY"),), "ACP_AUTH_REQUIRED", "OPENAB_ACP_AUTH_METHOD"),
        (
            "chatgpt",
            (("OPENAI_API_KEY", "AGENT_OPENAI_KEY"),),
            "ACP_AUTH_METHOD_UNAVAILABLE",
            "offers: api-key",
        ),
        ("api-key", (), "ACP_AUTH_FAILED", "authentication 'api-key' refused"),
        ("api-key", (("OPENAI_API_KEY", "UNSET_KEY"),), "ACP_CREDENTIAL_MISSING", "UNSET_KEY"),
    ],
    ids=["no-method", "method-not-offered", "no-key", "credential-unset"],
)
async def test_authentication_failures_fail_before_the_prompt(
    db_url: str,
    tmp_path: Path,
    auth_method: str | None,
    credentials: tuple[tuple[str, str], ...],
    code: str,
    said: str,
) -> None:
    async with plane_rig(
        db_url,
        tmp_path,
        clock=SystemClock(),
        mode="login",
        environ={"AGENT_OPENAI_KEY": THEIRS},
        credentials=credentials,
        auth_method=auth_method,
    ) as rig:
        record = await run_login(rig)

        assert (record.status, record.error_code) == (JobStatus.FAILED, code), record.detail
        assert record.detail is not None and said in record.detail
        assert "the prompt was not sent" in record.detail or code == "ACP_CREDENTIAL_MISSING"
        assert rig.published(AgentPromptSent) == []
        assert THEIRS not in rig.channel.everything_posted()
