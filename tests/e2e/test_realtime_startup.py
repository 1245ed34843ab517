"""Start-up checks of the realtime engine against the loopback realtime server: ``check-config``
and the bot's probe report a refused key or an unknown model as a structured error, and a bot whose
provider refused it stays up receive-only (no dialogue)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from openab_voice.app.providers import probe_engine
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.settings import DialogueSettings
from openab_voice.errors import OpenabError
from openab_voice.providers.realtime_openai import OpenAIRealtime, probe, realtime_config
from openab_voice.testing.realtime import LoopbackRealtimeServer, ScriptedListener, ToneVoice

pytestmark = pytest.mark.timeout(60)

KEY = "sk-startup"


def _server() -> LoopbackRealtimeServer:
    return LoopbackRealtimeServer(api_key=KEY, listener=ScriptedListener(""), voice=ToneVoice())


def _env(server: LoopbackRealtimeServer, **extra: str) -> dict[str, str]:
    return {
        "OPENAB_ENGINE": "realtime",
        "OPENAB_PLAYBACK_ENABLED": "true",
        "OPENAB_DIALOGUE_ENABLED": "true",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": KEY,
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({}, None),
        ({"OPENAI_API_KEY": "sk-wrong"}, "REALTIME_AUTH_FAILED"),
        ({"OPENAI_REALTIME_MODEL": "gpt-nonexistent"}, "REALTIME_MODEL_UNKNOWN"),
    ],
    ids=["accepted", "auth", "model"],
)
async def test_probe_names_what_the_server_refused(extra: dict[str, str], code: str | None) -> None:
    async with _server() as server:
        connector = OpenAIRealtime(realtime_config(load_settings(_env(server, **extra))))
        try:
            if code is None:
                await probe(connector)
            else:
                with pytest.raises(OpenabError) as info:
                    await probe(connector)
                assert info.value.code == code and not info.value.retryable
        finally:
            await connector.aclose()


async def test_a_refused_provider_leaves_the_bot_receive_only() -> None:
    async with _server() as server:
        settings = load_settings(_env(server, OPENAI_API_KEY="sk-wrong"))
        providers = ConversationProviders(
            dialogue=DialogueSettings(), realtime=OpenAIRealtime(realtime_config(settings))
        )
        bus = EventBus()
        errors: list[ErrorRaised] = []
        bus.subscribe(ErrorRaised, errors.append)
        error = await probe_engine(providers, bus=bus, clock=SystemClock())
        assert error is not None and error.code == "REALTIME_AUTH_FAILED"
        assert providers.dialogue is None  # no conversation is built: calls stay up, receive-only
        assert [e.code for e in errors] == ["REALTIME_AUTH_FAILED"]
        assert "sk-wrong" not in errors[0].message
        await providers.aclose()


@pytest.mark.parametrize(
    ("extra", "code"),
    [({"OPENAI_API_KEY": "sk-wrong"}, "REALTIME_AUTH_FAILED"), ({}, None)],
    ids=["auth", "accepted"],
)
async def test_check_config_reports_the_realtime_provider(extra: dict[str, str], code: str | None) -> None:
    async with _server() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_", "OPENAI_"))}
        env.update(_env(server, **extra))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "openab_voice",
            "check-config",
            "--json",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        report = json.loads(out)
        assert report["settings"]["OPENAB_ENGINE"] == "realtime"
        assert report["settings"]["OPENAI_API_KEY"] == "set"  # never the value
        if code is None:
            assert proc.returncode == 0 and report["ok"] is True
        else:
            assert proc.returncode == 1 and report["ok"] is False
            assert report["error"]["code"] == code
            assert "sk-wrong" not in out.decode()
