"""The bot's voice sessions on the emulator's voice servers: which one is active, waiting on it,
forcing its websocket closed or cutting it, and the counters that show what happened.

:class:`~openab_voice.testing.emulator.voice_gateway.VoiceGateway` serves the websocket protocol
that creates and resumes these sessions; this is the state it keeps and the handles the rest of the
emulator holds.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.voice_connection import (
    RESUMABLE_SERVER_CLOSES,
    VoiceConnection,
    VoiceCredentials,
)


class VoiceSessions:
    """The bot's voice sessions.

    Attributes:
        active: the bot's current session (also while its websocket is down and resumable).
        closes: every close of a session websocket, ``(code, resumable)``, oldest first.
        resumes: successful RESUMEs; ``failed_resumes``: RESUMEs answered 4006.
        invalid_reports: transition ids the bot reported with op 31.
    """

    def __init__(self) -> None:
        self._expected: VoiceCredentials | None = None
        self._connections: set[VoiceConnection] = set()
        self._forced: dict[web.WebSocketResponse, int] = {}
        self._transports: dict[web.WebSocketResponse, asyncio.Transport] = {}
        self.active: VoiceConnection | None = None
        self.closes: list[tuple[int, bool]] = []
        self.resumes = 0
        self.failed_resumes = 0
        self.invalid_reports: list[int] = []
        self._changed = asyncio.Condition()

    def expect(self, credentials: VoiceCredentials | None) -> None:
        """Accept IDENTIFY with these credentials from now on (``None``: the bot left voice)."""
        self._expected = credentials
        if credentials is None and self.active is not None:
            self._end(self.active)  # media stops now; discord.py closes the socket itself

    @property
    def expected(self) -> VoiceCredentials | None:
        return self._expected

    def connection_for_ssrc(self, ssrc: int) -> VoiceConnection | None:
        for conn in self._connections:
            if conn.ssrc == ssrc and conn.cipher is not None and not conn.closed.is_set():
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

    async def wait_resumed(self, resumes: int) -> VoiceConnection:
        """The active session once ``resumes`` RESUMEs succeeded and a websocket serves it; no
        timeout (callers add one)."""
        async with self._changed:
            await self._changed.wait_for(
                lambda: self.resumes >= resumes and self.active is not None and self.active.attached
            )
            assert self.active is not None
            return self.active

    async def force_close(self, code: int, reason: str = "") -> VoiceConnection:
        """Close the bot's voice websocket with ``code`` (4015: resumable; others end the session).

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when no websocket serves the bot.
        """
        conn = self.active
        if conn is None or conn.ws is None or conn.ws.closed:
            raise EmulatorError("the bot has no open voice websocket", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        ws = conn.ws
        self._forced[ws] = code
        if code not in RESUMABLE_SERVER_CLOSES:
            self._end(conn)
        await ws.close(code=code, message=(reason or f"emulator close {code}").encode())
        return conn

    def drop(self) -> VoiceConnection:
        """Cut the bot's voice websocket's TCP connection without a close frame (a network drop:
        the client sees 1006); the session stays resumable.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when no websocket serves the bot.
        """
        conn = self.active
        transport = None if conn is None or conn.ws is None else self._transports.get(conn.ws)
        if conn is None or transport is None or conn.ws is None or conn.ws.closed:
            raise EmulatorError("the bot has no open voice websocket", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        transport.abort()
        return conn

    async def aclose(self) -> None:
        for conn in list(self._connections):
            conn.closed.set()
            if conn.ws is not None and not conn.ws.closed:
                await conn.ws.close(code=1001, message=b"emulator shutting down")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _end(self, conn: VoiceConnection) -> None:
        conn.closed.set()
        self._connections.discard(conn)
        if self.active is conn:
            self.active = None
