"""The realtime engine's setup: its settings, the ``session.update`` it sends, the capabilities it
declares, and small helpers for reading the provider's events (see :mod:`openab_voice.engine.realtime`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openab_voice.engine.duplex import DISCORD_PCM, AudioFormat, DialogueMode, EngineCapabilities
from openab_voice.providers.realtime import DEFAULT_VOICE, PROVIDER_RATE
from openab_voice.providers.realtime_openai import connection_error

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra: its models are only read here
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["NoLink", "RealtimeSettings", "realtime_capabilities", "response_id_of", "session_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeSettings:
    """How the realtime engine runs.

    Attributes:
        voice: the provider's voice (``OPENAI_REALTIME_VOICE``).
        reconnect_initial_s: the first wait before reconnecting; doubled per failure ...
        reconnect_max_s: ... up to this bound (it keeps trying while the call lasts).
        capture_window_s: each speaker's processed capture kept for the turn being decided.
        lead_in_s: audio taken before the VAD's start of speech (its onset is a little late).
        preroll_ms: the provider's audio held before a response's first frame plays (a jitter buffer
            against deltas that arrive late; costs that much first-audio latency only with a provider
            that streams no faster than it speaks).
    """

    voice: str = DEFAULT_VOICE
    reconnect_initial_s: float = 0.5
    reconnect_max_s: float = 8.0
    capture_window_s: float = 30.0
    lead_in_s: float = 0.1
    preroll_ms: float = 100.0


def session_config(*, instructions: str, voice: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``session`` of our ``session.update``: audio in and out at 24 kHz, turn detection off."""
    pcm = {"type": "audio/pcm", "rate": PROVIDER_RATE}
    return {
        "type": "realtime",
        "instructions": instructions,
        "output_modalities": ["audio"],
        "audio": {
            "input": {"format": pcm, "turn_detection": None},
            "output": {"format": pcm, "voice": voice},
        },
        "tools": tools,
        "tool_choice": "auto",
    }


def realtime_capabilities(mode: DialogueMode) -> EngineCapabilities:
    """What the realtime engine does: streaming both ways, interruption in full duplex, semantic
    tools; its speech is the model's own (captions are its transcript, not exact output)."""
    duplex = mode is DialogueMode.FULL_DUPLEX
    mono24 = AudioFormat(rate=PROVIDER_RATE, channels=1)
    return EngineCapabilities(
        mode=mode,
        streaming_input=True,
        partials=True,
        streaming_output=True,
        tts_streaming=True,
        interruption=duplex,
        semantic_tools=True,
        full_duplex=duplex,
        engine="realtime",
        exact_speech_output=False,
        output_format=DISCORD_PCM,
        provider_input_format=mono24,
        provider_output_format=mono24,
    )


def response_id_of(event: RealtimeServerEvent) -> str | None:
    """The provider response an event belongs to (None: not a response's event)."""
    if event.type in ("response.created", "response.done"):
        return getattr(getattr(event, "response", None), "id", None) or ""
    rid = getattr(event, "response_id", None)
    return rid if isinstance(rid, str) else None


class NoLink:
    """Stands in for the session of a response that could not start (it never sends)."""

    async def send(self, event: Any) -> None:
        raise connection_error(ConnectionError("no provider session"), model="?")

    async def events(self) -> AsyncIterator[RealtimeServerEvent]:
        return
        yield

    async def close(self) -> None:
        return
