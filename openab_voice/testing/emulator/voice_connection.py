"""One bot voice session: its websocket, negotiated media state, v8 sequence and DAVE peer.

Every server message that may need re-sending carries the v8 ``seq`` (JSON ``"seq"``, binary ``>H``
prefix) from one counter per session; clients echo the last one they saw as ``seq_ack`` in heartbeats
and in RESUME. A session outlives its websocket: after a resumable close (4015, or the socket simply
dropping) it keeps its SSRC, key and DAVE group, numbered messages sent meanwhile wait in a bounded
history, and a RESUME (op 7) on a new websocket replays everything after ``seq_ack`` before op 9.
Binary frames from the server are ``>H seq || u8 opcode || payload`` (notes §3).
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections import deque
from dataclasses import dataclass

from aiohttp import web

from openab_voice.discord.wire.transport import TransportCipher
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.dave_peer import CommitTransition, DavePeer
from openab_voice.testing.emulator.voice_udp import Address
from openab_voice.testing.emulator.waiting import wait_any
from openab_voice.testing.emulator.wire import JsonObject

OP_IDENTIFY, OP_SELECT_PROTOCOL, OP_READY, OP_HEARTBEAT = 0, 1, 2, 3
OP_SESSION_DESCRIPTION, OP_SPEAKING, OP_HEARTBEAT_ACK, OP_RESUME, OP_HELLO = 4, 5, 6, 7, 8
OP_RESUMED = 9
OP_CLIENTS_CONNECT, OP_CLIENT_CONNECT, OP_CLIENT_DISCONNECT = 11, 12, 13
OP_DAVE_PREPARE_TRANSITION, OP_DAVE_EXECUTE, OP_DAVE_READY, OP_DAVE_PREPARE_EPOCH = 21, 22, 23, 24
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
CLOSE_SESSION_TIMEOUT, CLOSE_SERVER_NOT_FOUND, CLOSE_UNKNOWN_PROTOCOL = 4009, 4011, 4012
CLOSE_DISCONNECTED, CLOSE_SERVER_CRASH, CLOSE_UNKNOWN_MODE = 4014, 4015, 4016
# Closes after which the session may be resumed: the server crashed (4015), or the socket went away
# without a Discord close code (network loss: 1006, or any code below 4000 but a normal 1000).
RESUMABLE_SERVER_CLOSES = frozenset({CLOSE_SERVER_CRASH})
HEARTBEAT_INTERVAL_MS = 13750.0
# Numbered messages kept for replay on RESUME; a client further behind must identify again (4006).
REPLAY_HISTORY = 512


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

    def __init__(self, ws: web.WebSocketResponse | None, *, ssrc: int = 0) -> None:
        self.ws = ws
        self.ssrc = ssrc
        self.credentials: VoiceCredentials | None = None
        self.max_dave_version = 0
        self.mode: str | None = None
        self.secret_key: bytes | None = None
        self.cipher: TransportCipher | None = None
        self.dave: DavePeer | None = None
        # The DAVE protocol version in force (ops 21/22 downgrade it to 0, op 24 + a welcome
        # upgrade it back); media is end-to-end encrypted only while it is 1.
        self.dave_version = 0
        self.bot_addr: Address | None = None
        self.bot_speaking = 0
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        # With DAVE: set while the bot holds the group's current epoch (cleared from a key
        # package or an op 31 until its welcome transition executes).
        self.dave_synced = asyncio.Event()
        self.resumes = 0
        self.replayed = 0
        self.invalid_reports: list[int] = []
        self.speaking_announced: set[int] = set()
        self.ignored_commits = 0
        self.client_seq_ack = -1
        self._commit_waiter: asyncio.Future[bytes] | None = None
        self._seq = 0
        self._history: deque[tuple[int, str | bytes]] = deque(maxlen=REPLAY_HISTORY)
        self._nonce = 0
        self._lock = asyncio.Lock()
        self._executed: dict[int, asyncio.Event] = {}
        self._members: dict[int, asyncio.Event] = {}

    @property
    def attached(self) -> bool:
        """A websocket is open for this session (False between a resumable close and the RESUME)."""
        return self.ws is not None and not self.ws.closed

    @property
    def last_seq(self) -> int:
        """The last ``seq`` sent (0 before any)."""
        return self._seq

    def detach(self) -> None:
        """The websocket is gone but the session lives on: numbered sends wait in the history."""
        self.ws = None

    async def resume(self, ws: web.WebSocketResponse, seq_ack: int) -> bool:
        """Bind the session to ``ws``, send RESUMED (op 9), then re-send every numbered message
        after ``seq_ack``, under one lock so nothing new slips in between.

        RESUMED goes first: @discordjs/voice ignores binary (DAVE) messages until it is back in
        its Ready state, which op 9 puts it in.

        Returns:
            False when messages after ``seq_ack`` have already left the history (the client must
            identify again).
        """
        async with self._lock:
            pending = self._after(seq_ack)
            if pending is None:
                return False
            self.ws = ws
            self.resumes += 1
            await self._send(json.dumps({"op": OP_RESUMED, "d": None}))
            for data in pending:
                self.replayed += 1
                await self._send(data)
        return True

    def expect_commit(self) -> asyncio.Future[bytes]:
        """A future for the bot's next op 28 (client-commit mode)."""
        self._commit_waiter = asyncio.get_running_loop().create_future()
        return self._commit_waiter

    def deliver_commit(self, payload: bytes) -> bool:
        """The bot's op 28; False when no proposals were waiting for one (a late or stray commit)."""
        waiter, self._commit_waiter = self._commit_waiter, None
        if waiter is None or waiter.done():
            self.ignored_commits += 1
            return False
        waiter.set_result(payload)
        return True

    def _after(self, seq_ack: int) -> list[str | bytes] | None:
        """The history after ``seq_ack`` (16-bit sequence arithmetic), or None if some of it is gone."""
        if seq_ack < 0:  # the client saw nothing numbered (discord.py starts at -1)
            first = self._history[0][0] if self._history else self._seq + 1
            return [d for _, d in self._history] if first == 1 else None
        behind = (self._seq - seq_ack) & 0xFFFF
        if behind == 0:
            return []
        if behind > len(self._history):
            return None
        return [d for _, d in list(self._history)[-behind:]]

    @property
    def media_ready(self) -> bool:
        """Key known and bot address known: fake speakers may send."""
        return self.cipher is not None and self.bot_addr is not None and not self.closed.is_set()

    def info(self) -> VoiceSessionInfo:
        if self.mode is None or self.secret_key is None or self.credentials is None:
            raise EmulatorError("voice session not negotiated yet", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        return VoiceSessionInfo(
            dave_enabled=self.dave is not None and self.dave_version > 0,
            privacy_code=None if self.dave is None or self.dave_version == 0 else self.dave.privacy_code,
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
            if not numbered:
                await self._send(json.dumps(frame))
                return
            self._seq = (self._seq + 1) & 0xFFFF
            frame["seq"] = self._seq
            data = json.dumps(frame)
            self._history.append((self._seq, data))
            await self._send(data)

    async def send_binary(self, op: int, payload: bytes) -> None:
        async with self._lock:
            self._seq = (self._seq + 1) & 0xFFFF
            data = struct.pack(">HB", self._seq, op) + payload
            self._history.append((self._seq, data))
            await self._send(data)

    async def _send(self, data: str | bytes) -> None:
        if self.ws is None or self.ws.closed:
            return  # detached: a numbered message waits in the history for the RESUME
        try:
            if isinstance(data, str):
                await self.ws.send_str(data)
            else:
                await self.ws.send_bytes(data)
        except (ConnectionError, RuntimeError):  # the bot hung up mid-send; the handler decides
            pass

    async def follow_commit(self, transition: CommitTransition) -> None:
        """Forward a membership change (op 27 then op 29) and wait until it executed (op 22) or the
        connection ended; callers bound the wait."""
        executed = self._executed.setdefault(transition.transition_id, asyncio.Event())
        if transition.proposals:  # empty when the proposals went out before the commit was chosen
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

    async def wait_executed(self, transition_id: int) -> None:
        """Until op 22 went out for ``transition_id`` or the session ended; callers bound it."""
        await wait_any(self._executed.setdefault(transition_id, asyncio.Event()), self.closed)
