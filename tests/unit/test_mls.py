"""The MLS external sender and the in-process DAVE group, checked against davey itself."""

from __future__ import annotations

import struct

import davey
import pytest

from openab_voice.errors import MlsWireError
from openab_voice.testing.emulator.mls import DaveGroup, ExternalSender, vl
from openab_voice.testing.emulator.mls_wire import (
    key_package_user_id,
    public_message_length,
    split_commit_welcome,
)

OPUS_FRAME = b"\xfc" + bytes(range(60))
CHANNEL = 1_234_567_890


def test_vl_uses_rfc9420_varint_lengths() -> None:
    assert vl(b"") == b"\x00"
    assert vl(b"a" * 63)[:1] == b"\x3f"
    assert vl(b"a" * 64)[:2] == b"\x40\x40"
    assert vl(b"a" * 16383)[:2] == b"\x7f\xff"
    assert vl(b"a" * 16384)[:4] == b"\x80\x00\x40\x00"


def test_external_sender_serialization_layout() -> None:
    sender = ExternalSender(identity=b"\x01\x02")
    data = sender.serialized()
    assert data[:2] == b"\x40\x41"  # 65 needs the two-byte varint form
    assert data[2:67] == sender.public_key and data[2] == 0x04  # uncompressed SEC1 point
    assert data[67:] == struct.pack(">H", 1) + b"\x02\x01\x02"


def test_remove_proposal_payload_shape() -> None:
    payload = ExternalSender().remove_proposals(b"\x00" * 8, 3, [7])
    assert payload[0] == 0  # append
    # MLSMessage header: mls10, public_message; then group id, epoch, external sender 0.
    body = payload[3:]  # the vl length takes two bytes (the message is over 63 bytes)
    assert payload[1] & 0xC0 == 0x40
    assert body[:4] == b"\x00\x01\x00\x01"
    assert body[4:13] == b"\x08" + b"\x00" * 8
    assert struct.unpack(">QBI", body[13:26]) == (3, 2, 0)
    assert body[26:30] == b"\x00\x02\x00\x03"  # empty authenticated data, proposal, remove
    assert struct.unpack(">I", body[30:34]) == (7,)


def test_three_member_group_shares_keys_and_privacy_code() -> None:
    group = DaveGroup(CHANNEL, [11, 22, 33])
    assert set(group.sessions) == {11, 22, 33}
    assert all(s.ready for s in group.sessions.values())
    assert group.epoch == 1
    codes = {s.voice_privacy_code for s in group.sessions.values()}
    assert codes == {group.privacy_code} and group.privacy_code

    encrypted = group.sessions[11].encrypt_opus(OPUS_FRAME)
    assert encrypted != OPUS_FRAME
    assert group.sessions[22].decrypt(11, davey.MediaType.audio, encrypted) == OPUS_FRAME
    assert group.sessions[33].decrypt(11, davey.MediaType.audio, encrypted) == OPUS_FRAME


def test_joiner_admitted_by_key_package_decrypts() -> None:
    group = DaveGroup(CHANNEL, [11, 22, 33])
    bot = davey.DaveSession(1, 99, CHANNEL)
    bot.set_external_sender(group.external_sender.serialized())

    transition_id, welcome = group.admit(bot.get_serialized_key_package())
    bot.process_welcome(welcome)

    assert transition_id == 1
    assert bot.ready and group.epoch == 2
    assert bot.voice_privacy_code == group.privacy_code
    assert all(s.voice_privacy_code == group.privacy_code for s in group.sessions.values())
    encrypted = group.sessions[22].encrypt_opus(OPUS_FRAME)
    assert bot.decrypt(22, davey.MediaType.audio, encrypted) == OPUS_FRAME
    own = bot.encrypt_opus(OPUS_FRAME)
    assert group.sessions[33].decrypt(99, davey.MediaType.audio, own) == OPUS_FRAME


def test_remove_committer_hands_over_and_external_member_follows() -> None:
    group = DaveGroup(CHANNEL, [1, 2, 3])
    bot = davey.DaveSession(1, 99, CHANNEL)
    bot.set_external_sender(group.external_sender.serialized())
    _, welcome = group.admit(bot.get_serialized_key_package())
    bot.process_welcome(welcome)

    group.remove(1)
    assert group.last_proposals is not None and group.last_commit is not None
    bot.process_proposals(davey.ProposalsOperationType.append, group.last_proposals[1:])
    bot.process_commit(group.last_commit)

    assert sorted(group.sessions) == [2, 3]
    assert bot.epoch == group.epoch == 3
    assert sorted(bot.get_user_ids()) == ["2", "3", "99"]
    encrypted = group.sessions[3].encrypt_opus(OPUS_FRAME)
    assert bot.decrypt(3, davey.MediaType.audio, encrypted) == OPUS_FRAME


