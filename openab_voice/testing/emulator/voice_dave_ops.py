"""The voice gateway's DAVE opcodes on one session: the bot's transition ready (op 23, answered
by execute, op 22), a downgrade (op 21) or a new epoch (op 24) the emulator starts, the bot's
invalid commit or welcome (op 31) and its binary MLS messages (key package op 26, answered by
welcome op 30; commit op 28).

Op 31 is accepted as JSON ``{"transition_id": n}``, as discord.py and discord.js send it, and as
binary ``u8 31 || >H transition_id``; the connection stays up and the client's next key package
replaces its old leaf.
"""

from __future__ import annotations

import logging
import struct

from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator.voice_connection import (
    CLOSE_DECODE_ERROR,
    CLOSE_NOT_AUTHENTICATED,
    OP_DAVE_EXECUTE,
    OP_DAVE_PREPARE_EPOCH,
    OP_DAVE_PREPARE_TRANSITION,
    OP_MLS_COMMIT_WELCOME,
    OP_MLS_INVALID,
    OP_MLS_KEY_PACKAGE,
    OP_MLS_WELCOME,
    VoiceConnection,
)

log = logging.getLogger(__name__)


async def transition_ready(conn: VoiceConnection, transition: int) -> bool:
    """op 23: execute the transition (op 22); True when the bot is now in the group (synced)."""
    if conn.dave is None or not conn.dave.transition_ready(transition):
        return False  # unknown or repeated ids are ignored, as a server would
    await conn.send_json(OP_DAVE_EXECUTE, {"transition_id": transition})
    conn.dave_version = conn.dave.versions.pop(transition, conn.dave_version)
    conn.mark_executed(transition)
    if not conn.dave.bot_joined:
        return False
    conn.dave_synced.set()
    if not conn.ready.is_set():
        conn.ready.set()
    return True


async def downgrade(conn: VoiceConnection) -> int:
    """op 21 ``{protocol_version: 0}``; returns the transition id (executed on the bot's op 23)."""
    assert conn.dave is not None
    transition = conn.dave.prepare_downgrade()
    await conn.send_json(OP_DAVE_PREPARE_TRANSITION, {"protocol_version": 0, "transition_id": transition})
    return transition


async def upgrade(conn: VoiceConnection, member_ids: list[int]) -> None:
    """op 24 ``{protocol_version: 1, epoch: 1}``: a new group of ``member_ids``; the bot answers with
    a key package and is welcomed into it (op 30, then ops 23/22 switch it to version 1)."""
    assert conn.dave is not None
    conn.dave = conn.dave.regroup(member_ids)
    conn.dave_synced.clear()
    await conn.send_json(OP_DAVE_PREPARE_EPOCH, {"protocol_version": 1, "epoch": 1})


def invalid_commit(conn: VoiceConnection, transition_id: int, reports: list[int]) -> None:
    """op 31: the bot could not process a commit or welcome. It re-initialises and sends a new
    key package (discord.py ``_recover_from_invalid_commit``, @discordjs/voice
    ``recoverFromInvalidTransition``); the connection stays up. ``reports`` gets the id."""
    log.info("the bot rejected DAVE transition %s (op 31)", transition_id)
    reports.append(transition_id)
    if conn.dave is None:
        return
    conn.dave.bot_invalidated(transition_id)
    conn.dave_synced.clear()
    conn.mark_executed(transition_id)  # nobody waits for this transition any longer


async def on_binary(conn: VoiceConnection, data: bytes, reports: list[int]) -> tuple[int, str] | None:
    """A binary frame from the bot (``u8 opcode || payload``); returns the close it calls for."""
    if not data:
        return CLOSE_DECODE_ERROR, "Failed to decode payload."
    if conn.credentials is None:
        return CLOSE_NOT_AUTHENTICATED, "Not authenticated."
    op, payload = data[0], data[1:]
    if conn.dave is None:
        return None  # DAVE is off for this call: binary ops mean nothing
    if op == OP_MLS_KEY_PACKAGE:
        conn.dave_synced.clear()
        try:
            transition, welcome = conn.dave.welcome_bot(payload)
        except EmulatorError:
            log.warning("the bot sent an unusable DAVE key package", exc_info=True)
            return None
        await conn.send_binary(OP_MLS_WELCOME, struct.pack(">H", transition) + welcome)
    elif op == OP_MLS_INVALID:
        if len(payload) < 2:
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
        invalid_commit(conn, struct.unpack_from(">H", payload)[0], reports)
    elif op == OP_MLS_COMMIT_WELCOME:
        # Wins only when proposals wait for a client commit (client_commits); else the
        # recorder already committed and this one lost the race, as on Discord.
        conn.deliver_commit(payload)
    return None
