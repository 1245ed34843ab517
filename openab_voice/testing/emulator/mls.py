"""The MLS *external sender* that Discord's voice server plays in DAVE, and an in-process DAVE group.

davey implements the client side of DAVE (key packages, commits, welcomes, frame encryption) but
not the server side: signing the external Add/Remove proposals that the voice gateway sends as
binary op 27. :class:`ExternalSender` does that with a P-256 ECDSA key from ``cryptography``;
:class:`DaveGroup` composes it with ``davey.DaveSession``\\ s into an established E2EE call that
tests, benchmarks and the loopback emulator can encrypt and decrypt with.

Wire formats (RFC 9420; DAVE whitepaper ops 25 and 27; see
``shared/notes/discord-voice-protocol.md`` §3):

* ExternalSender (op 25 payload) = ``vl(public_key) || u16 1 (basic) || vl(identity)``.
* Proposal MLSMessage = ``u16 1 (mls10) || u16 1 (public_message) || FramedContent ||
  vl(signature)``; external senders carry neither a GroupContext in the signed content nor a
  membership tag (RFC 9420 §6.1, §6.2).
* FramedContent = ``vl(group_id) || u64 epoch || u8 2 (external) || u32 sender_index ||
  vl(authenticated_data) || u8 2 (proposal) || Proposal``.
* op 27 payload after the opcode = ``u8 0 (append) || vl(concat(MLSMessages))``.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import davey
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from openab_voice.testing.emulator.mls_wire import key_package_user_id

__all__ = ["DaveGroup", "ExternalSender", "Proposal", "vl"]

_MLS10 = 1
_WIRE_PUBLIC_MESSAGE = 1
_SENDER_EXTERNAL = 2
_CONTENT_PROPOSAL = 2
_PROPOSAL_ADD = 1
_PROPOSAL_REMOVE = 3
_CREDENTIAL_BASIC = 1
_OP27_APPEND = 0
_TBS_LABEL = b"MLS 1.0 FramedContentTBS"
_DAVE_PROTOCOL_VERSION = 1


def vl(data: bytes) -> bytes:
    """Prefix ``data`` with its MLS variable-size length (RFC 9420 §2.1.2).

    The two top bits of the first byte give the length of the length field: ``00`` one byte
    (up to 63), ``01`` two bytes (up to 16383), ``10`` four bytes (up to 2**30 - 1).

    Raises:
        ValueError: if ``data`` is 2**30 bytes or longer.
    """
    n = len(data)
    if n < 1 << 6:
        return bytes([n]) + data
    if n < 1 << 14:
        return struct.pack(">H", 0x4000 | n) + data
    if n < 1 << 30:
        return struct.pack(">I", 0x8000_0000 | n) + data
    raise ValueError("vector too long for an MLS varint length")


class ExternalSender:
    """The voice server's MLS identity: signs external Add and Remove proposals.

    Args:
        identity: the basic-credential identity announced in op 25. Discord's value is opaque to
            clients (davey only checks that the Welcome's group carries the same external sender
            that was set), so any stable bytes do.
        sender_index: index of this sender in the group's ``external_senders`` extension; DAVE
            groups have exactly one.
    """

    def __init__(self, identity: bytes = b"\x00" * 8, *, sender_index: int = 0) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._public = self._key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        self._identity = identity
        self._sender_index = sender_index

    @property
    def public_key(self) -> bytes:
        """The 65-byte uncompressed P-256 point (SEC1)."""
        return self._public

    def serialized(self) -> bytes:
        """The op 25 payload: an MLS ``ExternalSender`` struct."""
        return vl(self._public) + struct.pack(">H", _CREDENTIAL_BASIC) + vl(self._identity)

    def add_proposals(self, group_id: bytes, epoch: int, key_packages: list[bytes]) -> bytes:
        """The op 27 payload (after the opcode byte) proposing to add each raw KeyPackage."""
        proposals = (struct.pack(">H", _PROPOSAL_ADD) + kp for kp in key_packages)
        return self._op27(group_id, epoch, proposals)

    def remove_proposals(self, group_id: bytes, epoch: int, leaf_indices: Iterable[int]) -> bytes:
        """The op 27 payload (after the opcode byte) proposing to remove each leaf."""
        proposals = (struct.pack(">HI", _PROPOSAL_REMOVE, leaf) for leaf in leaf_indices)
        return self._op27(group_id, epoch, proposals)

    def proposals(
        self, group_id: bytes, epoch: int, *, removes: Iterable[int] = (), adds: Iterable[bytes] = ()
    ) -> bytes:
        """One op 27 payload removing leaves and adding KeyPackages (removes first, as RFC 9420
        §12.3 applies them)."""
        items = [struct.pack(">HI", _PROPOSAL_REMOVE, leaf) for leaf in removes]
        items += [struct.pack(">H", _PROPOSAL_ADD) + kp for kp in adds]
        return self._op27(group_id, epoch, items)

    def _op27(self, group_id: bytes, epoch: int, proposals: Iterable[bytes]) -> bytes:
        messages = b"".join(self._public_message(group_id, epoch, p) for p in proposals)
        return bytes([_OP27_APPEND]) + vl(messages)

    def _public_message(self, group_id: bytes, epoch: int, proposal: bytes) -> bytes:
        content = (
            vl(group_id)
            + struct.pack(">QBI", epoch, _SENDER_EXTERNAL, self._sender_index)
            + vl(b"")  # authenticated_data
            + bytes([_CONTENT_PROPOSAL])
            + proposal
        )
        prefix = struct.pack(">HH", _MLS10, _WIRE_PUBLIC_MESSAGE)
        # SignWithLabel (RFC 9420 §5.1.2) over FramedContentTBS; an external sender's TBS has no
        # GroupContext (§6.1), and cryptography's ECDSA output is already the DER form MLS wants.
        tbs = vl(_TBS_LABEL) + vl(prefix + content)
        signature = self._key.sign(tbs, ec.ECDSA(hashes.SHA256()))
        return prefix + content + vl(signature)


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """Membership changes proposed to the group (op 27) and not committed yet.

    Attributes:
        op27: the op 27 payload after the opcode (``u8 operation || vl(messages)``).
        adds: user ids added, in proposal order.
        removes: user ids removed.
        joiners: the in-process sessions of added users that wait for the Welcome.
    """

    op27: bytes
    adds: tuple[int, ...]
    removes: tuple[int, ...]
    joiners: tuple[int, ...]


class DaveGroup:
    """An established DAVE call held in-process: one ``davey.DaveSession`` per member.

    The first member commits the external proposals for the others, exactly as a client already in
    a Discord call does when the voice server sends op 27; every session ends ``ready`` in the same
    epoch with the same voice privacy code. Members whose sessions live elsewhere (the bot) are
    admitted by KeyPackage; a second KeyPackage from the same user replaces its old leaf in the
    same commit, so the group never holds one user twice.

    The group keeps a model of its ratchet tree's leaves (RFC 9420 §12.1.1: an Add takes the
    leftmost blank leaf, else extends the tree; removes are applied before adds and trailing blank
    leaves are truncated), which is how Remove proposals name members held elsewhere.

    Args:
        channel_id: the voice channel id; DAVE uses it (8 bytes big-endian) as the MLS group id.
        member_ids: user ids of the members, at least one. The first is the committer.
        external_sender: the voice server's signing identity; a group re-created in the same call
            (an upgrade after a downgrade) keeps it, as clients keep the one op 25 gave them.

    Raises:
        ValueError: if ``member_ids`` is empty or has duplicates.
    """

    def __init__(
        self, channel_id: int, member_ids: list[int], *, external_sender: ExternalSender | None = None
    ) -> None:
        if not member_ids:
            raise ValueError("a DAVE group needs at least one member")
        if len(set(member_ids)) != len(member_ids):
            raise ValueError("duplicate member ids")
        self.channel_id = channel_id
        self.group_id = channel_id.to_bytes(8, "big")
        self.external_sender = external_sender or ExternalSender()
        self._transition_ids = itertools.count(1)
        # The latest op 27 payload and its winning commit (op 29 body), for an emulator to forward
        # to members whose sessions live elsewhere (e.g. the bot after :meth:`admit`).
        self.last_proposals: bytes | None = None
        self.last_commit: bytes | None = None
        self.sessions: dict[int, davey.DaveSession] = {}
        self._leaves: list[int | None] = [member_ids[0]]  # the committer's pending group: leaf 0
        self._pending: Proposal | None = None
        self._committer_id = member_ids[0]
        self.sessions[self._committer_id] = self._new_session(self._committer_id)
        if len(member_ids) > 1:
            welcome = self._commit(self.propose(adds=member_ids[1:]))
            if welcome is None:
                raise RuntimeError("the committer produced no welcome for the other members")

    def _new_session(self, user_id: int) -> davey.DaveSession:
        session = davey.DaveSession(_DAVE_PROTOCOL_VERSION, user_id, self.channel_id)
        session.set_external_sender(self.external_sender.serialized())
        return session

    @property
    def committer(self) -> davey.DaveSession:
        """The member that commits proposals on behalf of the group."""
        return self.sessions[self._committer_id]

    @property
    def epoch(self) -> int:
        """The group's current MLS epoch."""
        return int(self.committer.epoch or 0)

    @property
    def privacy_code(self) -> str | None:
        """The voice privacy code every member displays; ``None`` while a sole member waits for a
        second one (an MLS group of one has nothing to commit, so it stays pending in davey)."""
        code: str | None = self.committer.voice_privacy_code
        return code

    @property
    def members(self) -> list[int]:
        """User ids by leaf, blank leaves skipped (what ``get_user_ids()`` reports)."""
        return [uid for uid in self._leaves if uid is not None]

    def leaf_of(self, user_id: int) -> int | None:
        """The leaf index of ``user_id``, or None when it is not a member."""
        return self._leaves.index(user_id) if user_id in self._leaves else None

    @property
    def pending(self) -> Proposal | None:
        """Proposals sent out and not committed yet."""
        return self._pending

    def admit(self, key_package: bytes) -> tuple[int, bytes]:
        """Add one joiner (e.g. the bot) by its raw KeyPackage (op 26), replacing its old leaf.

        Existing members process the commit; the joiner must process the returned Welcome itself.

        Returns:
            ``(transition_id, raw_welcome)`` for binary op 30 (``>H transition_id || welcome``).

        Raises:
            RuntimeError: if davey produced no Welcome for the proposal.
            MlsWireError: if the KeyPackage is malformed.
        """
        welcome = self._commit(self.propose(adds=[key_package]))
        if welcome is None:
            raise RuntimeError("the committer produced no welcome for the joiner")
        return next(self._transition_ids), welcome

    def join(self, user_id: int) -> davey.DaveSession:
        """Create a session for ``user_id``, admit it and keep it in :attr:`sessions`."""
        if user_id in self.sessions:
            raise ValueError(f"user {user_id} is already a member")
        self._commit(self.propose(adds=[user_id]))
        return self.sessions[user_id]

    def remove(self, user_id: int) -> int:
        """Remove a member (voice gateway op 13 on Discord's side), in-process or held elsewhere.

        Returns:
            The transition id of the removal commit.

        Raises:
            KeyError: if ``user_id`` is not a member.
            ValueError: if it is the last in-process member.
        """
        if self.leaf_of(user_id) is None:
            raise KeyError(user_id)
        if user_id in self.sessions and len(self.sessions) == 1:
            raise ValueError("cannot remove the last member")
        self._commit(self.propose(removes=[user_id]))
        return next(self._transition_ids)

    def next_transition_id(self) -> int:
        return next(self._transition_ids)

    def propose(self, *, adds: Iterable[int | bytes] = (), removes: Iterable[int] = ()) -> Proposal:
        """Sign external proposals: each add is a user id (a new in-process session) or a raw
        KeyPackage (a member held elsewhere, whose old leaf is removed first).

        Raises:
            ValueError: if a proposal names no member or one already pending.
            MlsWireError: if a KeyPackage is malformed.
        """
        if self._pending is not None:
            raise ValueError("proposals are already pending")
        key_packages: list[bytes] = []
        add_ids: list[int] = []
        joiners: list[int] = []
        remove_ids = list(removes)
        for add in adds:
            if isinstance(add, bytes):
                uid = key_package_user_id(add)
                key_packages.append(add)
                if self.leaf_of(uid) is not None and uid not in remove_ids:
                    remove_ids.append(uid)  # a re-join: the old leaf goes in the same commit
            else:
                uid = add
                self.sessions[uid] = self._new_session(uid)
                key_packages.append(self.sessions[uid].get_serialized_key_package())
                joiners.append(uid)
            add_ids.append(uid)
        leaves = []
        for uid in remove_ids:
            leaf = self.leaf_of(uid)
            if leaf is None:
                raise ValueError(f"user {uid} is not a member")
            leaves.append(leaf)
            if uid in self.sessions and uid not in add_ids:
                del self.sessions[uid]
                if uid == self._committer_id:
                    self._committer_id = next(u for u, s in self.sessions.items() if s.ready)
        op27 = self.external_sender.proposals(self.group_id, self.epoch, removes=leaves, adds=key_packages)
        self._pending = Proposal(
            op27=op27, adds=tuple(add_ids), removes=tuple(remove_ids), joiners=tuple(joiners)
        )
        return self._pending

    def commit_pending(self) -> bytes | None:
        """The committer commits the pending proposals; returns the Welcome (None without adds)."""
        if self._pending is None:
            raise ValueError("no pending proposals")
        return self._commit(self._pending)

    def accept_commit(self, commit: bytes, welcome: bytes | None) -> None:
        """Another member's commit of the pending proposals won (op 28 from the bot): every
        in-process member follows it and in-process joiners take its Welcome.

        Raises:
            ValueError: without pending proposals, or when adds come without a Welcome.
            Exception: davey's own, when the commit does not apply.
        """
        pending = self._pending
        if pending is None:
            raise ValueError("no pending proposals")
        if pending.joiners and welcome is None:
            raise ValueError("the commit adds in-process members but carries no Welcome")
        proposals = pending.op27[1:]
        append = davey.ProposalsOperationType.append
        for uid, session in self.sessions.items():
            if uid not in pending.joiners and session.status != davey.SessionStatus.pending:
                session.process_proposals(append, proposals)
        for uid, session in self.sessions.items():
            if uid not in pending.joiners and session.status != davey.SessionStatus.pending:
                session.process_commit(commit)
        if welcome is not None:
            for uid in pending.joiners:
                self.sessions[uid].process_welcome(welcome)
        self._settle(pending, commit)

    def _commit(self, pending: Proposal) -> bytes | None:
        """Have the committer commit the proposals and every ready member follow (op 29)."""
        proposals = pending.op27[1:]  # davey takes the operation type separately
        append = davey.ProposalsOperationType.append
        result = self.committer.process_proposals(append, proposals)
        if result is None:
            raise RuntimeError("the committer did not commit the external proposals")
        for uid, session in self.sessions.items():
            if uid != self._committer_id and uid not in pending.joiners and session.ready:
                # The voice server sends op 27 to every member; each stores the proposals (and
                # drafts a commit of its own, discarded here as the server picks the first one to
                # arrive), else the winning commit fails with MissingProposal.
                session.process_proposals(append, proposals)
        for uid, session in self.sessions.items():
            # process_commit on the committer merges its own pending commit (davey session.rs).
            if uid == self._committer_id or (uid not in pending.joiners and session.ready):
                session.process_commit(result.commit)
        welcome: bytes | None = result.welcome
        if pending.joiners and welcome is None:
            raise RuntimeError("the committer produced no welcome for the joiners")
        for uid in pending.joiners:
            assert welcome is not None
            self.sessions[uid].process_welcome(welcome)
        self._settle(pending, bytes(result.commit))
        return welcome

    def _settle(self, pending: Proposal, commit: bytes) -> None:
        for uid in pending.removes:
            self._leaves[self._leaves.index(uid)] = None
        while self._leaves and self._leaves[-1] is None:
            self._leaves.pop()
        for uid in pending.adds:
            if None in self._leaves:
                self._leaves[self._leaves.index(None)] = uid
            else:
                self._leaves.append(uid)
        for uid, session in self.sessions.items():
            own = session.own_leaf_index
            if session.ready and own is not None and self._leaves[own] != uid:
                raise RuntimeError(f"leaf model out of step with davey for user {uid}")
        self.last_proposals = pending.op27
        self.last_commit = commit
        self._pending = None
