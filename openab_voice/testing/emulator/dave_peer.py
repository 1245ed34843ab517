"""The voice server's side of DAVE for one bot connection, built on :class:`mls.DaveGroup`.

The bot joins an established E2EE call (notes §3, "DAVE-on flow": op 26 key package, external Add,
Welcome op 30, op 23, execute op 22); fake users joining or leaving later go through op 27 and op 29.
The group always holds a *recorder* member: the default committer, announced by op 11, through which
the emulator decrypts the bot's own frames. With ``client_commits`` the bot's op 28 commit wins when
it arrives in time. A second KeyPackage from the bot replaces its old leaf in the same commit.
The flow in detail: docs/adr/0002-loopback-discord-emulator.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import davey

from openab_voice.errors import EmulatorError, ErrorCode, MlsWireError
from openab_voice.testing.emulator.mls import DaveGroup, ExternalSender, Proposal
from openab_voice.testing.emulator.mls_wire import split_commit_welcome

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

    def __init__(
        self,
        *,
        channel_id: int,
        bot_id: int,
        recorder_id: int,
        member_ids: list[int],
        external_sender: ExternalSender | None = None,
        first_transition: int = 1,
    ) -> None:
        self.bot_id = bot_id
        self.recorder_id = recorder_id
        self.group = DaveGroup(channel_id, [recorder_id, *member_ids], external_sender=external_sender)
        self._ids = itertools.count(first_transition)
        # Protocol version each announced transition switches to (ops 21 and 30), by id.
        self.versions: dict[int, int] = {}
        # Transitions announced to the bot that it has not confirmed with op 23 yet.
        self._pending: set[int] = set()
        self._welcome_transition: int | None = None
        self.bot_joined = False

    def regroup(self, member_ids: list[int]) -> DavePeer:
        """A new group for the same call (op 24 epoch 1, an upgrade): same external sender, fresh
        members, transition ids continuing."""
        return DavePeer(
            channel_id=self.group.channel_id,
            bot_id=self.bot_id,
            recorder_id=self.recorder_id,
            member_ids=member_ids,
            external_sender=self.group.external_sender,
            first_transition=self._next_transition() + 1,
        )

    def prepare_downgrade(self) -> int:
        """op 21 to protocol version 0: returns the transition id the bot must confirm."""
        transition = self._next_transition()
        self._pending.add(transition)
        self.versions[transition] = 0
        return transition

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
        """Admit the bot by its op 26 key package (its old leaf, if any, removed in the same commit);
        returns ``(transition_id, welcome)`` for op 30."""
        if self.group.pending is not None:
            self.group.commit_pending()  # the bot re-joined mid-change: the recorder settles it
        try:
            _, welcome = self.group.admit(key_package)
        except Exception as exc:  # davey raises plain exceptions for malformed MLS input
            raise EmulatorError(f"bad DAVE key package: {exc}", code=ErrorCode.EMULATOR_DAVE_FAILED) from exc
        transition = self._next_transition()
        self._pending.add(transition)
        self._welcome_transition = transition
        self.versions[transition] = 1
        self.bot_joined = False
        return transition, welcome

    def bot_invalidated(self, transition_id: int) -> None:
        """The bot reported (op 31) that it could not process a commit or welcome: it re-initialises
        and sends a new key package, so nothing is pending for it any more."""
        self._pending.discard(transition_id)
        self.bot_joined = False

    def invalid_commit(self) -> CommitTransition:
        """An op 29 whose commit no client can process (the bot must answer op 31)."""
        transition = self._next_transition()
        self._pending.add(transition)
        # A well-framed PublicMessage header for the group, then garbage: davey fails to decode it.
        junk = b"\x00\x01\x00\x01" + bytes([8]) + self.group.group_id + b"\xff" * 24
        return CommitTransition(proposals=b"", transition_id=transition, commit=junk)

    def propose(self, *, add: int | None = None, remove: int | None = None) -> Proposal:
        """Proposals for a fake user joining or leaving, not committed yet (client-commit mode)."""
        return self.group.propose(
            adds=[] if add is None else [add], removes=[] if remove is None else [remove]
        )

    def commit_by_bot(self, payload: bytes) -> CommitTransition:
        """The bot's op 28 (``commit || welcome``) wins: the group follows it.

        Raises:
            EmulatorError: ``EMULATOR_DAVE_FAILED`` when the payload is no usable commit.
        """
        try:
            commit, welcome = split_commit_welcome(payload)
            self.group.accept_commit(commit, welcome)
        except (MlsWireError, ValueError) as exc:
            raise EmulatorError(
                f"unusable commit from the bot: {exc}", code=ErrorCode.EMULATOR_DAVE_FAILED
            ) from exc
        except Exception as exc:  # davey's own
            raise EmulatorError(
                f"the bot's commit does not apply: {exc}", code=ErrorCode.EMULATOR_DAVE_FAILED
            ) from exc
        return self._transition(with_proposals=False)

    def commit_by_recorder(self) -> CommitTransition:
        """No client commit arrived: the recorder commits the pending proposals."""
        self.group.commit_pending()
        return self._transition(with_proposals=False)

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
        if user_id not in self.group.sessions or self.group.leaf_of(user_id) is None:
            return None
        self.group.remove(user_id)
        return self._transition()

    def _transition(self, *, with_proposals: bool = True) -> CommitTransition:
        proposals, commit = self.group.last_proposals, self.group.last_commit
        if proposals is None or commit is None:
            raise EmulatorError("the DAVE group produced no commit", code=ErrorCode.EMULATOR_DAVE_FAILED)
        transition = self._next_transition()
        self._pending.add(transition)
        return CommitTransition(
            proposals=proposals if with_proposals else b"", transition_id=transition, commit=commit
        )

    def encrypt(self, user_id: int, opus: bytes) -> bytes:
        """A fake user's frame, end-to-end encrypted (silence passes through, as davey does)."""
        if opus == OPUS_SILENCE:
            return opus
        session = self.group.sessions.get(user_id)
        if session is None:
            raise EmulatorError(
                f"user {user_id} is not in the DAVE group", code=ErrorCode.EMULATOR_DAVE_FAILED
            )
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
            raise EmulatorError(f"DAVE decrypt failed: {exc}", code=ErrorCode.EMULATOR_DAVE_FAILED) from exc
