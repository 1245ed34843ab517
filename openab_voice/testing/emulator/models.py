"""The emulated guild: its ids, users, voice membership, messages and pins.

All state lives on the event loop; handlers mutate it and :mod:`payloads` renders it.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import itertools
from dataclasses import dataclass

from openab_voice.clock import Clock
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.wire import JsonObject

# Ids are deterministic Discord-shaped snowflakes: (ms since the Discord epoch << 22) | counter.
_SNOWFLAKE_BASE_MS = 1_300_000_000_000


class Snowflakes:
    """Deterministic, strictly increasing snowflake ids."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def next(self) -> int:
        n = next(self._counter)
        return ((_SNOWFLAKE_BASE_MS + n) << 22) | (n & 0x3FFFFF)


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord:
    """A guild member as the emulator knows it.

    Attributes:
        id: the user id.
        name: username (also the global name).
        bot: whether the account is a bot.
        in_voice: whether the user sits in the guild's voice channel.
        voice_session_id: the main-gateway voice session id while in voice.
    """

    id: int
    name: str
    bot: bool
    in_voice: bool
    voice_session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GuildIds:
    """The fixed ids of one emulator run."""

    guild_id: int
    text_channel_id: int
    voice_channel_id: int
    bot_user_id: int
    application_id: int


class GuildState:
    """Users, messages and pins of the single emulated guild.

    Args:
        ids: the run's ids.
        bot_name: the bot user's name.
        clock: supplies wall time for message timestamps.
        snowflakes: the id source for messages and commands.
    """

    def __init__(self, ids: GuildIds, *, bot_name: str, clock: Clock, snowflakes: Snowflakes) -> None:
        self.ids = ids
        self._clock = clock
        self.snowflakes = snowflakes
        self.created_at = self.iso_now()
        self.users: dict[int, UserRecord] = {
            ids.bot_user_id: UserRecord(id=ids.bot_user_id, name=bot_name, bot=True, in_voice=False)
        }
        # message id -> full message payload; insertion order is creation order.
        self._messages: dict[int, JsonObject] = {}
        # channel id -> [(message id, pinned_at ISO)] in pin order.
        self._pins: dict[int, list[tuple[int, str]]] = {}
        # channel id -> users a member overwrite denies VIEW_CHANNEL there.
        self.hidden: dict[int, set[int]] = {}

    # --- time & ids ----------------------------------------------------------------------------

    def iso_now(self) -> str:
        """The injected clock's wall time as Discord's ISO-8601 timestamp."""
        moment = datetime.datetime.fromtimestamp(self._clock.wall(), tz=datetime.UTC)
        return moment.isoformat(timespec="microseconds")

    def channel_ids(self) -> tuple[int, int]:
        return self.ids.text_channel_id, self.ids.voice_channel_id

    def require_text_channel(self, channel_id: int) -> None:
        """Messages can only live in the text channel (and the voice channel's text chat)."""
        if channel_id not in self.channel_ids():
            raise EmulatorError(f"unknown channel {channel_id}", code=ErrorCode.EMULATOR_UNKNOWN_CHANNEL)

    # --- users --------------------------------------------------------------------------------

    def add_user(self, user_id: int, name: str, *, bot: bool, in_voice: bool) -> UserRecord:
        if user_id in self.users or user_id in (self.ids.guild_id, self.ids.application_id):
            raise EmulatorError(f"user id {user_id} is already taken", code=ErrorCode.EMULATOR_DUPLICATE_USER)
        if user_id <= 0:
            raise EmulatorError("user ids must be positive", code=ErrorCode.EMULATOR_BAD_USER)
        record = UserRecord(id=user_id, name=name, bot=bot, in_voice=in_voice)
        self.users[user_id] = record
        return record

    def user(self, user_id: int) -> UserRecord:
        try:
            return self.users[user_id]
        except KeyError:
            raise EmulatorError(f"unknown user {user_id}", code=ErrorCode.EMULATOR_UNKNOWN_USER) from None

    def set_voice(self, user_id: int, *, in_voice: bool, session_id: str | None) -> UserRecord:
        record = dataclasses.replace(self.user(user_id), in_voice=in_voice, voice_session_id=session_id)
        self.users[user_id] = record
        return record

    def voice_members(self) -> list[UserRecord]:
        """Users currently in the voice channel, the bot included when it is there."""
        return [u for u in self.users.values() if u.in_voice]

    def fake_voice_members(self) -> list[UserRecord]:
        """Users other than the bot currently in the voice channel."""
        return [u for u in self.voice_members() if u.id != self.ids.bot_user_id]

    def set_view(self, channel_id: int, user_id: int, *, visible: bool) -> None:
        """Grant or deny ``user_id`` the view of a channel (a member permission overwrite)."""
        self.user(user_id)
        if channel_id not in self.channel_ids():
            raise EmulatorError(f"unknown channel {channel_id}", code=ErrorCode.EMULATOR_UNKNOWN_CHANNEL)
        hidden = self.hidden.setdefault(channel_id, set())
        if visible:
            hidden.discard(user_id)
        else:
            hidden.add(user_id)

    # --- messages -----------------------------------------------------------------------------

    def store_message(self, message: JsonObject) -> JsonObject:
        self._messages[int(message["id"])] = message
        return message

    def message(self, channel_id: int, message_id: int) -> JsonObject:
        """The live (mutable) stored message.

        Raises:
            EmulatorError: ``EMULATOR_UNKNOWN_MESSAGE`` when there is no such message in the channel.
        """
        found = self._messages.get(message_id)
        if found is None or int(found["channel_id"]) != channel_id:
            raise EmulatorError(f"unknown message {message_id}", code=ErrorCode.EMULATOR_UNKNOWN_MESSAGE)
        return found

    def find_message(self, message_id: int) -> JsonObject:
        found = self._messages.get(message_id)
        if found is None:
            raise EmulatorError(f"unknown message {message_id}", code=ErrorCode.EMULATOR_UNKNOWN_MESSAGE)
        return found

    def delete_message(self, channel_id: int, message_id: int) -> None:
        self.message(channel_id, message_id)
        del self._messages[message_id]
        pins = self._pins.get(channel_id, [])
        self._pins[channel_id] = [p for p in pins if p[0] != message_id]

    def messages(self, channel_id: int | None = None) -> list[JsonObject]:
        """Deep copies of the stored messages, oldest first, optionally of one channel."""
        return [
            copy.deepcopy(m)
            for m in self._messages.values()
            if channel_id is None or int(m["channel_id"]) == channel_id
        ]

    # --- pins ---------------------------------------------------------------------------------

    def pin(self, channel_id: int, message_id: int) -> bool:
        """Pin a message; returns False when it already was pinned."""
        message = self.message(channel_id, message_id)
        pins = self._pins.setdefault(channel_id, [])
        if any(mid == message_id for mid, _ in pins):
            return False
        pins.append((message_id, self.iso_now()))
        message["pinned"] = True
        return True

    def unpin(self, channel_id: int, message_id: int) -> bool:
        """Unpin a message; returns False when it was not pinned."""
        message = self.message(channel_id, message_id)
        pins = self._pins.get(channel_id, [])
        kept = [p for p in pins if p[0] != message_id]
        if len(kept) == len(pins):
            return False
        self._pins[channel_id] = kept
        message["pinned"] = False
        return True

    def pinned(self, channel_id: int | None = None) -> list[tuple[int, int, str]]:
        """``(channel id, message id, pinned_at)`` in pin order."""
        return [
            (cid, mid, at)
            for cid, pins in self._pins.items()
            if channel_id is None or cid == channel_id
            for mid, at in pins
        ]
