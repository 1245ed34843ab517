"""The session configuration a loopback session holds, and how ``session.update`` changes it.

The defaults are the GA API's as ``session.created`` reports them: audio in and out as 24 kHz
16-bit PCM (``audio/pcm``, the only PCM rate the GA API has), server VAD on, the ``marin`` voice,
audio output. ``session.update`` carries only the fields it changes; an explicit ``null`` (``"turn_detection":
null``) is a change too, so the update is merged field by field from what the client set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from openai.types.realtime import (
    RealtimeFunctionTool,
    RealtimeSessionCreateRequest,
)

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "PCM_RATE",
    "ConfigRefusal",
    "apply_update",
    "default_session",
    "function_tools",
    "output_is_audio",
    "turn_detection_enabled",
]

PCM_RATE: Final = 24_000
"""``audio/pcm`` is 16-bit mono little-endian at 24 kHz, in and out."""

DEFAULT_INSTRUCTIONS = "You are a helpful voice assistant. Keep answers short."


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRefusal:
    """A ``session.update`` the session will not apply (the ``error`` event's fields)."""

    code: str
    message: str
    param: str


def default_session(model: str) -> RealtimeSessionCreateRequest:
    """The session a new connection starts with, as ``session.created`` reports it."""
    return RealtimeSessionCreateRequest.model_validate(
        {
            "type": "realtime",
            "model": model,
            "output_modalities": ["audio"],
            "instructions": DEFAULT_INSTRUCTIONS,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": PCM_RATE},
                    "noise_reduction": None,
                    "transcription": None,
                    "turn_detection": {
                        "type": "server_vad",
                        "threshold": 0.5,
                        "prefix_padding_ms": 300,
                        "silence_duration_ms": 200,
                        "create_response": True,
                        "interrupt_response": True,
                    },
                },
                "output": {"format": {"type": "audio/pcm", "rate": PCM_RATE}, "voice": "marin", "speed": 1.0},
            },
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "tracing": None,
        }
    )


def apply_update(
    current: RealtimeSessionCreateRequest, update: Any, *, has_spoken: bool
) -> RealtimeSessionCreateRequest | ConfigRefusal:
    """``current`` with the fields ``update`` set (an SDK session model from ``session.update``).

    Refused, as by the real API: a transcription session's config on a realtime session, a voice
    change once the session has produced audio. Refused because the loopback does not implement
    them: input or output formats other than ``audio/pcm`` (G.711 ``pcmu`` / ``pcma``).
    """
    if not isinstance(update, RealtimeSessionCreateRequest):
        return ConfigRefusal(
            code="invalid_value",
            message="Invalid value: 'transcription'. This is a realtime session.",
            param="session.type",
        )
    changes = update.model_dump(exclude_unset=True, mode="json")
    merged = _merge(current.model_dump(exclude_unset=True, mode="json"), changes)
    result = RealtimeSessionCreateRequest.model_validate(merged)
    for direction in ("input", "output"):
        audio = result.audio
        side = getattr(audio, direction, None) if audio is not None else None
        fmt = getattr(side, "format", None)
        if fmt is not None and fmt.type not in (None, "audio/pcm"):
            return ConfigRefusal(
                code="unsupported_value",
                message=f"The loopback realtime server supports only audio/pcm, not {fmt.type}.",
                param=f"session.audio.{direction}.format.type",
            )
    if has_spoken and _voice(result) != _voice(current):
        return ConfigRefusal(
            code="cannot_update_voice",
            message="Cannot update a conversation's voice if assistant audio is present.",
            param="session.audio.output.voice",
        )
    return result


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _voice(session: RealtimeSessionCreateRequest) -> object:
    audio = session.audio
    return audio.output.voice if audio is not None and audio.output is not None else None


def turn_detection_enabled(session: RealtimeSessionCreateRequest) -> bool:
    """False once the client sent ``turn_detection: null``: the server then never responds by itself."""
    audio = session.audio
    return audio is not None and audio.input is not None and audio.input.turn_detection is not None


def output_is_audio(session: RealtimeSessionCreateRequest) -> bool:
    """Audio plus transcript (the default) or text only (``output_modalities: ["text"]``)."""
    return "text" not in (session.output_modalities or ["audio"])


def function_tools(session: RealtimeSessionCreateRequest) -> tuple[RealtimeFunctionTool, ...]:
    """The function tools the session offers (MCP tools are not the loopback's business)."""
    return tuple(tool for tool in session.tools or () if isinstance(tool, RealtimeFunctionTool))
