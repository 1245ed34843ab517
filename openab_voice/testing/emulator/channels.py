"""Channel message routes: send, fetch, edit, delete, history, and pins.

discord.py 2.7 pins with ``PUT /channels/{c}/messages/pins/{m}`` and lists pins as
``{"items": [{"pinned_at", "message"}], "has_more"}`` (``abc.Messageable.pins``); the older
``/channels/{c}/pins`` routes are served too. The pin routes are registered before
``/messages/{m}`` so that ``pins`` is never taken for a message id.
"""

from __future__ import annotations

from aiohttp import web

from openab_voice.errors import RestError
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.gateway import INTENT_GUILD_MESSAGES, GatewayHub
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.responses import (
    CODE_EMPTY_MESSAGE,
    CODE_INVALID_FORM_BODY,
    CODE_UNKNOWN_CHANNEL,
    json_response,
    no_content,
    read_json,
    snowflake,
)
from openab_voice.testing.emulator.rest import API, require_bot
from openab_voice.testing.emulator.wire import JsonObject, MessageBody, parse

MAX_CONTENT = 2000


def check_message_body(body: MessageBody, *, creating: bool) -> None:
    """Discord's own limits: non-empty on create, content at most 2000 characters.

    Raises:
        RestError: 400 with Discord's code.
    """
    content = body.get("content") or ""
    if len(content) > MAX_CONTENT:
        raise RestError(400, CODE_INVALID_FORM_BODY, f"Invalid Form Body: content longer than {MAX_CONTENT}")
    if creating and not (content or body.get("components") or body.get("embeds")):
        raise RestError(400, CODE_EMPTY_MESSAGE, "Cannot send an empty message")


class ChannelApi:
    """Messages and pins in the guild's channels, authored by the bot."""

    def __init__(self, state: GuildState, hub: GatewayHub, *, token: str) -> None:
        self._state = state
        self._hub = hub
        self._token = token

    def routes(self) -> list[web.RouteDef]:
        base = f"{API}/channels/{{channel}}"
        return [
            web.get(f"{base}/messages/pins", self.list_pins),
            web.put(f"{base}/messages/pins/{{message}}", self.pin),
            web.delete(f"{base}/messages/pins/{{message}}", self.unpin),
            web.get(f"{base}/pins", self.list_pins_legacy),
            web.put(f"{base}/pins/{{message}}", self.pin),
            web.delete(f"{base}/pins/{{message}}", self.unpin),
            web.get(f"{base}/messages", self.history),
            web.post(f"{base}/messages", self.create),
            web.get(f"{base}/messages/{{message}}", self.fetch),
            web.patch(f"{base}/messages/{{message}}", self.edit),
            web.delete(f"{base}/messages/{{message}}", self.delete),
        ]

    def _channel(self, request: web.Request) -> int:
        require_bot(request, self._token)
        channel_id = snowflake(request, "channel")
        if channel_id not in self._state.channel_ids():
            raise RestError(404, CODE_UNKNOWN_CHANNEL, "Unknown Channel")
        return channel_id

    async def create(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        body = parse(MessageBody, await read_json(request), what="message")
        check_message_body(body, creating=True)
        state = self._state
        message = payloads.message_payload(
            state,
            message_id=state.snowflakes.next(),
            channel_id=channel_id,
            author=state.user(state.ids.bot_user_id),
            body=body,
        )
        state.store_message(message)
        self._hub.dispatch_message("MESSAGE_CREATE", message)
        return json_response(message)

    async def history(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        try:
            limit = max(1, min(100, int(request.query.get("limit", "50"))))
        except ValueError:
            raise RestError(400, CODE_INVALID_FORM_BODY, "Invalid Form Body: limit") from None
        newest_first = list(reversed(self._state.messages(channel_id)))
        return json_response(newest_first[:limit])

    async def fetch(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        return json_response(self._state.message(channel_id, snowflake(request, "message")))

    async def edit(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        message = self._state.message(channel_id, snowflake(request, "message"))
        body = parse(MessageBody, await read_json(request), what="message edit")
        check_message_body(body, creating=False)
        payloads.apply_edit(self._state, message, body)
        self._hub.dispatch_message("MESSAGE_UPDATE", message)
        return json_response(message)

    async def delete(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        message_id = snowflake(request, "message")
        self._state.delete_message(channel_id, message_id)
        self._hub.dispatch(
            "MESSAGE_DELETE",
            {"id": str(message_id), "channel_id": str(channel_id), "guild_id": str(self._state.ids.guild_id)},
            intent=INTENT_GUILD_MESSAGES,
        )
        return no_content()

    async def pin(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        if self._state.pin(channel_id, snowflake(request, "message")):
            self._pins_update(channel_id)
        return no_content()

    async def unpin(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        if self._state.unpin(channel_id, snowflake(request, "message")):
            self._pins_update(channel_id)
        return no_content()

    async def list_pins(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        items: list[JsonObject] = [
            {"pinned_at": at, "message": self._state.message(channel_id, mid)}
            for _, mid, at in reversed(self._state.pinned(channel_id))
        ]
        return json_response({"items": items, "has_more": False})

    async def list_pins_legacy(self, request: web.Request) -> web.Response:
        channel_id = self._channel(request)
        pinned = reversed(self._state.pinned(channel_id))
        return json_response([self._state.message(channel_id, mid) for _, mid, _ in pinned])

    def _pins_update(self, channel_id: int) -> None:
        pinned = self._state.pinned(channel_id)
        data: JsonObject = {"guild_id": str(self._state.ids.guild_id), "channel_id": str(channel_id)}
        if pinned:
            data["last_pin_timestamp"] = pinned[-1][2]
        self._hub.dispatch("CHANNEL_PINS_UPDATE", data)
