"""The main gateway (``wss://gateway.discord.gg/?v=10``): HELLO, heartbeats, IDENTIFY -> READY ->
GUILD_CREATE, voice state updates, and dispatches to every identified session.

Sharded IDENTIFY (``"shard": [id, count]``): a session gets only the guilds on its shard,
``(guild_id >> 22) % count == id`` (Discord's rule), in READY, GUILD_CREATE and every dispatch that
names a guild; op 4 and member requests go to the guild they name. The hub serves one guild, or
several (:meth:`GatewayHub.add_guild`: another guild of the same bot, e.g. one per shard).

Frames are sent as TEXT: discord.py only inflates ``bytes`` messages (``DiscordWebSocket.received_message``:
``if type(msg) is bytes``), so ``compress=zlib-stream`` in the URL can be ignored. Each session has
one writer task fed by a queue, so :meth:`GatewayHub.dispatch` is synchronous and ordered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import WSMsgType, web

from openab_voice.clock import Clock
from openab_voice.errors import WireError
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.wire import (
    GatewayFrame,
    IdentifyData,
    JsonObject,
    ResumeData,
    UpdateVoiceStateData,
    parse,
)

log = logging.getLogger(__name__)

OP_DISPATCH, OP_HEARTBEAT, OP_IDENTIFY, OP_PRESENCE = 0, 1, 2, 3
OP_VOICE_STATE, OP_RESUME, OP_RECONNECT, OP_REQUEST_MEMBERS = 4, 6, 7, 8
OP_INVALID_SESSION, OP_HELLO, OP_HEARTBEAT_ACK = 9, 10, 11
# Close codes (Discord "Gateway Close Event Codes").
CLOSE_UNKNOWN_ERROR, CLOSE_UNKNOWN_OPCODE, CLOSE_DECODE_ERROR, CLOSE_NOT_AUTHENTICATED = (
    4000,
    4001,
    4002,
    4003,
)
CLOSE_AUTH_FAILED, CLOSE_ALREADY_AUTHENTICATED = 4004, 4005
CLOSE_INVALID_SHARD = 4010
# Intents the emulator honours when choosing what to dispatch.
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_VOICE_STATES = 1 << 7
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_MESSAGE_CONTENT = 1 << 15
GATEWAY_URL = "wss://gateway.discord.gg"

VoiceStateHandler = Callable[[UpdateVoiceStateData], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


class GatewaySession:
    """One connected client websocket."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self.session_id: str | None = None
        self.intents = 0
        self.shard: tuple[int, int] | None = None  # (id, count) from IDENTIFY; None: every guild
        self.seq = 0
        self._queue: asyncio.Queue[str | _Close | None] = asyncio.Queue()

    @property
    def identified(self) -> bool:
        return self.session_id is not None

    def owns(self, guild_id: int | None) -> bool:
        """Whether this session's shard carries ``guild_id`` (None: a dispatch of no guild)."""
        if guild_id is None or self.shard is None:
            return True
        shard_id, count = self.shard
        return (guild_id >> 22) % count == shard_id

    def send(self, op: int, d: object, *, event: str | None = None) -> None:
        frame: JsonObject = {"op": op, "d": d, "s": None, "t": event}
        if op == OP_DISPATCH:
            self.seq += 1
            frame["s"] = self.seq
        self._queue.put_nowait(json.dumps(frame))

    def close(self, code: int, reason: str) -> None:
        self._queue.put_nowait(_Close(code, reason))

    def stop(self) -> None:
        self._queue.put_nowait(None)

    async def write_loop(self) -> None:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, _Close):
                await self.ws.close(code=item.code, message=item.reason.encode())
                return
            try:
                await self.ws.send_str(item)
            except (ConnectionError, RuntimeError):  # peer went away mid-send
                return


