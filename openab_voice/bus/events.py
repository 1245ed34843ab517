"""Event types. Every event is a frozen, slotted, keyword-only dataclass.

Common fields: ``at`` (seconds, from the injected clock's ``monotonic``), ``stage`` (the
pipeline stage that emitted it) and the ids that exist at that point. Free-form payloads go
through :func:`sanitize` so no secret, raw audio or unbounded text reaches a subscriber.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_SECRET_KEY = re.compile(r"(token|secret|password|api[_-]?key|authorization|credential|private)", re.I)
MAX_TEXT = 500


def sanitize(value: Any, *, depth: int = 0) -> Any:
    """Redact secret-named keys, drop bytes, truncate long strings and deep nesting."""
    if depth > 4:
        return "…"
    if isinstance(value, dict):
        return {
            str(k): ("[redacted]" if _SECRET_KEY.search(str(k)) else sanitize(v, depth=depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [sanitize(v, depth=depth + 1) for v in value[:50]]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + "…"
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events."""

    at: float
    stage: str = ""
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AudienceChanged(Event):
    """Something that decides who hears the bot, or what they may read, changed in a guild: a member
    joined, left or moved voice channels, or a channel's permission overwrites, a role's permissions
    or a member's roles changed (discord.py's cache already holds the new state when this arrives).

    Attributes:
        kind: ``voice_state``, ``channel_permissions``, ``role_permissions`` or ``member_roles``.
        user_id: the member concerned (None for a channel or role change).
        channel_id: the voice channel joined or left, or the channel whose overwrites changed.
    """

    guild_id: str
    kind: str
    user_id: str | None = None
    channel_id: str | None = None
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRaised(Event):
    """A structured error that a component handled (for reporters)."""

    code: str
    message: str
    retryable: bool
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", sanitize(self.details))
        object.__setattr__(self, "message", sanitize(self.message))


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyMeasured(Event):
    """A latency sample: ``metric`` is one of barge_in_ms, first_stable_partial_ms,
    eou_to_first_audio_ms, tts_first_chunk_ms, truncate_sent_ms (realtime: barge-in to the
    provider truncation sent)."""

    metric: str
    value_ms: float
    speaker_id: str | None = None
    turn_id: str | None = None
    stage: str = "metrics"
