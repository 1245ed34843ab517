"""Composition root: builds the bot from settings. The only place that wires components together."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import aiohttp

from openab_voice.acp.sandbox import build_sandbox
from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.actions.execution import AgentSettings, workspace_root
from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.requests import BrokerSettings
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import Settings, parse_agent_env_entry
from openab_voice.discord.bot import VoiceBot
from openab_voice.discord.receiver import ReceiverSettings
from openab_voice.discord.session import SessionOptions
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.settings import (
    SMALL_MODEL_PROMPT,
    SMALL_MODEL_SENTENCES,
    DialogueMode,
    DialogueSettings,
    negotiate,
)
from openab_voice.errors import AcpError, ConfigError
from openab_voice.jobs import EffectCeiling
from openab_voice.providers.speech_registry import (
    ChatConfig,
    SttConfig,
    TtsConfig,
    chat_registry,
    stt_registry,
    tts_registry,
)
from openab_voice.store.database import open_engine, resolve_url, upgrade
from openab_voice.store.jobs import JobStore

log = logging.getLogger(__name__)


class EmulatorLink(Protocol):
    """What the client factory needs from the loopback emulator (``testing.emulator.DiscordEmulator``)."""

    token: str

    def client_connector(self) -> aiohttp.TCPConnector: ...


def frontend_settings(settings: Settings) -> FrontEndSettings:
    return FrontEndSettings(
        internal_rate=settings.audio_rate,
        apm_provider=settings.apm_provider,
        vad_provider=settings.vad_provider,
        echo_cancellation=settings.echo_cancellation,
        noise_suppression=settings.noise_suppression,
        auto_gain_control=settings.auto_gain_control,
        vad_min_silence_ms=settings.vad_min_silence_ms,
        drift_tolerance_ms=settings.audio_drift_tolerance_ms,
    )


def check_providers(settings: Settings, *, bus: EventBus, clock: Clock) -> None:
    """Start the configured audio providers once, so a missing one fails at start-up, not at /voice join.

    Raises:
        ProviderUnavailable: naming the provider and the extra to install.
    """
    FrontEnd(frontend_settings(settings), bus=bus, clock=clock)  # probes each provider in __init__


def build_providers(settings: Settings) -> ConversationProviders:
    """Create the configured providers (loads models: call once, at start-up).

    Raises:
        ProviderUnavailable: a configured provider cannot start; ``ENGINE_FULL_DUPLEX_UNAVAILABLE``
            when full duplex was asked of providers that cannot do it.
    """
    providers = ConversationProviders()
    if not settings.transcription_enabled:
        return providers
    providers.stt = stt_registry().create(settings.stt_provider, SttConfig(model=settings.stt_model))
    if not settings.dialogue_enabled:
        return providers
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    providers.tts = tts_registry().create(
        settings.tts_provider,
        TtsConfig(base_url=settings.openai_base_url, api_key=key, voice=settings.tts_voice),
    )
    providers.chat = chat_registry().create(
        settings.chat_provider,
        ChatConfig(
            temperature=0.3,
            model=settings.chat_model,
            base_url=settings.openai_base_url,
            api_key=key,
            max_tokens=settings.chat_max_tokens,
        ),
    )
    dialogue = DialogueSettings(mode=DialogueMode(settings.assistant_mode), wake_name=settings.wake_name)
    if settings.system_prompt:
        dialogue = replace(dialogue, system_prompt=settings.system_prompt)
    elif settings.chat_provider == "llama":
        # The offline 135M model follows a short, concrete instruction far better than the full prompt.
        dialogue = replace(dialogue, system_prompt=SMALL_MODEL_PROMPT)
    if settings.chat_provider == "llama":
        dialogue = replace(dialogue, max_response_sentences=SMALL_MODEL_SENTENCES)
    providers.dialogue, providers.capabilities = negotiate(
        dialogue,
        stt=providers.stt.capabilities,
        tts=providers.tts.capabilities,
        chat=providers.chat.capabilities,
    )
    return providers


def session_options(settings: Settings) -> SessionOptions:
    return SessionOptions(
        frontend=frontend_settings(settings),
        receiver=ReceiverSettings(
            jitter_depth=settings.jitter_depth,
            max_conceal=settings.max_conceal_frames,
            pending_per_ssrc=settings.pending_packets_per_ssrc,
            pending_ttl_s=settings.pending_ttl_s,
            inbox_packets=settings.receive_queue_packets,
        ),
        playback_enabled=settings.playback_enabled,
        playback_buffer_ms=settings.playback_buffer_ms,
    )


def build_action_plane(
    settings: Settings, *, bus: EventBus, clock: Clock, environ: Mapping[str, str] | None = None
) -> ActionPlane | None:
    """The action plane when ``OPENAB_ACTIONS_ENABLED``: migrates the store (SQLite file in the data
    directory by default), then wires broker and executor settings. None when actions are off.

    Args:
        environ: where allowlisted agent variables are read from (default: the process environment).

    Raises:
        StoreError: the database is unreachable or cannot be migrated.
    """
    if not settings.actions_enabled:
        return None
    assert settings.operator_user_id is not None  # Settings validates this when actions are on
    url = resolve_url(settings)
    upgrade(url)
    store = JobStore(open_engine(url), clock)
    agent_environ = dict(os.environ if environ is None else environ)
    credentials = tuple(parse_agent_env_entry(entry) for entry in settings.acp_env)
    try:
        sandbox, no_sandbox = build_sandbox(
            settings.acp_sandbox,
            data_dir=settings.data_dir,
            environ=agent_environ,
            hidden_files=[Path(source[1:]) for _, source in credentials if source.startswith("@")]
            + ([Path(url.removeprefix("sqlite:///"))] if url.startswith("sqlite:///") else []),
        )
    except AcpError as exc:
        raise ConfigError(exc.message, setting="OPENAB_ACP_SANDBOX", code=exc.code) from None
    if no_sandbox is not None:
        log.warning("agents run without a sandbox (no workspace_exec): %s", no_sandbox)
    broker = BrokerSettings(
        operator_user_id=settings.operator_user_id,
        expiry_s=settings.action_expiry_s,
        max_effect=EffectCeiling(settings.action_max_effect),
        exec_unavailable=no_sandbox,
    )
    agent = AgentSettings(
        command=tuple(shlex.split(settings.acp_agent_command)),
        env_allowlist=settings.acp_env_allowlist,
        environ=agent_environ,
        turn_timeout_s=settings.acp_turn_timeout_s,
        cancel_grace_s=settings.acp_cancel_grace_s,
        trusted_listener_ids=frozenset(settings.trusted_listener_ids),
        credentials=credentials,
        auth_method=settings.acp_auth_method,
        sandbox=sandbox,
    )
    return ActionPlane(
        store=store,
        workspaces=WorkspaceManager(workspace_root(settings.data_dir), settings.workspace_repo, clock=clock),
        broker=broker,
        agent=agent,
        bus=bus,
        clock=clock,
        channel_id=settings.action_channel_id,
    )


def create_bot(
    settings: Settings,
    *,
    bus: EventBus,
    clock: Clock,
    emulator: EmulatorLink | None = None,
    providers: ConversationProviders | None = None,
    actions: ActionPlane | None = None,
) -> VoiceBot:
    """Build the client. Call inside the running event loop (the connector binds to it).

    Args:
        emulator: connect to this loopback emulator instead of Discord. This explicit argument is the
            only way to redirect the client: no process-global is changed.
    """
    connector = emulator.client_connector() if emulator is not None else None
    return VoiceBot(
        bus=bus,
        clock=clock,
        options=session_options(settings),
        providers=providers,
        actions=actions,
        command_guild_id=settings.guild_id,
        connector=connector,
        guild_ready_timeout=0.1 if emulator is not None else 2.0,
    )


def bot_token(settings: Settings) -> str:
    if settings.discord_token is None:
        raise ConfigError(
            "DISCORD_TOKEN or DISCORD_TOKEN_FILE is required for `run`", setting="DISCORD_TOKEN"
        )
    return settings.discord_token.get_secret_value()


async def run_bot(settings: Settings, *, bus: EventBus | None = None) -> None:
    """``openab-voice run``: the bot on real Discord until interrupted.

    Args:
        bus: the bus its observers (the terminal reporter) already listen on.
    """
    token = bot_token(settings)
    clock = SystemClock()
    bus = bus or EventBus()
    check_providers(settings, bus=bus, clock=clock)
    providers = build_providers(settings)
    actions = build_action_plane(settings, bus=bus, clock=clock)
    bot = create_bot(settings, bus=bus, clock=clock, providers=providers, actions=actions)
    try:
        async with bot:
            await bot.start(token)
    finally:
        await providers.aclose()
