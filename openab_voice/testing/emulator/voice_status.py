"""The voice channel status route: ``PUT /channels/{channel.id}/voice-status`` with ``{"status": ...}``.

As on Discord: only a voice channel has a status (another channel is 400 / 50024), at most 500
characters, ``null`` or ``""`` clears it; the answer is 204 and the change goes out as the
``VOICE_CHANNEL_STATUS_UPDATE`` dispatch (``{"id", "guild_id", "status"}``; discord.py 2.7 has no
parser for it and ignores it). Every request is recorded with the time on the emulator's clock, for
tests and the demo report.
"""

from __future__ import annotations

from typing import TypedDict

from aiohttp import web

from openab_voice.clock import Clock
from openab_voice.errors import RestError
from openab_voice.testing.emulator.gateway import GatewayHub
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.responses import (
    CODE_INVALID_FORM_BODY,
    CODE_UNKNOWN_CHANNEL,
    no_content,
    read_json,
    snowflake,
)
from openab_voice.testing.emulator.rest import API, require_bot
from openab_voice.testing.emulator.wire import VoiceStatusBody, parse

MAX_STATUS = 500
CODE_WRONG_CHANNEL_TYPE = 50024  # "Cannot execute action on this channel type"


class VoiceStatusSet(TypedDict):
    """One status the bot set: ``at`` in seconds on the emulator's clock, ``status`` None when cleared."""

    at: float
    channel_id: str
    status: str | None


class VoiceStatusApi:
    """Sets the voice channel's status and records every request that did."""

    def __init__(self, state: GuildState, hub: GatewayHub, *, token: str, clock: Clock) -> None:
        self._state = state
        self._hub = hub
        self._token = token
        self._clock = clock
        self.status: str | None = None
        self.log: list[VoiceStatusSet] = []

    def routes(self) -> list[web.RouteDef]:
        return [web.put(f"{API}/channels/{{channel}}/voice-status", self.put)]

    async def put(self, request: web.Request) -> web.Response:
        require_bot(request, self._token)
        channel_id = snowflake(request, "channel")
        if channel_id not in self._state.channel_ids():
            raise RestError(404, CODE_UNKNOWN_CHANNEL, "Unknown Channel")
        if channel_id != self._state.ids.voice_channel_id:
            raise RestError(400, CODE_WRONG_CHANNEL_TYPE, "Cannot execute action on this channel type")
        body = parse(VoiceStatusBody, await read_json(request), what="voice status")
        status = body["status"] or None
        if status is not None and len(status) > MAX_STATUS:
            raise RestError(
                400, CODE_INVALID_FORM_BODY, f"Invalid Form Body: status longer than {MAX_STATUS}"
            )
        self.status = status
        self.log.append({"at": self._clock.monotonic(), "channel_id": str(channel_id), "status": status})
        self._hub.dispatch(
            "VOICE_CHANNEL_STATUS_UPDATE",
            {"id": str(channel_id), "guild_id": str(self._state.ids.guild_id), "status": status},
        )
        return no_content()
