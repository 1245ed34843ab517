"""What fake users do in text, as :class:`~openab_voice.testing.emulator.DiscordEmulator` methods:
slash commands, button clicks, messages and channel visibility, and the interactions they made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.gateway import GatewayHub
from openab_voice.testing.emulator.interactions import Interaction, InteractionRegistry
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.user_actions import UserActions
from openab_voice.testing.emulator.wire import JsonObject


class TextApi:
    """Mixed into ``DiscordEmulator``, which provides the parts below."""

    text_channel_id: int
    _state: GuildState
    _hub: GatewayHub
    _interactions: InteractionRegistry
    _actions: UserActions
    _require_running: Callable[[], None]  # raises EMULATOR_STATE when not running

    async def invoke_command(
        self,
        user_id: int,
        name: str,
        *,
        subcommand: str | None = None,
        options: dict[str, Any] | None = None,
        channel_id: int | None = None,
    ) -> Interaction:
        """Run a registered slash command as ``user_id`` (INTERACTION_CREATE type 2).

        Args:
            subcommand: ``"join"``, or ``"group sub"`` inside a subcommand group.
            options: option values by name; user/channel/role options take ids.
            channel_id: where it is invoked (the text channel by default).

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` when the command is not registered or the
                options do not match its schema; ``EMULATOR_NOT_CONNECTED`` without a bot.
        """
        self._require_running()
        return self._actions.invoke_command(
            user_id, name, subcommand=subcommand, options=options, channel_id=channel_id
        )

    async def click_button(self, user_id: int, message_id: int, custom_id: str) -> Interaction:
        """Click a button of a stored message as ``user_id`` (INTERACTION_CREATE type 3).

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` when the message has no such enabled button.
        """
        self._require_running()
        return self._actions.click_button(user_id, message_id, custom_id)

    def post_user_message(self, user_id: int, content: str, *, channel_id: int | None = None) -> JsonObject:
        """A fake user writes in a channel (MESSAGE_CREATE); returns the stored message."""
        self._require_running()
        return self._actions.post_message(user_id, content, channel_id=channel_id)

    def set_channel_view(self, user_id: int, *, visible: bool, channel_id: int | None = None) -> None:
        """Take away (or give back) a member's view of a channel, the text channel by default: a
        member permission overwrite denying VIEW_CHANNEL, sent as CHANNEL_UPDATE as Discord does."""
        self._require_running()
        channel = self.text_channel_id if channel_id is None else channel_id
        self._state.set_view(channel, user_id, visible=visible)
        self._hub.dispatch("CHANNEL_UPDATE", payloads.channel_payload(self._state, channel))

    @property
    def interactions(self) -> list[Interaction]:
        """Every interaction sent to the bot, oldest first."""
        return self._interactions.all()
