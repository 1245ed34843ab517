"""The voice gateway (``wss://127.0.0.1:<port>/?v=8``): handshake, heartbeats, SPEAKING and DAVE ops.

Client binary frames are ``u8 opcode || payload`` (notes §3). The bot's op order is ``0, 1, 5`` with
DAVE off and ``0, 1, 5, 26, 23`` with DAVE on. The state of each session lives in
:mod:`voice_connection`; a session survives a resumable close of its websocket and is picked up
again by RESUME (op 7) on a new one (``docs/discord-voice-protocol.md``). The sessions themselves
are kept by :mod:`voice_sessions`; DAVE's opcodes are :mod:`voice_dave_ops`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable

from aiohttp import WSMsgType, web

from openab_voice.discord.wire.transport import cipher_for
from openab_voice.errors import WireError
from openab_voice.testing.emulator import voice_dave_ops
from openab_voice.testing.emulator.config import EmulatorConfig
from openab_voice.testing.emulator.dave_peer import DavePeer
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.voice_connection import (
    CLOSE_ALREADY_AUTHENTICATED,
    CLOSE_AUTH_FAILED,
    CLOSE_DECODE_ERROR,
    CLOSE_NOT_AUTHENTICATED,
    CLOSE_SESSION_INVALID,
    CLOSE_UNKNOWN_ERROR,
    CLOSE_UNKNOWN_MODE,
    CLOSE_UNKNOWN_OPCODE,
    CLOSE_UNKNOWN_PROTOCOL,
    HEARTBEAT_INTERVAL_MS,
    OP_CLIENT_CONNECT,
    OP_CLIENTS_CONNECT,
    OP_DAVE_READY,
    OP_HEARTBEAT,
    OP_HEARTBEAT_ACK,
    OP_HELLO,
    OP_IDENTIFY,
    OP_MLS_EXTERNAL_SENDER,
    OP_MLS_INVALID,
    OP_READY,
    OP_RESUME,
    OP_SELECT_PROTOCOL,
    OP_SESSION_DESCRIPTION,
    OP_SPEAKING,
    RESUMABLE_SERVER_CLOSES,
    VoiceConnection,
)
from openab_voice.testing.emulator.voice_sessions import VoiceSessions
from openab_voice.testing.emulator.voice_udp import VoiceUdpServer
from openab_voice.testing.emulator.wire import (
    GatewayFrame,
    InvalidCommitData,
    SelectProtocolData,
    SpeakingData,
    TransitionReadyData,
    VoiceHeartbeatData,
    VoiceIdentifyData,
    VoiceResumeData,
    parse,
)

log = logging.getLogger(__name__)


class _Socket:
    """One voice websocket and the session it serves (replaced by the resumed one on op 7)."""

    def __init__(self, ws: web.WebSocketResponse, conn: VoiceConnection) -> None:
        self.ws = ws
        self.conn = conn


class VoiceGateway(VoiceSessions):
    """Serves voice websockets for the bot; the sessions they carry are :class:`VoiceSessions`.

    Args:
        state: the guild.
        config: the emulator settings (modes offered, DAVE on or off).
        udp: the voice UDP server (its port goes into READY).
        allocate_ssrc: returns a fresh SSRC for each session.
        recorder_id: the hidden DAVE member the emulator listens as.
    """

    def __init__(
        self,
        state: GuildState,
        config: EmulatorConfig,
        udp: VoiceUdpServer,
        *,
        allocate_ssrc: Callable[[], int],
        recorder_id: int,
    ) -> None:
        super().__init__()
        self._state = state
        self._config = config
        self._udp = udp
        self._allocate_ssrc = allocate_ssrc
        self._recorder_id = recorder_id

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """aiohttp handler for the voice websocket."""
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        if isinstance(request.transport, asyncio.Transport):
            self._transports[ws] = request.transport
        sock = _Socket(ws, VoiceConnection(ws))
        await sock.conn.send_json(OP_HELLO, {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}, numbered=False)
        close: tuple[int, str] | None = None
        try:
            async for msg in ws:
                try:
                    if msg.type is WSMsgType.TEXT:
                        close = await self._on_text(sock, msg.data)
                    elif msg.type is WSMsgType.BINARY:
                        close = await voice_dave_ops.on_binary(sock.conn, msg.data, self.invalid_reports)
                except Exception:  # the emulator's own bug: report it, end this session cleanly
                    log.exception("emulator voice gateway failed on a %s frame", msg.type.name)
                    close = CLOSE_UNKNOWN_ERROR, "Unknown error."
                if close is not None:
                    break
        finally:
            await self._socket_ended(sock, close)
        return ws

    async def _socket_ended(self, sock: _Socket, close: tuple[int, str] | None) -> None:
        ws, conn = sock.ws, sock.conn
        self._transports.pop(ws, None)
        forced = self._forced.pop(ws, None)
        if close is not None and not ws.closed:
            await ws.close(code=close[0], message=close[1].encode())
        if conn.ws is ws:  # else a RESUME already moved the session to a newer websocket
            code = forced if forced is not None else (close[0] if close else (ws.close_code or 1006))
            resumable = (
                conn.cipher is not None
                and not conn.closed.is_set()
                and close is None
                and (forced in RESUMABLE_SERVER_CLOSES if forced is not None else code not in (1000, 1001))
                and (forced is not None or code < 4000)
            )
            if conn.credentials is not None:  # a socket that never held a session is no session close
                self.closes.append((code, resumable))
            if resumable:
                conn.detach()
            else:
                self._end(conn)
            if not ws.closed:
                await ws.close(code=1000)
        await self._notify()

    async def _on_text(self, sock: _Socket, text: str) -> tuple[int, str] | None:
        conn = sock.conn
        try:
            frame = parse(GatewayFrame, json.loads(text), what="voice frame")
        except (json.JSONDecodeError, WireError):
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
        op, data = frame["op"], frame["d"]
        try:
            if op == OP_HEARTBEAT:
                beat = parse(VoiceHeartbeatData, data, what="heartbeat")
                conn.client_seq_ack = beat.get("seq_ack", conn.client_seq_ack)
                await conn.send_json(OP_HEARTBEAT_ACK, {"t": beat["t"]}, numbered=False)
            elif op == OP_IDENTIFY:
                return await self._identify(conn, parse(VoiceIdentifyData, data, what="voice identify"))
            elif op == OP_RESUME:
                return await self._resume(sock, parse(VoiceResumeData, data, what="voice resume"))
            elif conn.credentials is None:
                return CLOSE_NOT_AUTHENTICATED, "Not authenticated."
            elif op == OP_SELECT_PROTOCOL:
                return await self._select_protocol(
                    conn, parse(SelectProtocolData, data, what="select protocol")
                )
            elif op == OP_SPEAKING:
                conn.bot_speaking = parse(SpeakingData, data, what="speaking")["speaking"]
            elif op == OP_DAVE_READY:
                await self._transition_ready(conn, parse(TransitionReadyData, data, what="transition ready"))
            elif op == OP_MLS_INVALID:
                transition = parse(InvalidCommitData, data, what="invalid commit")["transition_id"]
                voice_dave_ops.invalid_commit(conn, transition, self.invalid_reports)
            elif op != OP_CLIENT_CONNECT:
                return CLOSE_UNKNOWN_OPCODE, "Unknown opcode."
        except WireError:
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
        return None

    async def _resume(self, sock: _Socket, data: VoiceResumeData) -> tuple[int, str] | None:
        if sock.conn.credentials is not None:
            return CLOSE_ALREADY_AUTHENTICATED, "Already authenticated."
        conn = self.active
        if (
            conn is None
            or conn.closed.is_set()
            or conn.credentials is None
            or conn.cipher is None
            or data["server_id"] != self._state.ids.guild_id
            or data["session_id"] != conn.credentials.session_id
            or data["token"] != conn.credentials.token
        ):
            self.failed_resumes += 1
            return CLOSE_SESSION_INVALID, "Session no longer valid."
        old = conn.ws
        if old is not None and not old.closed:
            # The client saw a drop this side did not: the old socket is dead to it.
            self._forced[old] = CLOSE_SESSION_INVALID
            conn.detach()
            await old.close(code=1000)
        if not await conn.resume(sock.ws, data.get("seq_ack", -1)):
            self.failed_resumes += 1
            self._end(conn)
            return CLOSE_SESSION_INVALID, "Session no longer valid."
        sock.conn = conn
        self.resumes += 1
        await self._notify()
        return None

    async def _identify(self, conn: VoiceConnection, data: VoiceIdentifyData) -> tuple[int, str] | None:
        if conn.credentials is not None:
            return CLOSE_ALREADY_AUTHENTICATED, "Already authenticated."
        expected = self._expected
        if (
            expected is None
            or data["server_id"] != self._state.ids.guild_id
            or data["user_id"] != expected.user_id
            or data["session_id"] != expected.session_id
            or data["token"] != expected.token
        ):
            return CLOSE_AUTH_FAILED, "Authentication failed."
        conn.credentials = expected
        conn.ssrc = self._allocate_ssrc()
        self._connections.add(conn)
        conn.max_dave_version = data.get("max_dave_protocol_version", 0)
        ready = {
            "ssrc": conn.ssrc,
            "ip": "127.0.0.1",
            "port": self._udp.port,
            "modes": list(self._config.modes),
            "heartbeat_interval": 1,
            "experiments": [],
        }
        await conn.send_json(OP_READY, ready)
        return None

    async def _select_protocol(
        self, conn: VoiceConnection, data: SelectProtocolData
    ) -> tuple[int, str] | None:
        if data["protocol"] != "udp":
            return CLOSE_UNKNOWN_PROTOCOL, "Unknown protocol."
        mode = data["data"]["mode"]
        if mode not in self._config.modes:
            return CLOSE_UNKNOWN_MODE, "Unknown encryption mode."
        assert conn.credentials is not None
        # The address IP discovery saw is where packets really come from; SELECT_PROTOCOL echoes it.
        conn.bot_addr = self._udp.discovered.get(conn.ssrc) or (data["data"]["address"], data["data"]["port"])
        conn.mode = mode
        conn.secret_key = os.urandom(32)
        conn.cipher = cipher_for(mode, conn.secret_key)
        dave = self._config.dave and conn.max_dave_version >= 1
        members = [u.id for u in self._state.fake_voice_members()]
        if dave:
            conn.dave_version = 1
            conn.dave = DavePeer(
                channel_id=self._state.ids.voice_channel_id,
                bot_id=conn.credentials.user_id,
                recorder_id=self._recorder_id,
                member_ids=members,
            )
        for member in members:
            conn.member_event(member).set()
        if self.active is not None and self.active is not conn:
            self._end(self.active)
        self.active = conn
        description = {
            "mode": mode,
            "secret_key": list(conn.secret_key),
            # Mandatory: discord.py reads data['dave_protocol_version'] unconditionally.
            "dave_protocol_version": 1 if dave else 0,
            "audio_codec": "opus",
            "video_codec": None,
            "media_session_id": os.urandom(16).hex(),
        }
        await conn.send_json(OP_SESSION_DESCRIPTION, description)
        if conn.dave is not None:
            await conn.send_binary(OP_MLS_EXTERNAL_SENDER, conn.dave.external_sender())
        # Every MLS member is a connected client, the recorder included (discord.js rejects a
        # proposal that adds a user it was never told about).
        clients = [*members, self._recorder_id] if conn.dave is not None else members
        if clients:
            await conn.send_json(OP_CLIENTS_CONNECT, {"user_ids": [str(m) for m in clients]})
        if conn.dave is None:
            conn.ready.set()
            await self._notify()
        return None

    async def _transition_ready(self, conn: VoiceConnection, data: TransitionReadyData) -> None:
        if await voice_dave_ops.transition_ready(conn, data["transition_id"]):
            await self._notify()

    async def downgrade(self, conn: VoiceConnection) -> int:
        """op 21 ``{protocol_version: 0}``; returns the transition id (executed on the bot's op 23)."""
        return await voice_dave_ops.downgrade(conn)

    async def upgrade(self, conn: VoiceConnection) -> None:
        """op 24 ``{protocol_version: 1, epoch: 1}``: a new group of the fake voice members."""
        await voice_dave_ops.upgrade(conn, [u.id for u in self._state.fake_voice_members()])
