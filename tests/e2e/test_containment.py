"""Containment fails closed in every mode (issue 28): where no agent can be contained, no action runs.

Through the real bot on the emulator: with ``OPENAB_ACP_SANDBOX=auto`` and no working bubblewrap,
a spoken task is refused with the reason (nothing posted, nothing spawned) and ``/voice status``
says why; ``check-config`` exits 1 naming it; ``openab-voice executor`` refuses to start. With
containment turned off explicitly, every proposal says so.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from openab_voice.actions.events import ActionRequestRefused
from openab_voice.app.actions import ActionParts, build_action_parts
from openab_voice.app.worker import run_worker
from openab_voice.bus import EventBus
from openab_voice.clock import SystemClock
from openab_voice.config import Settings, load_settings
from openab_voice.errors import ConfigError
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator
from tests.e2e.test_actions import GUEST, OPERATOR, proposals, say
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

AGENT = shlex.join([sys.executable, "-m", "openab_voice.testing.acp_agent"])


def settings_for(db_url: str, tmp_path: Path, sandbox: str) -> Settings:
    return load_settings(
        {},
        transcription_enabled=False,
        actions_enabled=True,
        operator_user_id=OPERATOR,
        acp_agent_command=AGENT,
        acp_sandbox=sandbox,
        database_url=db_url,
        data_dir=tmp_path / "data",
    )


def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH without bubblewrap (the probe looks it up there), as on a host or pod without it."""
    empty = tmp_path / "no-bwrap"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


@asynccontextmanager
async def bot(settings: Settings, parts: ActionParts) -> AsyncIterator[BotOnEmulator]:
    try:
        async with BotOnEmulator(
            settings,
            EmulatorConfig(dave=False),
            users={OPERATOR: "olivia", GUEST: "gus"},
            clock=SystemClock(),
            bus=EventBus(),
            actions=parts,
        ) as h:
            yield h
    finally:
        parts.store.close()


def parts_for(settings: Settings) -> ActionParts:
    parts = build_action_parts(settings, clock=SystemClock())
    assert parts is not None
    return parts


async def test_auto_without_bubblewrap_refuses_every_action_and_says_why(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(db_url, tmp_path, "auto")
    with monkeypatch.context() as patch:  # only while the bot starts: it probes bubblewrap then
        no_bwrap(patch, tmp_path)
        parts = parts_for(settings)
    async with bot(settings, parts) as h:
        assert h.actions is not None
        assert h.actions.broker.settings.refusal is not None
        refused: list[ActionRequestRefused] = []
        h.bus.subscribe(ActionRequestRefused, refused.append)
        say(h, OPERATOR, "Start a task: write the release notes for version two.", 1)
        await until(lambda: bool(refused), "the refusal")
        assert refused[0].code == "ACTION_CONTAINMENT_UNAVAILABLE"
        assert not proposals(h) and not h.actions.executor.running
        assert await h.actions.broker.recent(h.emulator.guild_id) == []
        status = await h.command("status", user_id=OPERATOR)
        assert "Actions: actions refused: no agent containment is available: bubblewrap" in status
        assert "OPENAB_ACP_SANDBOX=off" in status


async def test_containment_off_is_said_on_every_proposal(db_url: str, tmp_path: Path) -> None:
    settings = settings_for(db_url, tmp_path, "off")
    async with bot(settings, parts_for(settings)) as h:
        say(h, OPERATOR, "Start a task: write the release notes for version two.", 1)
        await until(lambda: bool(proposals(h)), "the proposal")
        content = str(proposals(h)[0]["content"])
        assert "Containment: the agent runs WITHOUT containment (OPENAB_ACP_SANDBOX=off)" in content
        assert "Actions: off: the agent sandbox is off" in await h.command("status", user_id=OPERATOR)


def test_check_config_exits_1_naming_the_missing_containment(tmp_path: Path) -> None:
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    env = {
        "PATH": str(empty),
        "HOME": str(tmp_path),
        "OPENAB_DATA_DIR": str(tmp_path / "data"),
        "OPENAB_ACTIONS_ENABLED": "true",
        "OPENAB_OPERATOR_USER_ID": "5",
        "OPENAB_ACP_AGENT_COMMAND": "claude-code-acp",
    }
    done = subprocess.run(
        [sys.executable, "-m", "openab_voice", "check-config", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["ok"] is False and out["error"]["code"] == "ACP_CONTAINMENT_UNAVAILABLE"
    assert out["containment"]["mode"] == "unavailable" and "bubblewrap" in out["containment"]["detail"]
    with_off = subprocess.run(
        [sys.executable, "-m", "openab_voice", "check-config", "--json"],
        env={**env, "OPENAB_ACP_SANDBOX": "off"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert with_off.returncode == 0, with_off.stderr
    assert json.loads(with_off.stdout)["containment"]["mode"] == "off"


async def test_an_executor_without_containment_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_bwrap(monkeypatch, tmp_path)
    settings = load_settings(
        {},
        database_url="postgresql+psycopg://nobody@127.0.0.1:1/none",  # never reached: it refuses first
        acp_agent_command=AGENT,
        data_dir=tmp_path / "data",
    )
    with pytest.raises(ConfigError) as caught:
        await run_worker(settings, clock=SystemClock(), bus=EventBus(), environ=dict(os.environ))
    assert caught.value.code == "ACP_CONTAINMENT_UNAVAILABLE"
    assert "bubblewrap" in caught.value.message
