"""Interaction callbacks and the interaction webhook: ``@original`` and follow-ups.

These routes arrive without an ``Authorization`` header (discord.py's webhook adapter sends none
for interaction tokens), so the token in the path is the credential. The callback answers the
``?with_response=1`` shape that discord.py 2.7 parses (``InteractionCallbackResponse._update``:
``data['interaction']`` is required).
"""

from __future__ import annotations

from aiohttp import web

from openab_voice.errors import EmulatorError, RestError
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.channels import check_message_body
from openab_voice.testing.emulator.gateway import INTENT_GUILD_MESSAGES, GatewayHub
from openab_voice.testing.emulator.interactions import (
    CALLBACK_DEFERRED_MESSAGE,
    CALLBACK_DEFERRED_UPDATE,
    CALLBACK_MESSAGE,
    CALLBACK_MODAL,
    CALLBACK_UPDATE_MESSAGE,
    KNOWN_CALLBACKS,
    Interaction,
    InteractionRegistry,
)
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.responses import (
    CODE_ALREADY_ACKNOWLEDGED,
    CODE_INVALID_FORM_BODY,
    CODE_UNKNOWN_INTERACTION,
    CODE_UNKNOWN_MESSAGE,
    CODE_UNKNOWN_WEBHOOK,
    json_response,
    no_content,
    read_json,
    read_upload,
    snowflake,
)
from openab_voice.testing.emulator.rest import API
from openab_voice.testing.emulator.wire import InteractionCallbackBody, JsonObject, MessageBody, parse

CHAT_INPUT_COMMAND_MESSAGE = 20


def _ephemeral(message: JsonObject) -> bool:
    return bool(int(message.get("flags") or 0) & payloads.MESSAGE_FLAG_EPHEMERAL)