def test_join_adds_a_held_member() -> None:
    group = DaveGroup(CHANNEL, [5])
    assert group.privacy_code is None  # a group of one stays pending in davey
    joined = group.join(6)
    assert joined.ready and group.sessions[5].ready
    assert joined.voice_privacy_code == group.privacy_code
    assert joined.decrypt(5, davey.MediaType.audio, group.sessions[5].encrypt_opus(OPUS_FRAME)) == OPUS_FRAME


def test_group_rejects_bad_member_lists() -> None:
    with pytest.raises(ValueError):
        DaveGroup(CHANNEL, [])
    with pytest.raises(ValueError):
        DaveGroup(CHANNEL, [1, 1])


# --- membership the voice server keeps: one leaf per user, foreign commits, the wire reader -----------


def _external(group: DaveGroup, user_id: int) -> davey.DaveSession:
    session = davey.DaveSession(1, user_id, CHANNEL)
    session.set_external_sender(group.external_sender.serialized())
    return session


def test_a_second_key_package_replaces_the_old_leaf() -> None:
    group = DaveGroup(CHANNEL, [1, 2])
    bot = _external(group, 99)
    bot.process_welcome(group.admit(bot.get_serialized_key_package())[1])
    assert group.members == [1, 2, 99] and group.leaf_of(99) == 2
    # The bot re-initialises (after an op 31, say) and joins again with a fresh key package.
    bot.reinit(1, 99, CHANNEL)
    _, welcome = group.admit(bot.get_serialized_key_package())
    bot.process_welcome(welcome)
    assert group.members == [1, 2, 99]  # the old leaf was removed in the same commit
    assert sorted(bot.get_user_ids()) == ["1", "2", "99"]
    assert sorted(group.sessions[2].get_user_ids()) == ["1", "2", "99"]
    assert bot.voice_privacy_code == group.privacy_code
    frame = group.sessions[2].encrypt_opus(OPUS_FRAME)
    assert bot.decrypt(2, davey.MediaType.audio, frame) == OPUS_FRAME


def test_leaf_model_follows_removes_and_refills() -> None:
    group = DaveGroup(CHANNEL, [1, 2, 3, 4])
    group.remove(2)
    assert group.members == [1, 3, 4] and group.leaf_of(3) == 2
    group.join(5)  # the leftmost blank leaf: 2's old one
    assert group.leaf_of(5) == 1
    group.remove(4)  # the rightmost: the tree is truncated
    group.join(6)
    assert group.leaf_of(6) == 3
    for uid, session in group.sessions.items():
        assert session.own_leaf_index == group.leaf_of(uid)


def test_a_members_commit_can_win() -> None:
    """The bot commits the proposals (op 28); the group follows that commit and the in-process joiner
    takes the bot's Welcome."""
    group = DaveGroup(CHANNEL, [1, 2])
    bot = _external(group, 99)
    bot.process_welcome(group.admit(bot.get_serialized_key_package())[1])
    pending = group.propose(adds=[3])
    result = bot.process_proposals(davey.ProposalsOperationType.append, pending.op27[1:])
    assert result is not None and result.welcome is not None
    commit, welcome = split_commit_welcome(bytes(result.commit) + bytes(result.welcome))
    assert commit == bytes(result.commit) and welcome == bytes(result.welcome)
    group.accept_commit(commit, welcome)
    bot.process_commit(commit)  # its own: merges the pending commit
    assert group.members == [1, 2, 99, 3]
    codes = {s.voice_privacy_code for s in group.sessions.values()} | {bot.voice_privacy_code}
    assert codes == {group.privacy_code}
    assert bot.decrypt(3, davey.MediaType.audio, group.sessions[3].encrypt_opus(OPUS_FRAME)) == OPUS_FRAME


def test_wire_reader_finds_identities_and_commit_ends() -> None:
    group = DaveGroup(CHANNEL, [1])
    kp = _external(group, 2**63 + 5).get_serialized_key_package()
    assert key_package_user_id(kp) == 2**63 + 5
    group.join(2)
    assert group.last_commit is not None
    assert public_message_length(group.last_commit + b"tail") == len(group.last_commit)
    assert split_commit_welcome(group.last_commit) == (group.last_commit, None)
    for bad in (b"", kp[:20], b"\x00\x01\x00\x02" + bytes(10)):
        with pytest.raises(MlsWireError):
            split_commit_welcome(bad)
    with pytest.raises(MlsWireError):
        key_package_user_id(kp[:40])  # cut inside the leaf node
