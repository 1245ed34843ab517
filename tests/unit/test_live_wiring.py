"""``OPENAB_ENGINE=live`` wired like ``realtime`` (docs/adr/0022): the settings and their one set of
defaults, the providers the app builds, the start-up probe and ``check-config`` against the loopback
GPT-Live server (a refused key or an unknown model is a structured error and the dialogue goes off),
the CLI's ``--engine live`` and the demo's chat-model responder."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from openai.types.live import FunctionTool

from openab_voice.app.providers import build_providers, live_config, probe_engine
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.cli.parser import build_parser
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings, public_view
from openab_voice.demo.live import ChatLiveResponder, loopback_live_provider
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.live import LiveSettings
from openab_voice.engine.settings import DialogueSettings
from openab_voice.errors import ConfigError
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.providers.live import DEFAULT_LIVE_MODEL, DEFAULT_LIVE_VOICE, LIVE_MODELS, LiveConfig
from openab_voice.providers.live_openai import OpenAILive, probe
from openab_voice.settings.names import env_name
from openab_voice.testing.live import (
    Appended,
    CallFunction,
    Line,
    LiveTurn,
    LoopbackLiveServer,
    ScriptedListener,
    Speak,
    ToneVoice,
)

pytestmark = pytest.mark.timeout(60)

KEY = "sk-live-startup"
MODEL = env_name("openai_live_model")
VOICE = env_name("openai_live_voice")
BACKEND = env_name("openai_live_backend_model")


def _server() -> LoopbackLiveServer:
    return LoopbackLiveServer(api_key=KEY, listener=ScriptedListener(""), voice=ToneVoice())


def _env(server: LoopbackLiveServer, **extra: str) -> dict[str, str]:
    return {
        "OPENAB_ENGINE": "live",
        "OPENAB_PLAYBACK_ENABLED": "true",
        "OPENAB_DIALOGUE_ENABLED": "true",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": KEY,
        **extra,
    }


# --- settings ---


def test_the_live_defaults_are_the_wire_s_and_the_engine_s() -> None:
    settings = load_settings({"OPENAB_ENGINE": "live"})
    assert settings.engine == "live"
    assert (settings.openai_live_model, settings.openai_live_voice) == (
        DEFAULT_LIVE_MODEL,
        DEFAULT_LIVE_VOICE,
    )
    assert settings.openai_live_model in LIVE_MODELS
    assert settings.openai_live_backend_model == LiveSettings().backend_model
    assert LiveSettings().voice == settings.openai_live_voice
    assert live_config(settings) == LiveConfig()  # one definition per setting (ADR 0017)


def test_the_live_connection_comes_from_the_openai_settings(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-from-file\n")
    env = {
        "OPENAB_ENGINE": "live",
        MODEL: "gpt-live-1.1",
        VOICE: "cedar",
        BACKEND: "gpt-5.1-mini",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY_FILE": str(key),
    }
    settings = load_settings(env)
    config = live_config(settings)
    assert (config.model, config.voice, config.base_url, config.api_key) == (
        "gpt-live-1.1",
        "cedar",
        "http://127.0.0.1:9/v1",
        "sk-from-file",
    )
    assert settings.openai_live_backend_model == "gpt-5.1-mini"
    view = public_view(settings)
    assert view["OPENAB_ENGINE"] == "live" and view[MODEL] == "gpt-live-1.1"
    assert "sk-from-file" not in repr(view) and "sk-from-file" not in repr(config)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (MODEL, "gpt live"),
        (MODEL, ""),
        (VOICE, "marin; rm -rf"),
        (BACKEND, "gpt 5.1"),
        ("OPENAB_ENGINE", "gpt-live"),
    ],
)
def test_a_bad_live_value_stops_start_up_naming_the_setting(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({name: value})
    assert info.value.setting == name


# --- the providers the app builds ---


async def test_the_app_builds_the_live_provider_and_its_exact_voice() -> None:
    settings = load_settings(
        {
            "OPENAB_ENGINE": "live",
            "OPENAB_PLAYBACK_ENABLED": "true",
            "OPENAB_DIALOGUE_ENABLED": "true",
            "OPENAB_TTS_PROVIDER": "openai",
            "OPENAI_API_KEY": KEY,
            BACKEND: "gpt-5.1-mini",
        }
    )
    providers = build_providers(settings)
    try:
        assert isinstance(providers.live, OpenAILive) and providers.live.config == live_config(settings)
        assert providers.realtime is None and providers.chat is None
        assert providers.tts is not None  # says the status lines word for word
        assert (providers.live_voice, providers.live_backend_model) == ("marin", "gpt-5.1-mini")
        assert providers.capabilities is not None and providers.capabilities.engine == "live"
        assert providers.dialogue is not None and not providers.dialogue.preemptive_generation
    finally:
        await providers.aclose()


# --- start-up against the loopback GPT-Live server ---


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({}, None),
        ({"OPENAI_API_KEY": "sk-wrong"}, "REALTIME_AUTH_FAILED"),
        ({MODEL: "gpt-live-nonexistent"}, "REALTIME_MODEL_UNKNOWN"),
    ],
    ids=["accepted", "auth", "model"],
)
async def test_the_start_up_probe_turns_the_dialogue_off_when_refused(
    extra: dict[str, str], code: str | None
) -> None:
    async with _server() as server:
        settings = load_settings(_env(server, **extra))
        providers = ConversationProviders(dialogue=DialogueSettings(), live=OpenAILive(live_config(settings)))
        bus = EventBus()
        errors: list[ErrorRaised] = []
        bus.subscribe(ErrorRaised, errors.append)
        try:
            error = await probe_engine(providers, bus=bus, clock=SystemClock())
        finally:
            await providers.aclose()
        if code is None:
            assert error is None and errors == [] and providers.dialogue is not None
            return
        assert error is not None and error.code == code and not error.retryable
        assert error.to_dict()["provider"] == "openai-live"
        assert providers.dialogue is None  # no conversation is built: calls stay up, receive-only
        [raised] = errors
        assert raised.code == code and raised.details["engine"] == "live"
        assert "sk-wrong" not in raised.message


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({"OPENAI_API_KEY": "sk-wrong"}, "REALTIME_AUTH_FAILED"),
        ({MODEL: "gpt-live-nonexistent"}, "REALTIME_MODEL_UNKNOWN"),
        ({}, None),
    ],
    ids=["auth", "model", "accepted"],
)
async def test_check_config_reports_the_live_provider(extra: dict[str, str], code: str | None) -> None:
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
    assert report["settings"]["OPENAB_ENGINE"] == "live"
    assert report["settings"]["OPENAI_API_KEY"] == "set"  # never the value
    if code is None:
        assert proc.returncode == 0 and report["ok"] is True
    else:
        assert proc.returncode == 1 and report["ok"] is False
        assert report["error"]["code"] == code
        assert "sk-wrong" not in out.decode()


# --- the CLI and the demo ---


def test_the_demo_offers_the_live_engine() -> None:
    args = build_parser().parse_args(["demo", "--engine", "live"])
    assert args.engine == "live"


async def test_the_demo_s_loopback_live_server_accepts_the_settings_it_yields() -> None:
    # The chat model is only created (an OpenAI-compatible client): a probe asks nothing of it.
    env = {"OPENAB_ENGINE": "live", "OPENAB_CHAT_PROVIDER": "openai", "OPENAI_API_KEY": "sk-chat"}
    settings = load_settings({**env, MODEL: "gpt-live-1.1"})
    async with loopback_live_provider(settings) as pointed:
        assert pointed.openai_live_model == DEFAULT_LIVE_MODEL and pointed.openai_base_url
        connector = OpenAILive(live_config(pointed))
        try:
            started = await probe(connector)
        finally:
            await connector.aclose()
    assert started.model == DEFAULT_LIVE_MODEL


class _ToolChat:
    """A chat model that calls its first offered tool, recording what it was given."""

    def __init__(self) -> None:
        self.requests: list[tuple[Sequence[ChatMessage], Sequence[ToolSpec]]] = []

    @property
    def capabilities(self) -> ChatCapabilities:
        return ChatCapabilities(name="tool-chat", streaming=True, tools=True, model="tool-chat")

    async def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        self.requests.append((messages, tools))
        if tools and messages[-1].role != "tool":
            yield ToolCallRequested(call=ToolCall(id="call_1", name=tools[0].name, arguments="{}"))
            return
        yield TextDelta(text="Proposed. ")
        yield ChatDone(finish_reason="stop")

    async def aclose(self) -> None:
        return None


async def test_the_demo_s_chat_model_answers_the_live_turn() -> None:
    chat = _ToolChat()
    responder = ChatLiveResponder(chat)
    tool = FunctionTool(
        type="function",
        name="start_agent_task",
        description="Propose a task.",
        parameters={"type": "object", "properties": {"task": {"type": "string"}}},
    )
    note = Appended(kind="instructions", content="Alice says:", delegation_id=None, at_ms=10)
    heard = (Line(role="user", text="start a task"),)
    turn = LiveTurn(source="speech", lines=heard, instructions="Be brief.", context=(note,), tools=(tool,))
    reply = await responder.respond(turn)
    assert isinstance(reply, CallFunction) and reply.name == "start_agent_task" and reply.call_id == "call_1"
    messages, tools = chat.requests[0]
    assert messages[0].role == "system" and messages[0].content == "Be brief.\n\nAlice says:"
    assert [(t.name, t.parameters) for t in tools] == [("start_agent_task", tool.parameters)]
    result = Line(role="tool_result", text='{"status": "proposed"}', call_id="call_1")
    call = Line(role="tool_call", text="{}", name="start_agent_task", call_id="call_1")
    after = LiveTurn(source="backend", lines=(*heard, call, result), instructions="Be brief.", tools=(tool,))
    assert await responder.respond(after) == Speak(text="Proposed.")