class WebhookApi:
    """Answers to interactions."""

    def __init__(self, state: GuildState, interactions: InteractionRegistry, hub: GatewayHub) -> None:
        self._state = state
        self._interactions = interactions
        self._hub = hub

    def routes(self) -> list[web.RouteDef]:
        hook = f"{API}/webhooks/{{app}}/{{token}}"
        return [
            web.post(f"{API}/interactions/{{interaction}}/{{token}}/callback", self.callback),
            web.get(f"{hook}/messages/@original", self.get_original),
            web.patch(f"{hook}/messages/@original", self.edit_original),
            web.delete(f"{hook}/messages/@original", self.delete_original),
            web.post(hook, self.followup),
            web.get(f"{hook}/messages/{{message}}", self.get_followup),
            web.patch(f"{hook}/messages/{{message}}", self.edit_followup),
            web.delete(f"{hook}/messages/{{message}}", self.delete_followup),
        ]

    # --- the callback ---------------------------------------------------------------------------

    async def callback(self, request: web.Request) -> web.Response:
        interaction = self._interactions.by_id(snowflake(request, "interaction"), request.match_info["token"])
        if interaction is None:
            raise RestError(404, CODE_UNKNOWN_INTERACTION, "Unknown interaction")
        if interaction.callbacks:
            raise RestError(400, CODE_ALREADY_ACKNOWLEDGED, "Interaction has already been acknowledged.")
        body = parse(InteractionCallbackBody, await read_json(request), what="interaction callback")
        kind = body["type"]
        if kind not in KNOWN_CALLBACKS:
            raise RestError(
                400, CODE_INVALID_FORM_BODY, f"Invalid Form Body: unsupported callback type {kind}"
            )
        if kind in (CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE_MESSAGE) and interaction.kind != "component":
            raise RestError(400, CODE_INVALID_FORM_BODY, "Invalid Form Body: this interaction has no message")
        data = body.get("data") or {}
        message: JsonObject | None = None
        if kind in (CALLBACK_MESSAGE, CALLBACK_DEFERRED_MESSAGE):
            message = self._create_original(interaction, data, loading=kind == CALLBACK_DEFERRED_MESSAGE)
        elif kind in (CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE_MESSAGE):
            message = interaction.original = self._source_message(interaction)
            if kind == CALLBACK_UPDATE_MESSAGE:
                edit = parse(MessageBody, data, what="message update")
                check_message_body(edit, creating=False)
                payloads.apply_edit(self._state, message, edit)
                self._hub.dispatch_message("MESSAGE_UPDATE", message)
        interaction.record_callback({"type": kind, "data": data})
        if kind in (CALLBACK_MESSAGE, CALLBACK_UPDATE_MESSAGE):
            interaction.record_reply("callback", message)
        elif kind == CALLBACK_MODAL:
            interaction.record_reply("callback", None)
        if request.query.get("with_response", "").lower() not in ("1", "true"):
            return no_content()
        result: JsonObject = {
            "interaction": {
                "id": str(interaction.id),
                "type": 2 if interaction.kind == "command" else 3,
                "response_message_id": None if message is None else message["id"],
                "response_message_loading": kind == CALLBACK_DEFERRED_MESSAGE,
                "response_message_ephemeral": message is not None and _ephemeral(message),
            }
        }
        if message is not None and kind != CALLBACK_DEFERRED_UPDATE:
            result["resource"] = {"type": kind, "message": message}
        return json_response(result)

    def _create_original(self, interaction: Interaction, data: JsonObject, *, loading: bool) -> JsonObject:
        body = parse(MessageBody, data, what="interaction message")
        if not loading:
            check_message_body(body, creating=True)
        state = self._state
        message = payloads.message_payload(
            state,
            message_id=state.snowflakes.next(),
            channel_id=interaction.channel_id,
            author=state.user(state.ids.bot_user_id),
            body=body,
            message_type=CHAT_INPUT_COMMAND_MESSAGE if interaction.kind == "command" else 0,
            webhook_id=state.ids.application_id,
            interaction_metadata={
                "id": str(interaction.id),
                "type": 2 if interaction.kind == "command" else 3,
                "user": payloads.user_payload(state.user(interaction.user_id)),
                "authorizing_integration_owners": {"0": str(state.ids.guild_id)},
            },
        )
        if loading:
            message["flags"] = int(message["flags"]) | payloads.MESSAGE_FLAG_LOADING
        interaction.original = message
        self._publish(message)
        return message

    def _source_message(self, interaction: Interaction) -> JsonObject:
        if interaction.source_message_id is None:
            raise RestError(400, CODE_INVALID_FORM_BODY, "Invalid Form Body: this interaction has no message")
        return self._state.find_message(interaction.source_message_id)

    def _publish(self, message: JsonObject) -> None:
        # Ephemeral messages are visible to one user only: never in the channel or the gateway.
        if not _ephemeral(message):
            self._state.store_message(message)
            self._hub.dispatch_message("MESSAGE_CREATE", message)

    # --- the webhook ----------------------------------------------------------------------------

    def _hook(self, request: web.Request) -> Interaction:
        interaction = self._interactions.by_token(request.match_info["token"])
        if interaction is None or snowflake(request, "app") != self._state.ids.application_id:
            raise RestError(404, CODE_UNKNOWN_WEBHOOK, "Unknown Webhook")
        return interaction

    def _original(self, request: web.Request) -> tuple[Interaction, JsonObject]:
        interaction = self._hook(request)
        if interaction.original is None:
            raise RestError(404, CODE_UNKNOWN_MESSAGE, "Unknown Message")
        return interaction, interaction.original

    async def get_original(self, request: web.Request) -> web.Response:
        return json_response(self._original(request)[1])

    async def edit_original(self, request: web.Request) -> web.Response:
        interaction, message = self._original(request)
        body = parse(MessageBody, await read_json(request), what="message edit")
        check_message_body(body, creating=False)
        self._apply(message, body)
        interaction.edits.append(dict(message))
        interaction.record_reply("edit", message)
        return json_response(message)

    async def delete_original(self, request: web.Request) -> web.Response:
        interaction, message = self._original(request)
        if not _ephemeral(message):
            self._delete(message)
        interaction.original = None
        return no_content()

    async def followup(self, request: web.Request) -> web.Response:
        interaction = self._hook(request)
        if not interaction.callbacks:
            raise RestError(404, CODE_UNKNOWN_WEBHOOK, "Unknown Webhook")  # Discord: acknowledge first
        raw, uploads = await read_upload(request)
        body = parse(MessageBody, raw, what="follow-up message")
        check_message_body(body, creating=not uploads)  # a message of files alone is not empty
        original = interaction.original
        if original is not None and int(original["flags"]) & payloads.MESSAGE_FLAG_LOADING:
            # The first follow-up after a deferral replaces the "thinking..." message.
            message = self._apply(original, body)
        else:
            state = self._state
            message = payloads.message_payload(
                state,
                message_id=state.snowflakes.next(),
                channel_id=interaction.channel_id,
                author=state.user(state.ids.bot_user_id),
                body=body,
                webhook_id=state.ids.application_id,
            )
            self._publish(message)
        if uploads:
            message["attachments"] = payloads.attachments_payload(self._state, message, uploads)
        interaction.followups.append(message)
        interaction.record_reply("followup", message, files=uploads)
        if request.query.get("wait", "").lower() in ("1", "true"):
            return json_response(message)
        return no_content()

    def _followup(self, request: web.Request) -> tuple[Interaction, JsonObject]:
        interaction = self._hook(request)
        message_id = snowflake(request, "message")
        for message in interaction.followups:
            if int(message["id"]) == message_id:
                return interaction, message
        raise RestError(404, CODE_UNKNOWN_MESSAGE, "Unknown Message")

    async def get_followup(self, request: web.Request) -> web.Response:
        return json_response(self._followup(request)[1])

    async def edit_followup(self, request: web.Request) -> web.Response:
        _, message = self._followup(request)
        body = parse(MessageBody, await read_json(request), what="message edit")
        check_message_body(body, creating=False)
        return json_response(self._apply(message, body))

    async def delete_followup(self, request: web.Request) -> web.Response:
        interaction, message = self._followup(request)
        interaction.followups.remove(message)
        if not _ephemeral(message):
            self._delete(message)
        return no_content()

    def _apply(self, message: JsonObject, body: MessageBody) -> JsonObject:
        payloads.apply_edit(self._state, message, body)
        message["flags"] = int(message["flags"]) & ~payloads.MESSAGE_FLAG_LOADING
        if not _ephemeral(message):
            self._hub.dispatch_message("MESSAGE_UPDATE", message)
        return message

    def _delete(self, message: JsonObject) -> None:
        channel_id = int(message["channel_id"])
        try:
            self._state.delete_message(channel_id, int(message["id"]))
        except EmulatorError:  # already deleted through the channel route: nothing left to do
            return
        self._hub.dispatch(
            "MESSAGE_DELETE",
            {"id": message["id"], "channel_id": str(channel_id), "guild_id": str(self._state.ids.guild_id)},
            intent=INTENT_GUILD_MESSAGES,
        )
