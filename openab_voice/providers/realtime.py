"""The realtime speech seam: a provider session (:class:`RealtimeLink`), what opens one
(:class:`RealtimeConnector`), where and how to connect (:class:`RealtimeConfig`) and the audio format.
The OpenAI implementation is :mod:`openab_voice.providers.realtime_openai`; the engine on top is
:mod:`openab_voice.engine.realtime`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from openab_voice.settings.defaults import default_of
from openab_voice.settings.realtime_models import DEFAULT_REALTIME_MODEL
from openab_voice.settings.voice import VoiceSettings

if TYPE_CHECKING:
    from openai.types.realtime import RealtimeClientEventParam, RealtimeServerEvent

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_VOICE",
    "PROVIDER_RATE",
    "RealtimeConfig",
    "RealtimeConnector",
    "RealtimeLink",
]

DEFAULT_MODEL = DEFAULT_REALTIME_MODEL
DEFAULT_VOICE: str = default_of(VoiceSettings, "openai_realtime_voice")
PROVIDER_RATE = 24_000
"""``audio/pcm`` in and out: 24 kHz mono s16le, the only rate the API takes."""


class RealtimeLink(Protocol):
    """One open provider session."""

    async def send(self, event: RealtimeClientEventParam) -> None:
        """Send one client event; raises ``REALTIME_CONNECTION_LOST`` once the socket is gone."""
        ...

    def events(self) -> AsyncIterator[RealtimeServerEvent]:
        """Server events in order; ends (or raises ``REALTIME_CONNECTION_LOST``) when the socket closes."""
        ...

    async def close(self) -> None:
        """Close the socket; idempotent."""
        ...


class RealtimeConnector(Protocol):
    """Opens provider sessions (one per voice channel at a time)."""

    @property
    def model(self) -> str: ...

    async def connect(self) -> RealtimeLink:
        """A fresh session, or the structured error why not (auth, model, connection)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RealtimeConfig:
    """Where and how to connect.

    Attributes:
        model: the realtime model (``OPENAI_REALTIME_MODEL``).
        voice: the output voice (``OPENAI_REALTIME_VOICE``).
        base_url: an OpenAI-compatible server (``OPENAI_BASE_URL``; the loopback server's
            ``base_url`` in tests and the demo); None: api.openai.com.
        api_key: the key (``OPENAI_API_KEY`` or ``_FILE``); never logged.

    The websocket upgrade is bounded by the ``websockets`` default (10 s).
    """

    model: str = DEFAULT_MODEL
    voice: str = DEFAULT_VOICE
    base_url: str | None = None
    api_key: str | None = None
