"""The GPT-Live seam: one open Live socket (:class:`LiveLink`), what opens one (:class:`LiveConnector`),
where and how to connect (:class:`LiveConfig`) and the audio rate.

The OpenAI implementation is :mod:`openab_voice.providers.live_openai`. Unlike Realtime, the model is
not part of the connection: it goes in the ``session.start`` event sent on the open socket
(``openai.types.live.SessionConfigParam``), so a link is a socket first and a session only once the
server answers ``session.started``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

if TYPE_CHECKING:
    from openai.types.live import ClientEventParam, ServerEvent

__all__ = [
    "DEFAULT_LIVE_MODEL",
    "DEFAULT_LIVE_VOICE",
    "LIVE_MODELS",
    "LIVE_RATE",
    "LiveConfig",
    "LiveConnector",
    "LiveLink",
]

LIVE_MODELS: tuple[str, ...] = ("gpt-live-1", "gpt-live-1.1")
"""The names of the ``model`` Literal of ``openai.types.live.SessionConfig`` (openai 3.63); the field
takes any string, so another name is refused only by the server, after ``session.start``.
tests/unit/test_live_provider.py reads the Literal at test time."""
DEFAULT_LIVE_MODEL: str = default_of(VoiceSettings, "openai_live_model")
DEFAULT_LIVE_VOICE: str = default_of(VoiceSettings, "openai_live_voice")
"""The SDK's documented default voice (``SessionConfig.audio.output.voice``)."""
LIVE_RATE = 24_000
"""``{"type": "audio/pcm", "rate": 24000}``: 24 kHz mono s16le in and out (the session has one format
for both directions; fixture audio and sideband reflections are always this rate)."""


class LiveLink(Protocol):
    """One open Live socket (a session once ``session.started`` came back)."""

    async def send(self, event: ClientEventParam) -> None:
        """Send one client event; raises ``REALTIME_CONNECTION_LOST`` once the socket is gone."""
        ...

    def events(self) -> AsyncIterator[ServerEvent]:
        """Server events in order; ends after :meth:`close`, raises ``REALTIME_CONNECTION_LOST`` when the
        server or the network ends the socket.

        Dispatch on ``event.type`` (a string), never on the class: the SDK builds an event of a type it
        does not know as its first union member, ``SessionStartedEvent``, keeping the unknown ``type``.
        """
        ...

    async def close(self) -> None:
        """Close the socket; idempotent."""
        ...


class LiveConnector(Protocol):
    """Opens Live sockets (one per voice channel at a time)."""

    @property
    def model(self) -> str: ...

    async def connect(self) -> LiveLink:
        """A fresh socket, or the structured error why not (auth, connection)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveConfig:
    """Where and how to connect.

    Attributes:
        model: the Live model, sent in ``session.start`` (``gpt-live-1``, ``gpt-live-1.1``).
        voice: the output voice (a built-in name; immutable once the session started).
        base_url: an OpenAI-compatible server (the loopback server's ``base_url`` in tests and the
            demo); None: api.openai.com. The socket opens on ``{base_url}/live/sessions``.
        api_key: the key; never logged (left out of the repr).

    The websocket upgrade is bounded by the ``websockets`` default (10 s).
    """

    model: str = DEFAULT_LIVE_MODEL
    voice: str = DEFAULT_LIVE_VOICE
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
