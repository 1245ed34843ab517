"""The live engine's setup: its settings, the ``session.start`` configuration it opens every session
with, and the capabilities it declares (see :mod:`openab_voice.engine.live`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openab_voice.engine.duplex import DISCORD_PCM, AudioFormat, DialogueMode, EngineCapabilities
from openab_voice.engine.live.delegation import delegation_config
from openab_voice.providers.chat import ChatMessage, ToolSpec
from openab_voice.providers.live import DEFAULT_LIVE_VOICE, LIVE_RATE
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

__all__ = ["HISTORY_KEPT", "LiveSettings", "live_capabilities", "session_start"]

HISTORY_KEPT = 128
"""``session.start``'s ``input`` takes at most this many messages: the most recent are kept."""

_BACKEND_INSTRUCTIONS = (
    "You act for a voice assistant in a Discord call. Real work is only ever proposed with "
    "start_agent_task (an operator confirms it in the text channel; you never approve anything), "
    "checked with get_agent_task and cancelled with cancel_agent_task. Report the tool's status "
    "exactly as returned."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveSettings:
    """How the live engine runs.

    Attributes:
        voice: the live voice (``OPENAI_LIVE_VOICE``; fixed for a session).
        backend_model: the server-run Responses model the action tools are delegated to.
        reconnect_initial_s: the first wait before reconnecting; doubled per failure ...
        reconnect_max_s: ... up to this bound (it keeps trying while the call lasts).
        capture_window_s: each speaker's processed capture kept for the turn being decided.
        lead_in_s: audio taken before the VAD's start of speech (its onset is a little late).
        preroll_ms: the provider's audio held before a response's first frame plays (a jitter buffer).
        end_gap_ms: the API marks no end of a spoken answer: after its audio, this long without a
            delta ends it.
        first_audio_s: an answer whose first audio has not come this long after its turn was sent
            has failed (the server's own end-of-speech silence included).
        tool_wait_s: after a delegated call was answered, how long the backend's spoken follow-up
            may take to begin.
    """

    voice: str = DEFAULT_LIVE_VOICE
    backend_model: str = default_of(VoiceSettings, "openai_live_backend_model")
    reconnect_initial_s: float = 0.5
    reconnect_max_s: float = 8.0
    capture_window_s: float = 30.0
    lead_in_s: float = 0.1
    preroll_ms: float = 100.0
    end_gap_ms: float = 600.0
    first_audio_s: float = 15.0
    tool_wait_s: float = 15.0


def session_start(
    *,
    model: str,
    instructions: str,
    history: Sequence[ChatMessage],
    specs: Sequence[ToolSpec],
    settings: LiveSettings,
) -> dict[str, Any]:
    """``session.start``'s ``session``: the model, our system prompt, 24 kHz PCM both ways, the voice,
    the heard-only history (the most recent :data:`HISTORY_KEPT` messages, one text part each) and
    Responses delegation offering only the semantic action tools."""
    items: list[dict[str, Any]] = []
    for message in list(history)[-HISTORY_KEPT:]:
        if message.role == "assistant":
            items.append({"role": "assistant", "content": [{"type": "output_text", "text": message.content}]})
        elif message.role == "user":
            items.append({"role": "user", "content": [{"type": "input_text", "text": message.content}]})
        else:
            items.append({"role": "developer", "content": [{"type": "input_text", "text": message.content}]})
    return {
        "model": model,
        "instructions": instructions,
        "audio": {"format": {"type": "audio/pcm", "rate": LIVE_RATE}, "output": {"voice": settings.voice}},
        "input": items,
        "delegation": delegation_config(
            specs, model=settings.backend_model, instructions=_BACKEND_INSTRUCTIONS
        ),
    }


def live_capabilities(mode: DialogueMode) -> EngineCapabilities:
    """What the live engine does: streaming both ways, interruption in full duplex, the semantic tools
    (by delegation); its speech is the model's own (captions are its transcript, not exact output)."""
    duplex = mode is DialogueMode.FULL_DUPLEX
    mono24 = AudioFormat(rate=LIVE_RATE, channels=1)
    return EngineCapabilities(
        mode=mode,
        streaming_input=True,
        partials=True,
        streaming_output=True,
        tts_streaming=True,
        interruption=duplex,
        semantic_tools=True,
        full_duplex=duplex,
        engine="live",
        exact_speech_output=False,
        output_format=DISCORD_PCM,
        provider_input_format=mono24,
        provider_output_format=mono24,
    )
