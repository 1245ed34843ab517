"""UDP keep-alive on the bot's voice socket, from join to leave, whether or not the bot plays.

discord.py 2.7.1 sends nothing on its voice UDP socket while it is not playing: after IP discovery a
receive-only bot is silent on UDP for as long as nobody asks it to speak. A NAT or stateful firewall
in front of the bot then forgets the mapping (commonly after 30 s to a few minutes of outbound
silence) and the voice server's datagrams stop reaching the bot, while the websocket, on TCP, stays
up. ``@discordjs/voice`` avoids this with ``VoiceUDPSocket.keepAlive``: an 8-byte datagram every 5 s
(``KEEP_ALIVE_INTERVAL = 5e3``), a 32-bit little-endian counter in its first four bytes and zeros
after (``keepAliveBuffer.writeUInt32LE(counter, 0)``), the counter wrapping after ``2**32 - 1``, the
first one sent as soon as the socket exists. This module sends the same datagram at the same cadence.

The voice server ignores it (receivers drop datagrams under 16 bytes, notes §2.4). The socket is read
per send, because a voice server move re-connects it and a rejoin replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Callable
from typing import Final

from openab_voice.clock import Clock
from openab_voice.discord.wire import stats as kinds
from openab_voice.tasks import TaskOwner

__all__ = ["KEEPALIVE_INTERVAL_S", "UdpKeepAlive", "keepalive_packet"]

log = logging.getLogger(__name__)

KEEPALIVE_INTERVAL_S: Final = 5.0  # @discordjs/voice KEEP_ALIVE_INTERVAL
KEEPALIVE_BYTES: Final = 8
_PACKET = struct.Struct("<I4x")  # counter, little-endian, then four zero bytes


def keepalive_packet(counter: int) -> bytes:
    """The 8-byte keep-alive datagram carrying ``counter`` (wrapped to 32 bits)."""
    return _PACKET.pack(counter & 0xFFFF_FFFF)


SocketSource = Callable[[], socket.socket | None]
SendCounter = Callable[[str], None]


class UdpKeepAlive:
    """Sends :func:`keepalive_packet` on the current voice socket every ``interval_s``.

    Args:
        socket_source: the connected voice socket now, or None while there is none.
        clock: the injected clock the interval runs on.
        count: told each send's outcome (``stats.UDP_KEEPALIVE``, ``UDP_KEEPALIVE_FAILED`` or
            ``UDP_KEEPALIVE_NO_SOCKET``); the receiver's stats count them.
        interval_s: seconds between keep-alives.
    """

    def __init__(
        self,
        *,
        socket_source: SocketSource,
        clock: Clock,
        count: SendCounter,
        interval_s: float = KEEPALIVE_INTERVAL_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("the keep-alive interval must be positive")
        self._source = socket_source
        self._clock = clock
        self._count = count
        self._interval_s = interval_s
        self._owner = TaskOwner("udp-keepalive", clock=clock)
        self._task: asyncio.Task[None] | None = None
        self.counter = 0  # the next datagram's counter

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Send one now and then every interval, until :meth:`stop`. Call on the event loop; a
        second call while running sends one now (a new session description: the socket may have
        been re-connected)."""
        if self.running:
            self.send_now()
            return
        self._task = self._owner.spawn(self._run(), name="udp-keepalive")

    def send_now(self) -> None:
        """One keep-alive now, outside the cadence (after a RESUME: the path is used again at once)."""
        sock = self._source()
        if sock is None or sock.fileno() < 0:
            self._count(kinds.UDP_KEEPALIVE_NO_SOCKET)
            return
        packet = keepalive_packet(self.counter)
        self.counter = (self.counter + 1) & 0xFFFF_FFFF  # counted per attempt, as discord.js does
        try:
            sock.send(packet)  # connected by discord.py (initial_connection's sock_connect)
        except OSError as exc:  # a full send buffer, or the socket closed under us by a leave
            log.debug("UDP keep-alive not sent: %r", exc)
            self._count(kinds.UDP_KEEPALIVE_FAILED)
            return
        self._count(kinds.UDP_KEEPALIVE)

    def stop(self) -> None:
        """Stop sending (idempotent; safe from a synchronous cleanup). The task ends at its next
        step; :meth:`aclose` also waits for it."""
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        """Stop and wait until the task has ended. Idempotent."""
        self.stop()
        await self._owner.aclose()

    async def _run(self) -> None:
        while True:
            self.send_now()
            await self._clock.sleep(self._interval_s)
