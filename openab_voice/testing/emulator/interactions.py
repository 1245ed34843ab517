"""Interactions the emulator delivers to the bot, and what the bot answers to each.

An :class:`Interaction` is created for every ``invoke_command`` / ``click_button``; the REST
handlers in :mod:`webhooks` record the bot's callback, ``@original`` edits and follow-ups on it, and
tests await :meth:`Interaction.response` (the reply's text) or :meth:`Interaction.reply` (all of it).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.responses import Upload
from openab_voice.testing.emulator.waiting import HangGuard
from openab_voice.testing.emulator.wire import JsonObject

APPLICATION_COMMAND = 2
MESSAGE_COMPONENT = 3
# Interaction callback types (Discord "Interaction Response Type").
CALLBACK_MESSAGE = 4
CALLBACK_DEFERRED_MESSAGE = 5
CALLBACK_DEFERRED_UPDATE = 6
CALLBACK_UPDATE_MESSAGE = 7
CALLBACK_MODAL = 9
KNOWN_CALLBACKS = frozenset(
    {
        CALLBACK_MESSAGE,
        CALLBACK_DEFERRED_MESSAGE,
        CALLBACK_DEFERRED_UPDATE,
        CALLBACK_UPDATE_MESSAGE,
        CALLBACK_MODAL,
    }
)
DEFAULT_TIMEOUT = 5.0
_SUBCOMMAND_TYPES = (1, 2)  # application command option types SUB_COMMAND, SUB_COMMAND_GROUP


@dataclass(frozen=True, slots=True, kw_only=True)
class InteractionReply:
    """The first answer of the bot to an interaction that carried content.

    Attributes:
        source: how it arrived: the callback itself, an ``@original`` edit, or a follow-up.
        callback_type: the interaction callback type the bot chose (4, 5, 6, 7 ...).
        content: the message content (``""`` for content-less answers such as a modal).
        message: a copy of the message as stored (``None`` for a modal).
        ephemeral: whether only the invoking user would see it.
        files: the files attached to it, as uploaded (follow-ups).
    """

    source: Literal["callback", "edit", "followup"]
    callback_type: int
    content: str
    message: JsonObject | None
    ephemeral: bool
    files: tuple[Upload, ...] = ()


class Interaction:
    """One interaction sent to the bot and everything it answered.

    Attributes:
        id: interaction id.
        token: interaction token (the webhook token of its follow-ups).
        kind: ``"command"`` or ``"component"``.
        user_id: who invoked or clicked.
        channel_id: the channel it happened in.
        name: the command name (commands only).
        custom_id: the component's custom id (components only).
        source_message_id: the message whose component was clicked (components only).
        data: the INTERACTION_CREATE ``data`` the bot was sent (its command path and options).
        callbacks: raw callback bodies ``{"type", "data"}`` in arrival order (Discord accepts one).
        followups: follow-up messages, in order.
        edits: message payloads after each ``@original`` edit.
        original: the original response message (created by the callback, or the clicked message
            for component updates), if any.
    """

    def __init__(
        self,
        *,
        interaction_id: int,
        token: str,
        kind: Literal["command", "component"],
        user_id: int,
        channel_id: int,
        name: str | None = None,
        custom_id: str | None = None,
        source_message_id: int | None = None,
        data: JsonObject | None = None,
    ) -> None:
        self.id = interaction_id
        self.token = token
        self.kind = kind
        self.user_id = user_id
        self.channel_id = channel_id
        self.name = name
        self.custom_id = custom_id
        self.source_message_id = source_message_id
        self.data = copy.deepcopy(data)
        self.callbacks: list[JsonObject] = []
        self.followups: list[JsonObject] = []
        self.edits: list[JsonObject] = []
        # The live original response message (shared with the channel store unless ephemeral).
        self.original: JsonObject | None = None
        self._replies: list[InteractionReply] = []
        self._acked = asyncio.Event()
        self._replied = asyncio.Event()

    @property
    def original_message_id(self) -> int | None:
        return None if self.original is None else int(self.original["id"])

    @property
    def command_text(self) -> str | None:
        """A command as Discord's client shows it, ``/voice memory forget:12`` (None for components)."""
        if self.kind != "command" or self.data is None:
            return None
        words = [f"/{self.data.get('name', self.name)}"]
        options: list[JsonObject] = list(self.data.get("options") or [])
        while len(options) == 1 and options[0].get("type") in _SUBCOMMAND_TYPES:
            words.append(str(options[0]["name"]))  # its own options are inside it
            options = list(options[0].get("options") or [])
        resolved: JsonObject = self.data.get("resolved") or {}
        for option in options:
            words.append(f"{option['name']}:{_shown(option.get('value'), resolved)}")
        return " ".join(words)

    @property
    def callback_type(self) -> int | None:
        """The callback type, once the bot acknowledged."""
        return int(self.callbacks[0]["type"]) if self.callbacks else None

    @property
    def replies(self) -> list[InteractionReply]:
        """Every content-bearing answer so far, in order."""
        return list(self._replies)

    async def acknowledged(self, timeout: float = DEFAULT_TIMEOUT) -> int:  # noqa: ASYNC109 (hang guard)
        """Wait for the interaction callback; returns its type.

        Raises:
            EmulatorError: ``EMULATOR_TIMEOUT`` when the bot does not answer in time.
        """
        async with HangGuard(timeout, f"the bot did not acknowledge interaction {self.id}"):
            await self._acked.wait()
        return int(self.callbacks[0]["type"])

    async def reply(self, timeout: float = DEFAULT_TIMEOUT) -> InteractionReply:  # noqa: ASYNC109
        """Wait for the first answer with content: a message callback, an ``@original`` edit after a
        deferral, or a follow-up (a modal counts too, with empty content).

        Raises:
            EmulatorError: ``EMULATOR_TIMEOUT`` when none arrives in time.
        """
        async with HangGuard(timeout, f"the bot did not reply to interaction {self.id}"):
            await self._replied.wait()
        return self._replies[0]

    async def response(self, timeout: float = DEFAULT_TIMEOUT) -> str:  # noqa: ASYNC109
        """The content of :meth:`reply`: what the user reads first."""
        return (await self.reply(timeout)).content

    # --- recorded by the REST handlers ---------------------------------------------------------

    def record_callback(self, body: JsonObject) -> None:
        self.callbacks.append(copy.deepcopy(body))
        self._acked.set()

    def record_reply(
        self,
        source: Literal["callback", "edit", "followup"],
        message: JsonObject | None,
        *,
        files: Sequence[Upload] = (),
    ) -> None:
        flags = int((message or {}).get("flags") or 0)
        self._replies.append(
            InteractionReply(
                source=source,
                callback_type=self.callback_type or 0,
                content=str((message or {}).get("content") or ""),
                message=copy.deepcopy(message),
                ephemeral=bool(flags & payloads.MESSAGE_FLAG_EPHEMERAL),
                files=tuple(files),
            )
        )
        self._replied.set()


