"""Dialogue settings and the engine's honest capability report.

:class:`DialogueSettings` is plain data (``config.py`` builds it from ``OPENAB_*``); it validates
itself so a bad value is a :class:`~openab_voice.errors.ConfigError` at start-up.

:func:`negotiate` derives :class:`EngineCapabilities` from the providers actually configured. Full
duplex needs a streaming STT (the bot must understand speech that overlaps its own) and an
interruptible output; a batch STT makes the cascade half-duplex, and it says so: ``full_duplex`` is
never True for it. Asking for ``full_duplex`` with providers that cannot do it is a structured
start-up error unless a half-duplex fallback was explicitly allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from openab_voice.engine.duplex import AudioFormat, DialogueMode, EngineCapabilities
from openab_voice.engine.turns import wake_names
from openab_voice.errors import ConfigError, ErrorCode, ProviderUnavailable
from openab_voice.providers.chat import ChatCapabilities
from openab_voice.providers.tts import TtsCapabilities
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings
from openab_voice.stt.base import SttCapabilities

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "SMALL_MODEL_PROMPT",
    "SMALL_MODEL_SENTENCES",
    "DialogueMode",
    "language_instruction",
    "DialogueSettings",
    "EngineCapabilities",
    "negotiate",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a voice assistant in a Discord voice channel. Your replies are spoken aloud: answer in "
    "one or two short sentences of plain speech, with no Markdown, lists, code, links or emoji. "
    "What people said to each other, not to you, is context: never answer it."
)
SMALL_MODEL_PROMPT = (
    "You are a helpful voice assistant. Answer in one or two short sentences. If you do not know, say so."
)
"""For the offline 135M model: it follows a short, concrete instruction far better than a long one."""
SMALL_MODEL_SENTENCES = 2
"""Sentences spoken per answer with the offline model: it ignores "be brief" and writes on."""

_LANGUAGE_INSTRUCTIONS = {
    "zh": "The people in the call speak Chinese: answer in Chinese, in the script the speaker wrote in.",
    "auto": "Answer in the language the speaker used.",
}


def language_instruction(language: str) -> str | None:
    """What the model is told about the users' language (``OPENAB_LANGUAGE``); None for English."""
    return _LANGUAGE_INSTRUCTIONS.get(language)


@dataclass(frozen=True, slots=True, kw_only=True)
class DialogueSettings:
    """How the conversation behaves.

    Attributes:
        mode: full duplex (default) or turn based.
        wake_name: the name that addresses the bot when two or more humans are in the channel;
            None means the bot's display name (looked up through the roster with ``bot_user_id``).
        bot_user_id: the bot's own Discord user id (for the default wake name).
        system_prompt: the model's instructions.
        max_context_turns: user turns (with the heard replies) kept in short-term context.
        max_channel_notes: things said in the channel but not to the bot, kept as context.
        false_interruption_window_s: after an interruption, how long to wait for a transcript
            before treating it as a false alarm (a cough) and repeating the cut sentence.
        resume_after_false_interruption: repeat the cut sentence after a false interruption.
        ignore_backchannels: a short "yeah", "mm-hmm", "okay" said over the bot is no turn, and the
            bot resumes from the cut sentence (:mod:`~openab_voice.engine.backchannel`).
        max_response_sentences: sentences spoken per response at most (the model is stopped after).
        max_tool_rounds: model -> tools -> model rounds per response at most.
        cancel_timeout_s: bound on waiting for a cancelled response to unwind.
        allow_half_duplex_fallback: run turn based instead of failing when full duplex is asked
            for but the providers cannot do it.
        preemptive_generation: prepare the answer (model and first synthesis) on the speculative
            final, while the VAD still waits out its minimum silence; it is said only when the
            final confirms exactly that request, otherwise dropped unheard.
    """

    mode: DialogueMode = DialogueMode(default_of(VoiceSettings, "assistant_mode"))
    wake_name: str | None = None
    bot_user_id: str | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_context_turns: int = 12
    max_channel_notes: int = 20
    false_interruption_window_s: float = 2.0
    resume_after_false_interruption: bool = True
    ignore_backchannels: bool = default_of(VoiceSettings, "ignore_backchannels")
    max_response_sentences: int = 8
    max_tool_rounds: int = 3
    cancel_timeout_s: float = 2.0
    allow_half_duplex_fallback: bool = False
    preemptive_generation: bool = default_of(VoiceSettings, "preemptive_generation")

    def __post_init__(self) -> None:
        positive_ints = {
            "max_context_turns": self.max_context_turns,
            "max_response_sentences": self.max_response_sentences,
            "max_tool_rounds": self.max_tool_rounds,
        }
        for name, value in positive_ints.items():
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}", setting=name)
        if self.max_channel_notes < 0:
            raise ConfigError("max_channel_notes must not be negative", setting="max_channel_notes")
        for name, seconds in {
            "false_interruption_window_s": self.false_interruption_window_s,
            "cancel_timeout_s": self.cancel_timeout_s,
        }.items():
            if not seconds > 0:
                raise ConfigError(f"{name} must be positive, got {seconds}", setting=name)
        if self.wake_name is not None and not wake_names(self.wake_name):
            raise ConfigError(
                "wake_name must not be blank (a comma-separated list of names)", setting="wake_name"
            )


def negotiate(
    settings: DialogueSettings,
    *,
    stt: SttCapabilities,
    tts: TtsCapabilities,
    chat: ChatCapabilities,
) -> tuple[DialogueSettings, EngineCapabilities]:
    """The settings to run with and the capabilities to report.

    Raises:
        ProviderUnavailable: ``ENGINE_FULL_DUPLEX_UNAVAILABLE`` when full duplex was asked for, the
            providers cannot do it, and ``allow_half_duplex_fallback`` is off.
    """
    duplex_capable = stt.streaming
    if settings.mode is DialogueMode.FULL_DUPLEX and not duplex_capable:
        if not settings.allow_half_duplex_fallback:
            raise ProviderUnavailable(
                f"full_duplex needs a streaming speech-to-text provider; {stt.name!r} is batch only",
                code=ErrorCode.ENGINE_FULL_DUPLEX_UNAVAILABLE,
                stt=stt.name,
                fallback="set the dialogue mode to turn_based or allow the half-duplex fallback",
            )
        settings = replace(settings, mode=DialogueMode.TURN_BASED)
    full_duplex = settings.mode is DialogueMode.FULL_DUPLEX and duplex_capable
    caps = EngineCapabilities(
        mode=settings.mode,
        streaming_input=stt.streaming,
        partials=stt.streaming,
        streaming_output=True,
        tts_streaming=tts.streaming,
        interruption=full_duplex,
        semantic_tools=chat.tools,
        full_duplex=full_duplex,
        input_format=AudioFormat(rate=stt.sample_rate, channels=1),
    )
    return settings, caps
