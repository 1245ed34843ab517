"""One bot voice connection: its websocket, negotiated media state, v8 sequence and DAVE peer.

Every server message carries the v8 ``seq`` (JSON ``"seq"``, binary ``>H`` prefix) from one counter
per connection; discord.py echoes the last one as ``seq_ack``. Binary frames from the server are
``>H seq || u8 opcode || payload`` (notes §3).
"""

from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass

from aiohttp import web

from openab_voice.discord.transport import TransportCipher
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator.dave_peer import CommitTransition, DavePeer
from openab_voice.testing.emulator.voice_udp import Address
from openab_voice.testing.emulator.waiting import wait_any
from openab_voice.testing.emulator.wire import JsonObject

OP_IDENTIFY, OP_SELECT_PROTOCOL, OP_READY, OP_HEARTBEAT = 0, 1, 2, 3
OP_SESSION_DESCRIPTION, OP_SPEAKING, OP_HEARTBEAT_ACK, OP_RESUME, OP_HELLO = 4, 5, 6, 7, 8
OP_CLIENTS_CONNECT, OP_CLIENT_CONNECT, OP_CLIENT_DISCONNECT = 11, 12, 13
OP_DAVE_EXECUTE, OP_DAVE_READY = 22, 23
OP_MLS_EXTERNAL_SENDER, OP_MLS_KEY_PACKAGE, OP_MLS_PROPOSALS = 25, 26, 27
OP_MLS_COMMIT_WELCOME, OP_MLS_ANNOUNCE_COMMIT, OP_MLS_WELCOME, OP_MLS_INVALID = 28, 29, 30, 31
# Voice close codes (Discord "Voice Close Event Codes").
CLOSE_UNKNOWN_ERROR, CLOSE_UNKNOWN_OPCODE, CLOSE_DECODE_ERROR, CLOSE_NOT_AUTHENTICATED = (
    4000,
    4001,
    4002,
    4003,
)
CLOSE_AUTH_FAILED, CLOSE_ALREADY_AUTHENTICATED, CLOSE_SESSION_INVALID = 4004, 4005, 4006
CLOSE_UNKNOWN_PROTOCOL, CLOSE_UNKNOWN_MODE = 4012, 4016
HEARTBEAT_INTERVAL_MS = 13750.0


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceSessionInfo:
    """A bot voice connection that is ready for media.

    Attributes:
        dave_enabled: SESSION_DESCRIPTION said ``dave_protocol_version`` 1.
        privacy_code: the DAVE group's voice privacy code (``None`` with DAVE off).
        mode: the negotiated transport mode.
        bot_ssrc: the SSRC assigned to the bot in READY.
        session_id: the voice session id the bot identified with.
        secret_key: the transport key (test material; never a real secret).
    """

    dave_enabled: bool
    privacy_code: str | None
    mode: str
    bot_ssrc: int
    session_id: str
    secret_key: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceCredentials:
    """What VOICE_STATE_UPDATE / VOICE_SERVER_UPDATE promised the bot."""

    user_id: int
    session_id: str
    token: str


class VoiceConnection:
    """One voice websocket of the bot, and the media state it negotiated."""

    def __init__(self, ws: web.WebSocketResponse, *, ssrc: int) -> None:
        self.ws = ws
        self.ssrc = ssrc
        self.credentials: VoiceCredentials | None = None
        self.max_dave_version = 0
        self.mode: str | None = None
        self.secret_key: bytes | None = None
        self.cipher: TransportCipher | None = None
        self.dave: DavePeer | None = None
        self.bot_addr: Address | None = None
        self.bot_speaking = 0
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self._seq = 0
        self._nonce = 0
        self._lock = asyncio.Lock()
        self._executed: dict[int, asyncio.Event] = {}
        self._members: dict[int, asyncio.Event] = {}

    @property
    def media_ready(self) -> bool:
        """Key known and bot address known: fake speakers may send."""
        return self.cipher is not None and self.bot_addr is not None and not self.closed.is_set()

    def info(self) -> VoiceSessionInfo:
        if self.mode is None or self.secret_key is None or self.credentials is None:
            raise EmulatorError("voice session not negotiated yet", code="EMULATOR_NOT_CONNECTED")
        return VoiceSessionInfo(
            dave_enabled=self.dave is not None,
            privacy_code=None if self.dave is None else self.dave.privacy_code,
            mode=self.mode,
            bot_ssrc=self.ssrc,
            session_id=self.credentials.session_id,
            secret_key=self.secret_key,
        )

    def next_nonce(self) -> int:
        """The transport nonce counter, shared by every stream to this bot (a nonce must never repeat
        under one key, so speakers cannot count on their own)."""
        nonce = self._nonce
        self._nonce = (self._nonce + 1) & 0xFFFFFFFF
        return nonce

    async def send_json(self, op: int, d: object, *, numbered: bool = True) -> None:
        async with self._lock:
            frame: JsonObject = {"op": op, "d": d}
            if numbered:
                self._seq = (self._seq + 1) & 0xFFFF
                frame["seq"] = self._seq
            await self._send(json.dumps(frame))

    async def send_binary(self, op: int, payload: bytes) -> None:
        async with self._lock:
            self._seq = (self._seq + 1) & 0xFFFF
            await self._send(struct.pack(">HB", self._seq, op) + payload)

    async def _send(self, data: str | bytes) -> None:
        if self.ws.closed:
            return
        try:
            if isinstance(data, str):
                await self.ws.send_str(data)
            else:
                await self.ws.send_bytes(data)
        except (ConnectionError, RuntimeError):  # the bot hung up mid-send
            self.closed.set()

    async def follow_commit(self, transition: CommitTransition) -> None:
        """Forward a membership change (op 27 then op 29) and wait until it executed (op 22) or the
        connection ended; callers bound the wait."""
        executed = self._executed.setdefault(transition.transition_id, asyncio.Event())
        await self.send_binary(OP_MLS_PROPOSALS, transition.proposals)
        await self.send_binary(
            OP_MLS_ANNOUNCE_COMMIT, struct.pack(">H", transition.transition_id) + transition.commit
        )
        await wait_any(executed, self.closed)

    def member_event(self, user_id: int) -> asyncio.Event:
        """Set once ``user_id``'s frames are decryptable by the bot (always, with DAVE off)."""
        return self._members.setdefault(user_id, asyncio.Event())

    def forget_member(self, user_id: int) -> None:
        self._members.pop(user_id, None)

    def mark_executed(self, transition_id: int) -> None:
        self._executed.setdefault(transition_id, asyncio.Event()).set()
