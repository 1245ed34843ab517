"""The voice gateway (``wss://127.0.0.1:<port>/?v=8``): handshake, heartbeats, SPEAKING and DAVE ops.

Client binary frames are ``u8 opcode || payload`` (notes §3). The bot's op order is ``0, 1, 5`` with
DAVE off and ``0, 1, 5, 26, 23`` with DAVE on. The state of each connection lives in
:mod:`voice_connection`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
from collections.abc import Callable

from aiohttp import WSMsgType, web

from openab_voice.discord.transport import cipher_for
from openab_voice.errors import EmulatorError
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
    OP_DAVE_EXECUTE,
    OP_DAVE_READY,
    OP_HEARTBEAT,
    OP_HEARTBEAT_ACK,
    OP_HELLO,
    OP_IDENTIFY,
    OP_MLS_EXTERNAL_SENDER,
    OP_MLS_INVALID,
    OP_MLS_KEY_PACKAGE,
    OP_MLS_WELCOME,
    OP_READY,
    OP_RESUME,
    OP_SELECT_PROTOCOL,
    OP_SESSION_DESCRIPTION,
    OP_SPEAKING,
    VoiceConnection,
    VoiceCredentials,
)
from openab_voice.testing.emulator.voice_udp import VoiceUdpServer
from openab_voice.testing.emulator.wire import (
    GatewayFrame,
    SelectProtocolData,
    SpeakingData,
    TransitionReadyData,
    VoiceHeartbeatData,
    VoiceIdentifyData,
    WireError,
    parse,
)

log = logging.getLogger(__name__)


class VoiceGateway:
    """Serves voice websockets for the bot.

    Args:
        state: the guild.
        config: the emulator settings (modes offered, DAVE on or off).
        udp: the voice UDP server (its port goes into READY).
        allocate_ssrc: returns a fresh SSRC for each connection.
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
        self._state = state
        self._config = config
        self._udp = udp
        self._allocate_ssrc = allocate_ssrc
        self._recorder_id = recorder_id
        self._expected: VoiceCredentials | None = None
        self._connections: set[VoiceConnection] = set()
        self.active: VoiceConnection | None = None
        self._changed = asyncio.Condition()

    def expect(self, credentials: VoiceCredentials | None) -> None:
        """Accept IDENTIFY with these credentials from now on (``None``: the bot left voice)."""
        self._expected = credentials
        if credentials is None and self.active is not None:
            self.active.closed.set()  # media stops now; discord.py closes the socket itself
            self.active = None

    def connection_for_ssrc(self, ssrc: int) -> VoiceConnection | None:
        for conn in self._connections:
            if conn.ssrc == ssrc and conn.cipher is not None:
                return conn
        return None

    async def wait_ready(self) -> VoiceConnection:
        """The next connection that is (or becomes) ready; no timeout (callers add one)."""
        async with self._changed:
            await self._changed.wait_for(
                lambda: (
                    self.active is not None and self.active.ready.is_set() and not self.active.closed.is_set()
                )
            )
            assert self.active is not None
            return self.active

    async def aclose(self) -> None:
        for conn in list(self._connections):
            conn.closed.set()
            if not conn.ws.closed:
                await conn.ws.close(code=1001, message=b"emulator shutting down")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """aiohttp handler for the voice websocket."""
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = VoiceConnection(ws, ssrc=self._allocate_ssrc())
        self._connections.add(conn)
        await conn.send_json(OP_HELLO, {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}, numbered=False)
        close: tuple[int, str] | None = None
        try:
            async for msg in ws:
                try:
                    if msg.type is WSMsgType.TEXT:
                        close = await self._on_text(conn, msg.data)
                    elif msg.type is WSMsgType.BINARY:
                        close = await self._on_binary(conn, msg.data)
                except Exception:  # the emulator's own bug: report it, end this session cleanly
                    log.exception("emulator voice gateway failed on a %s frame", msg.type.name)
                    close = CLOSE_UNKNOWN_ERROR, "Unknown error."
                if close is not None:
                    break
        finally:
            conn.closed.set()
            self._connections.discard(conn)
            if self.active is conn:
                self.active = None
            if not ws.closed:
                code, reason = close or (1000, "")
                await ws.close(code=code, message=reason.encode())
            await self._notify()
        return ws

    async def _on_text(self, conn: VoiceConnection, text: str) -> tuple[int, str] | None:
        try:
            frame = parse(GatewayFrame, json.loads(text), what="voice frame")
        except (json.JSONDecodeError, WireError):
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
        op, data = frame["op"], frame["d"]
        try:
            if op == OP_HEARTBEAT:
                beat = parse(VoiceHeartbeatData, data, what="heartbeat")
                await conn.send_json(OP_HEARTBEAT_ACK, {"t": beat["t"]}, numbered=False)
            elif op == OP_IDENTIFY:
                return await self._identify(conn, parse(VoiceIdentifyData, data, what="voice identify"))
            elif op == OP_RESUME:
                return CLOSE_SESSION_INVALID, "Session no longer valid."  # resume is not emulated
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
            elif op != OP_CLIENT_CONNECT:
                return CLOSE_UNKNOWN_OPCODE, "Unknown opcode."
        except WireError:
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
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
            conn.dave = DavePeer(
                channel_id=self._state.ids.voice_channel_id,
                bot_id=conn.credentials.user_id,
                recorder_id=self._recorder_id,
                member_ids=members,
            )
        for member in members:
            conn.member_event(member).set()
        if self.active is not None and self.active is not conn:
            self.active.closed.set()
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
        if members:
            await conn.send_json(OP_CLIENTS_CONNECT, {"user_ids": [str(m) for m in members]})
        if conn.dave is None:
            conn.ready.set()
            await self._notify()
        return None

    async def _transition_ready(self, conn: VoiceConnection, data: TransitionReadyData) -> None:
        transition = data["transition_id"]
        if conn.dave is None or not conn.dave.transition_ready(transition):
            return  # unknown or repeated ids are ignored, as a server would
        await conn.send_json(OP_DAVE_EXECUTE, {"transition_id": transition})
        conn.mark_executed(transition)
        if conn.dave.bot_joined and not conn.ready.is_set():
            conn.ready.set()
            await self._notify()

    async def _on_binary(self, conn: VoiceConnection, data: bytes) -> tuple[int, str] | None:
        if not data:
            return CLOSE_DECODE_ERROR, "Failed to decode payload."
        if conn.credentials is None:
            return CLOSE_NOT_AUTHENTICATED, "Not authenticated."
        op, payload = data[0], data[1:]
        if conn.dave is None:
            return None  # DAVE is off for this call: binary ops mean nothing
        if op == OP_MLS_KEY_PACKAGE:
            try:
                transition, welcome = conn.dave.welcome_bot(payload)
            except EmulatorError:
                log.warning("the bot sent an unusable DAVE key package", exc_info=True)
                return None
            await conn.send_binary(OP_MLS_WELCOME, struct.pack(">H", transition) + welcome)
        elif op == OP_MLS_INVALID:
            log.warning("the bot rejected a DAVE commit/welcome: %s", payload.hex())
        # op 28 (the bot's own commit): the emulator's committer always wins, so it is dropped.
        return None
