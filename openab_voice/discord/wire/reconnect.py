"""Keeping one voice connection through Discord's closes, drops and moves, on unmodified discord.py.

:class:`SupervisedConnectionState` replaces discord.py's voice poller, which never resumes after a
4015 close. The pure :func:`recovery_for` picks the recovery: **resume** (4015, or a drop without a
code: op 7 with ``seq_ack``; SSRC, key and DAVE group stay), **rejoin** (4006, a refused resume,
other session errors: the :class:`VoiceLife` owner joins again), **reconnect** (the call moved;
discord.py handles it, this only reports) or **leave** (1000, 4014 with no new server, 4021). The
owner reports the gap (:class:`~openab_voice.bus.events.VoiceGap`). Protocol facts:
``docs/voice-session-life.md``; the discord.py failures it works around: docs/adr/0001-own-voice-receiver.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

import aiohttp
import discord
from discord.gateway import DiscordVoiceWebSocket
from discord.voice_state import ConnectionFlowState, VoiceConnectionState

from openab_voice.clock import Clock, wait_for

log = logging.getLogger(__name__)

OP_RESUMED: Final = 9

CAUSE_SERVER_CRASH: Final = "voice_server_crash"
CAUSE_NETWORK: Final = "network"
CAUSE_SESSION_INVALID: Final = "session_invalid"
CAUSE_SERVER_MOVE: Final = "server_move"
CAUSE_DISCONNECTED: Final = "disconnected"
CAUSE_GATEWAY: Final = "gateway"

CLOSE_NORMAL: Final = 1000
CLOSE_SESSION_INVALID: Final = 4006
CLOSE_DISCONNECTED: Final = 4014
CLOSE_SERVER_CRASH: Final = 4015
CLOSE_RATE_LIMITED: Final = 4021
CLOSE_CALL_TERMINATED: Final = 4022


# Flow states in which a VOICE_SERVER_UPDATE is the handshake's own (discord.py voice_state.py).
_HANDSHAKE_STATES = frozenset(
    {
        ConnectionFlowState.disconnected,
        ConnectionFlowState.set_guild_voice_state,
        ConnectionFlowState.got_voice_state_update,
    }
)


class Recovery(StrEnum):
    """How a broken voice connection is brought back."""

    RESUME = "resume"
    REJOIN = "rejoin"
    RECONNECT = "reconnect"
    LEAVE = "leave"
    NONE = "none"  # voice itself was not affected (the main gateway's gap)


@dataclass(frozen=True, slots=True)
class Decision:
    cause: str
    recovery: Recovery


def recovery_for(code: int | None) -> Decision:
    """What to do after the voice websocket ended with ``code`` (None: no close at all, e.g. 30 s
    without a message). Discord "Voice Close Event Codes"; 4015 and a socket that simply went away
    are resumable, session errors need a new session, 4014/4022 mean the call moved or ended."""
    if code == CLOSE_NORMAL:
        return Decision("closed", Recovery.LEAVE)
    if code == CLOSE_SERVER_CRASH:
        return Decision(CAUSE_SERVER_CRASH, Recovery.RESUME)
    if code in (CLOSE_DISCONNECTED, CLOSE_CALL_TERMINATED):
        return Decision(CAUSE_DISCONNECTED, Recovery.RECONNECT)
    if code == CLOSE_RATE_LIMITED:
        return Decision("rate_limited", Recovery.LEAVE)
    if code is None or code < 4000 or code == 4000:
        # 1006 (no close frame), 1001, -1 (discord.py's "no code"), or our own heartbeat timeout
        # (discord.py closes with 4000): the network, not the session, failed.
        return Decision(CAUSE_NETWORK, Recovery.RESUME)
    return Decision(CAUSE_SESSION_INVALID, Recovery.REJOIN)


def moved(state: ConnectionFlowState, token: str | None, data: Any) -> bool:
    """Whether a VOICE_SERVER_UPDATE (``data``) in flow ``state`` moves the call away from the
    session the bot holds: any complete update while connected, one with a new token after the
    handshake began (a RESUME under way); never the handshake's own."""
    if not (data.get("token") and data.get("endpoint")):
        return False  # "awaiting endpoint": discord.py waits for the next one
    if state is ConnectionFlowState.connected:
        return True
    return state not in _HANDSHAKE_STATES and data.get("token") != token


