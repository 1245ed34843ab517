"""What fake users do in text: run slash commands, click buttons, write messages."""

from __future__ import annotations

import secrets
from typing import Any, Literal

from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.commands import CommandRegistry
from openab_voice.testing.emulator.gateway import GatewayHub
from openab_voice.testing.emulator.interactions import (
    APPLICATION_COMMAND,
    MESSAGE_COMPONENT,
    Interaction,
    InteractionRegistry,
    interaction_create,
)
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.wire import JsonObject

BUTTON = 2


class UserActions:
    """Turns a fake user's action into the gateway dispatch Discord would send the bot."""

    def __init__(
        self, state: GuildState, commands: CommandRegistry, interactions: InteractionRegistry, hub: GatewayHub
    ) -> None:
        self._state = state
        self._commands = commands
        self._interactions = interactions
        self._hub = hub

    def _new_interaction(
        self, *, kind: Literal["command", "component"], user_id: int, channel_id: int, **details: Any
    ) -> Interaction:
        if not self._hub.connected:
            raise EmulatorError("no bot is connected to the gateway", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        interaction_id = self._state.snowflakes.next()
        # Not from the seeded generator: tokens must not shift the seeded SSRC / RTP streams.
        token = f"itoken-{interaction_id}-{secrets.token_hex(8)}"
        interaction = Interaction(
            interaction_id=interaction_id,
            token=token,
            kind=kind,
            user_id=user_id,
            channel_id=channel_id,
            **details,
        )
        self._interactions.add(interaction)
        return interaction

    def _channel(self, channel_id: int | None) -> int:
        channel = self._state.ids.text_channel_id if channel_id is None else channel_id
        self._state.require_text_channel(channel)
        return channel

    def invoke_command(
        self,
        user_id: int,
        name: str,
        *,
        subcommand: str | None,
        options: dict[str, Any] | None,
        channel_id: int | None,
    ) -> Interaction:
        channel = self._channel(channel_id)
        self._state.user(user_id)
        data = self._commands.invocation_data(self._state, name, subcommand=subcommand, options=options)
        interaction = self._new_interaction(
            kind="command", user_id=user_id, channel_id=channel, name=name, data=data
        )
        payload = interaction_create(
            self._state, interaction, interaction_type=APPLICATION_COMMAND, data=data
        )
        self._hub.dispatch("INTERACTION_CREATE", payload)
        return interaction

    def click_button(self, user_id: int, message_id: int, custom_id: str) -> Interaction:
        self._state.user(user_id)
        message = self._state.find_message(message_id)
        button = find_component(message.get("components") or [], custom_id)
        if button is None or button.get("type") != BUTTON:
            raise EmulatorError(
                f"message {message_id} has no button {custom_id!r}", code=ErrorCode.EMULATOR_BAD_INVOCATION
            )
        if button.get("disabled"):
            raise EmulatorError(f"button {custom_id!r} is disabled", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        interaction = self._new_interaction(
            kind="component",
            user_id=user_id,
            channel_id=int(message["channel_id"]),
            custom_id=custom_id,
            source_message_id=message_id,
        )
        payload = interaction_create(
            self._state,
            interaction,
            interaction_type=MESSAGE_COMPONENT,
            data={"custom_id": custom_id, "component_type": BUTTON},
            message=message,
        )
        self._hub.dispatch("INTERACTION_CREATE", payload)
        return interaction

    def post_message(self, user_id: int, content: str, *, channel_id: int | None) -> JsonObject:
        channel = self._channel(channel_id)
        message = payloads.message_payload(
            self._state,
            message_id=self._state.snowflakes.next(),
            channel_id=channel,
            author=self._state.user(user_id),
            body={"content": content},
        )
        self._state.store_message(message)
        self._hub.dispatch_message("MESSAGE_CREATE", message)
        return message


def find_component(components: list[Any], custom_id: str) -> JsonObject | None:
    """The component with ``custom_id`` anywhere in a (nested) component tree."""
    for component in components:
        if not isinstance(component, dict):
            continue
        if component.get("custom_id") == custom_id:
            return component
        found = find_component(component.get("components") or [], custom_id)
        if found is not None:
            return found
    return None