class GatewayHub:
    """Serves the main gateway and fans dispatches out to identified sessions.

    Args:
        state: the guild.
        token: the accepted bot token.
        on_voice_state: awaited with every validated op 4 from a client.
        gateway_url: the URL READY names for resuming.
        heartbeat_interval_ms: the interval HELLO asks for.
        rtt_s: how long after a heartbeat its ACK goes out (``EmulatorConfig.gateway_rtt_ms``).
        clock: the emulator's clock, which that round trip runs on.
    """

    def __init__(
        self,
        state: GuildState,
        *,
        token: str,
        on_voice_state: VoiceStateHandler,
        gateway_url: Callable[[], str] = lambda: GATEWAY_URL,
        heartbeat_interval_ms: int,
        rtt_s: float,
        clock: Clock,
    ) -> None:
        self._state = state
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._rtt_s = rtt_s
        self._clock = clock
        self._acks: set[asyncio.Task[None]] = set()
        self._token = token
        self._gateway_url = gateway_url
        self._on_voice_state = on_voice_state
        self._guilds: dict[int, tuple[GuildState, VoiceStateHandler]] = {
            state.ids.guild_id: (state, on_voice_state)
        }
        self._sessions: set[GatewaySession] = set()
        self._intents_by_session_id: dict[str, int] = {}
        self._shard_by_session_id: dict[str, tuple[int, int] | None] = {}
        self.resumes = 0

    @property
    def connected(self) -> bool:
        """Whether at least one client has identified."""
        return any(s.identified for s in self._sessions)

    def add_guild(self, state: GuildState, *, on_voice_state: VoiceStateHandler) -> None:
        """Serve another guild of the same bot (its own state and voice); before clients connect."""
        if state.ids.bot_user_id != self._state.ids.bot_user_id:
            raise ValueError("every guild of one gateway belongs to the same bot")
        self._guilds[state.ids.guild_id] = (state, on_voice_state)

    def dispatch(self, event: str, data: JsonObject, *, intent: int | None = None) -> None:
        """Send ``event`` to every identified session whose intents include ``intent`` and whose
        shard carries the guild ``data`` names."""
        guild_id = _guild_of(data)
        for session in list(self._sessions):
            if session.identified and (intent is None or session.intents & intent) and session.owns(guild_id):
                session.send(OP_DISPATCH, data, event=event)

    def dispatch_message(self, event: str, message: JsonObject) -> None:
        """MESSAGE_CREATE / MESSAGE_UPDATE under the GUILD_MESSAGES intent; without MESSAGE_CONTENT a
        message from someone else arrives with empty content, as on Discord."""
        author_id = int(message.get("author", {}).get("id", 0))
        guild_id = _guild_of(message)
        for session in list(self._sessions):
            if not (session.identified and session.intents & INTENT_GUILD_MESSAGES):
                continue
            if not session.owns(guild_id):
                continue
            data = message
            if author_id != self._state.ids.bot_user_id and not session.intents & INTENT_MESSAGE_CONTENT:
                data = {**message, "content": "", "embeds": [], "attachments": [], "components": []}
            session.send(OP_DISPATCH, data, event=event)

    def request_reconnect(self) -> int:
        """Send op 7 (RECONNECT) to every identified session, as Discord does before a gateway
        restart: the client closes, opens a new socket and RESUMEs. Returns how many were asked."""
        asked = 0
        for session in list(self._sessions):
            if session.identified:
                session.send(OP_RECONNECT, None)
                asked += 1
        return asked

    async def aclose(self) -> None:
        """Close every session (1001 going away)."""
        for session in list(self._sessions):
            session.close(1001, "emulator shutting down")
        for ack in list(self._acks):
            ack.cancel()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """aiohttp handler for the gateway websocket."""
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        session = GatewaySession(ws)
        self._sessions.add(session)
        writer = asyncio.create_task(session.write_loop(), name="emulator-gateway-writer")
        session.send(OP_HELLO, {"heartbeat_interval": self._heartbeat_interval_ms, "_trace": ["emulator"]})
        try:
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    try:
                        keep = await self._on_text(session, msg.data)
                    except Exception:  # the emulator's own bug: report it, end this session cleanly
                        log.exception("emulator gateway failed on %r", msg.data[:200])
                        session.close(CLOSE_UNKNOWN_ERROR, "Unknown error.")
                        keep = False
                    if not keep:
                        break
                elif msg.type is WSMsgType.BINARY:
                    session.close(CLOSE_DECODE_ERROR, "Decode error")
                    break
        finally:
            self._sessions.discard(session)
            session.stop()
            with contextlib.suppress(ConnectionError, RuntimeError):
                await writer
            if not ws.closed:
                await ws.close()
        return ws

    async def _ack_later(self, session: GatewaySession) -> None:
        await self._clock.sleep(self._rtt_s)
        session.send(OP_HEARTBEAT_ACK, None)

    async def _on_text(self, session: GatewaySession, text: str) -> bool:
        """Handle one client frame; False ends the session (a close was queued)."""
        try:
            frame = parse(GatewayFrame, json.loads(text), what="gateway frame")
        except (json.JSONDecodeError, WireError):
            session.close(CLOSE_DECODE_ERROR, "Decode error")
            return False
        op, data = frame["op"], frame["d"]
        try:
            if op == OP_HEARTBEAT:
                # A round trip later, as from Discord (EmulatorConfig.gateway_rtt_ms says why).
                ack = asyncio.create_task(self._ack_later(session), name="emulator-gateway-ack")
                self._acks.add(ack)
                ack.add_done_callback(self._acks.discard)
            elif op == OP_IDENTIFY:
                return self._identify(session, parse(IdentifyData, data, what="identify"))
            elif op == OP_RESUME:
                return self._resume(session, parse(ResumeData, data, what="resume"))
            elif not session.identified:
                session.close(CLOSE_NOT_AUTHENTICATED, "Not authenticated.")
                return False
            elif op == OP_VOICE_STATE:
                update = parse(UpdateVoiceStateData, data, what="voice state update")
                _, handler = self._guilds.get(update["guild_id"], (None, self._on_voice_state))
                await handler(update)
            elif op == OP_REQUEST_MEMBERS:
                self._members_chunk(session, data)
            elif op != OP_PRESENCE:
                session.close(CLOSE_UNKNOWN_OPCODE, "Unknown opcode.")
                return False
        except WireError:
            session.close(CLOSE_DECODE_ERROR, "Decode error")
            return False
        return True

    def _identify(self, session: GatewaySession, data: IdentifyData) -> bool:
        if session.identified:
            session.close(CLOSE_ALREADY_AUTHENTICATED, "Already authenticated.")
            return False
        if data["token"].removeprefix("Bot ") != self._token:
            session.close(CLOSE_AUTH_FAILED, "Authentication failed.")
            return False
        shard = data.get("shard")
        if shard is not None:
            if len(shard) != 2 or not 0 <= shard[0] < shard[1]:
                session.close(CLOSE_INVALID_SHARD, "Invalid shard.")
                return False
            session.shard = (shard[0], shard[1])
        session.session_id = secrets.token_hex(16)
        session.intents = data["intents"]
        self._intents_by_session_id[session.session_id] = session.intents
        self._shard_by_session_id[session.session_id] = session.shard
        state = self._state
        bot = state.user(state.ids.bot_user_id)
        guilds = [g for g, _ in self._guilds.values() if session.owns(g.ids.guild_id)]
        ready = {
            "v": 10,
            "user": payloads.bot_user_payload(bot),
            "guilds": [{"id": str(g.ids.guild_id), "unavailable": True} for g in guilds],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": self._gateway_url(),
            "application": {"id": str(state.ids.application_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "_trace": ["emulator"],
        }
        if shard is not None:
            ready["shard"] = list(shard)
        session.send(OP_DISPATCH, ready, event="READY")
        for guild in guilds:
            session.send(OP_DISPATCH, payloads.guild_create(guild), event="GUILD_CREATE")
        return True

    def _resume(self, session: GatewaySession, data: ResumeData) -> bool:
        # No replay buffer: a resumed session continues from now on (events in between are lost,
        # which a short-lived test cannot observe unless it forces a reconnect mid-dispatch).
        intents = self._intents_by_session_id.get(data["session_id"])
        if data["token"].removeprefix("Bot ") != self._token:
            session.close(CLOSE_AUTH_FAILED, "Authentication failed.")
            return False
        if intents is None:
            session.send(OP_INVALID_SESSION, False)
            return True
        session.session_id = data["session_id"]
        session.intents = intents
        session.shard = self._shard_by_session_id.get(data["session_id"])
        session.seq = data["seq"] or 0
        self.resumes += 1
        session.send(OP_DISPATCH, {"_trace": ["emulator"]}, event="RESUMED")
        return True

    def _members_chunk(self, session: GatewaySession, data: object) -> None:
        nonce = data.get("nonce") if isinstance(data, dict) else None
        asked = data.get("guild_id") if isinstance(data, dict) else None
        state = self._state
        if asked is not None and str(asked).isdigit() and int(asked) in self._guilds:
            state = self._guilds[int(asked)][0]
        chunk: JsonObject = {
            "guild_id": str(state.ids.guild_id),
            "members": [payloads.member_payload(state, u) for u in state.users.values()],
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
        }
        if nonce is not None:
            chunk["nonce"] = nonce
        session.send(OP_DISPATCH, chunk, event="GUILD_MEMBERS_CHUNK")


def _guild_of(data: JsonObject) -> int | None:
    """The guild a dispatch is about (its ``guild_id``), if it names one."""
    raw = data.get("guild_id") if isinstance(data, dict) else None
    return int(raw) if isinstance(raw, (str, int)) and str(raw).isdigit() else None
