"""The voice server's side of DAVE for one bot connection, built on :class:`mls.DaveGroup`.

The bot joins an established E2EE call (notes §3, "DAVE-on flow"): on its key package (op 26)
the group commits an external Add and the bot gets a Welcome (op 30) with a transition id, answers
op 23, and the server executes with op 22. Fake users joining or leaving later go through op 27
(the proposals, which the bot must store before the commit) and op 29 (the winning commit).

The group always contains one hidden member, the *recorder*: it is the committer, never leaves, and
is how the emulator decrypts the bot's own frames (``decrypt(bot_id, audio, frame)`` needs a
member's session). It shows up only in ``dave_session.get_user_ids()``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import davey

from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator.mls import DaveGroup

OPUS_SILENCE = b"\xf8\xff\xfe"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitTransition:
    """What to forward to the bot for a membership change it must follow.

    Attributes:
        proposals: op 27 payload after the opcode (``u8 operation || vl(messages)``).
        transition_id: the id announced with op 29.
        commit: the commit MLSMessage for op 29.
    """

    proposals: bytes
    transition_id: int
    commit: bytes


class DavePeer:
    """DAVE state of one voice connection.

    Args:
        channel_id: the voice channel (the MLS group id).
        bot_id: the bot's user id.
        recorder_id: the hidden member's id.
        member_ids: fake users already in the call.
    """

    def __init__(self, *, channel_id: int, bot_id: int, recorder_id: int, member_ids: list[int]) -> None:
        self.bot_id = bot_id
        self.recorder_id = recorder_id
        self.group = DaveGroup(channel_id, [recorder_id, *member_ids])
        self._ids = itertools.count(1)
        # Transitions announced to the bot that it has not confirmed with op 23 yet.
        self._pending: set[int] = set()
        self._welcome_transition: int | None = None
        self.bot_joined = False

    def _next_transition(self) -> int:
        # u16 on the wire and 0 means "no transition" (discord.py skips op 23 for it).
        return (next(self._ids) - 1) % 0xFFFF + 1

    @property
    def privacy_code(self) -> str | None:
        return self.group.privacy_code

    def external_sender(self) -> bytes:
        """The op 25 payload."""
        return self.group.external_sender.serialized()

    def welcome_bot(self, key_package: bytes) -> tuple[int, bytes]:
        """Admit the bot by its op 26 key package; returns ``(transition_id, welcome)`` for op 30."""
        try:
            _, welcome = self.group.admit(key_package)
        except Exception as exc:  # davey raises plain exceptions for malformed MLS input
            raise EmulatorError(f"bad DAVE key package: {exc}", code="EMULATOR_DAVE_FAILED") from exc
        transition = self._next_transition()
        self._pending.add(transition)
        self._welcome_transition = transition
        return transition, welcome

    def transition_ready(self, transition_id: int) -> bool:
        """The bot answered op 23; True when the id was pending (then send op 22)."""
        if transition_id not in self._pending:
            return False
        self._pending.discard(transition_id)
        if transition_id == self._welcome_transition:
            self.bot_joined = True
        return True

    def is_member(self, user_id: int) -> bool:
        return user_id in self.group.sessions

    def add_member(self, user_id: int) -> CommitTransition:
        """A fake user joins the call: the group commits its Add; the bot must follow."""
        self.group.join(user_id)
        return self._transition()

    def remove_member(self, user_id: int) -> CommitTransition | None:
        """A fake user leaves; ``None`` when it never was a member."""
        if user_id not in self.group.sessions:
            return None
        self.group.remove(user_id)
        return self._transition()

    def _transition(self) -> CommitTransition:
        proposals, commit = self.group.last_proposals, self.group.last_commit
        if proposals is None or commit is None:
            raise EmulatorError("the DAVE group produced no commit", code="EMULATOR_DAVE_FAILED")
        transition = self._next_transition()
        self._pending.add(transition)
        return CommitTransition(proposals=proposals, transition_id=transition, commit=commit)

    def encrypt(self, user_id: int, opus: bytes) -> bytes:
        """A fake user's frame, end-to-end encrypted (silence passes through, as davey does)."""
        if opus == OPUS_SILENCE:
            return opus
        session = self.group.sessions.get(user_id)
        if session is None:
            raise EmulatorError(f"user {user_id} is not in the DAVE group", code="EMULATOR_DAVE_FAILED")
        return bytes(session.encrypt_opus(opus))

    def decrypt_from_bot(self, frame: bytes) -> bytes:
        """The bot's frame as the recorder hears it.

        Raises:
            EmulatorError: ``EMULATOR_DAVE_FAILED`` when davey cannot decrypt it.
        """
        if frame == OPUS_SILENCE:
            return frame
        try:
            return bytes(
                self.group.sessions[self.recorder_id].decrypt(self.bot_id, davey.MediaType.audio, frame)
            )
        except Exception as exc:  # davey signals every decrypt failure with a plain exception
            raise EmulatorError(f"DAVE decrypt failed: {exc}", code="EMULATOR_DAVE_FAILED") from exc