class VoiceLife(Protocol):
    """What the voice session learns from its connection; called on the event loop."""

    def voice_lost(self, *, cause: str, close_code: int | None, recovery: Recovery) -> None:
        """The connection broke (a second call for the same gap escalates its recovery)."""
        ...

    def rejoin_needed(self, *, cause: str, close_code: int | None) -> None:
        """The session is gone: tear this voice client down and join again."""
        ...

    def voice_failed(self, reason: str) -> None:
        """The connection ended for good (kicked, rate limited, a move that never completed)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePolicy:
    """Attempts: ``attempts`` websocket opens ``backoff_s`` apart (times two each), each allowed
    ``timeout_s`` to reach op 9; a refusal (4006) stops at once."""

    attempts: int = 3
    timeout_s: float = 5.0
    backoff_s: float = 0.25


class SupervisedConnectionState(VoiceConnectionState):
    """discord.py's connection state with a poller that resumes, escalates and reports.

    Args:
        voice_client: the client (``VoiceClient.create_connection_state`` passes itself).
        hook: discord.py's websocket hook (every JSON voice op).
        life: told about every loss, rejoin and failure.
        clock: for the back-off between resume attempts and each attempt's bound.
    """

    def __init__(
        self,
        voice_client: discord.VoiceClient,
        *,
        hook: Any,
        life: VoiceLife | None,
        clock: Clock,
        policy: ResumePolicy | None = None,
    ) -> None:
        super().__init__(voice_client, hook=hook)
        self._life = life
        self._clock = clock
        self._policy = policy or ResumePolicy()
        self._moving = False
        self.resumes = 0

    async def voice_server_update(self, data: Any) -> None:
        """A VOICE_SERVER_UPDATE while connected is a move: discord.py closes the socket with 4014
        and identifies at the new endpoint; the gap starts now. One with a new token while a RESUME
        is under way makes discord.py start over at the new server (``soft_disconnect`` and
        ``connect``, which cancels this poller): the open gap's recovery becomes that reconnect."""
        if moved(self.state, self.token, data):
            self._moving = self.state is ConnectionFlowState.connected
            self._lost(CAUSE_SERVER_MOVE, None, Recovery.RECONNECT)
        await super().voice_server_update(data)

    async def _poll_voice_ws(self, reconnect: bool) -> None:
        # Replaces discord.py 2.7.1 voice_state.py VoiceConnectionState._poll_voice_ws (module doc).
        while True:
            try:
                await self.ws.poll_event()
            except asyncio.CancelledError:
                return
            except (discord.ConnectionClosed, TimeoutError) as exc:
                code = exc.code if isinstance(exc, discord.ConnectionClosed) else None
                if not await self._recover(code, reconnect):
                    return

    async def _recover(self, code: int | None, reconnect: bool) -> bool:
        """Handle one close; True when the poller goes on with a working websocket."""
        decision = recovery_for(code)
        log.info("voice websocket closed (%s): %s", code, decision.recovery.value)
        match decision.recovery:
            case Recovery.LEAVE:
                if code == CLOSE_NORMAL and self._expecting_disconnect:
                    return False  # our own disconnect
                await self._leave(decision.cause)
                return False
            case Recovery.RECONNECT:
                return await self._follow_move(decision.cause, code)
            case Recovery.RESUME:
                self._lost(decision.cause, code, Recovery.RESUME)
                if reconnect and await self._resume():
                    return True
                self._rejoin(decision.cause, code)
                return False
            case Recovery.REJOIN | Recovery.NONE:
                self._lost(decision.cause, code, Recovery.REJOIN)
                self._rejoin(decision.cause, code)
                return False

    async def _follow_move(self, cause: str, code: int | None) -> bool:
        """4014/4022: a move (a new VOICE_SERVER_UPDATE came or comes) or the end of the call.
        discord.py's ``_potential_reconnect`` waits for the update and identifies there."""
        if self._disconnected.is_set():  # the main gateway said we left the channel
            await self._leave(cause)
            return False
        if not self._moving:
            self._lost(cause, code, Recovery.RECONNECT)
        ok = await self._potential_reconnect()
        self._moving = False
        if not ok:
            await self._leave("move_failed")
        return ok

    async def _leave(self, reason: str) -> None:
        if self.state is not ConnectionFlowState.disconnected:
            await self.disconnect()
        if self._life is not None:
            self._life.voice_failed(reason)

    async def _resume(self) -> bool:
        """op 7 on a new websocket until op 9; the flow state leaves ``connected`` meanwhile, so
        discord.py's audio player waits instead of sending into a dead session."""
        previous = self.ws
        seq_ack = previous.seq_ack
        with contextlib.suppress(Exception):
            await previous.close()  # stops its heartbeat thread; the socket itself is already gone
        self.state = ConnectionFlowState.websocket_connected
        delay = self._policy.backoff_s
        for attempt in range(self._policy.attempts):
            if attempt:
                await self._clock.sleep(delay)
                delay *= 2
            try:
                ws = await wait_for(self._clock, self._policy.timeout_s, self._open_resumed(seq_ack))
            except discord.ConnectionClosed as exc:
                log.info("voice RESUME refused (%s)", exc.code)
                if exc.code == CLOSE_SESSION_INVALID:
                    return False
                continue
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                log.info("voice RESUME attempt %d failed: %r", attempt + 1, exc)
                continue
            self.ws = ws
            self.resumes += 1
            self.state = ConnectionFlowState.connected
            return True
        return False

    async def _open_resumed(self, seq_ack: int) -> DiscordVoiceWebSocket:
        resumed = asyncio.Event()
        hook = self.hook

        async def watch(ws: DiscordVoiceWebSocket, msg: dict[str, Any]) -> None:
            if msg.get("op") == OP_RESUMED:
                resumed.set()
            if hook is not None:
                await hook(ws, msg)

        ws = await DiscordVoiceWebSocket.from_connection_state(self, resume=True, hook=watch, seq_ack=seq_ack)
        try:
            # Only HELLO and RESUMED come before op 9; the replay after it goes through the poller.
            while not resumed.is_set():
                await ws.poll_event()
        except BaseException:
            await ws.close()
            raise
        return ws

    def _lost(self, cause: str, code: int | None, recovery: Recovery) -> None:
        if self._life is not None:
            self._life.voice_lost(cause=cause, close_code=code, recovery=recovery)

    def _rejoin(self, cause: str, code: int | None) -> None:
        if self._life is not None:
            self._life.rejoin_needed(cause=cause, close_code=code)