def _shown(value: object, resolved: JsonObject) -> str:
    """An option value as the client shows it: ``#channel`` and ``@user`` for resolved ids."""
    if isinstance(value, bool):
        return str(value).lower()
    channel = (resolved.get("channels") or {}).get(str(value))
    if channel is not None:
        return f"#{channel.get('name', value)}"
    user = (resolved.get("users") or {}).get(str(value))
    if user is not None:
        return f"@{user.get('username', value)}"
    return str(value)


class InteractionRegistry:
    """Interactions by id and by token."""

    def __init__(self) -> None:
        self._by_id: dict[int, Interaction] = {}
        self._by_token: dict[str, Interaction] = {}

    def add(self, interaction: Interaction) -> None:
        self._by_id[interaction.id] = interaction
        self._by_token[interaction.token] = interaction

    def by_id(self, interaction_id: int, token: str) -> Interaction | None:
        found = self._by_id.get(interaction_id)
        return found if found is not None and found.token == token else None

    def by_token(self, token: str) -> Interaction | None:
        return self._by_token.get(token)

    def all(self) -> list[Interaction]:
        return list(self._by_id.values())


def interaction_create(
    state: GuildState,
    interaction: Interaction,
    *,
    interaction_type: int,
    data: JsonObject,
    message: JsonObject | None = None,
) -> JsonObject:
    """The INTERACTION_CREATE ``d``; ``attachment_size_limit`` is read unconditionally by
    ``Interaction._from_data`` (discord/interactions.py)."""
    user = state.user(interaction.user_id)
    member = payloads.member_payload(state, user)
    member["permissions"] = payloads.ALL_PERMISSIONS
    channel = payloads.channel_payload(state, interaction.channel_id)
    payload: JsonObject = {
        "id": str(interaction.id),
        "application_id": str(state.ids.application_id),
        "type": interaction_type,
        "token": interaction.token,
        "version": 1,
        "guild_id": str(state.ids.guild_id),
        "guild": {"id": str(state.ids.guild_id), "locale": "en-US", "features": []},
        "channel": channel,
        "channel_id": str(interaction.channel_id),
        "member": member,
        "app_permissions": payloads.ALL_PERMISSIONS,
        "locale": "en-US",
        "guild_locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {"0": str(state.ids.guild_id)},
        "context": 0,
        "attachment_size_limit": 8 * 1024 * 1024,
        "data": data,
    }
    if message is not None:
        payload["message"] = message
    return payload
