"""The bot's UDP keep-alive: @discordjs/voice's datagram and cadence, on a fake clock, on a real
loopback socket; its outcomes counted in the receiver's stats."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.wire import stats
from openab_voice.discord.wire.keepalive import KEEPALIVE_INTERVAL_S, UdpKeepAlive, keepalive_packet
from openab_voice.discord.wire.receiver import VoiceReceiver


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the bot's socket, connected as discord.py connects it; the voice server's socket)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    bot = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bot.setblocking(False)
    bot.connect(server.getsockname())
    yield bot, server
    bot.close()
    server.close()


async def _next(server: socket.socket) -> bytes:
    return await asyncio.get_running_loop().sock_recv(server, 64)


def test_the_datagram_is_discordjs_keepalive() -> None:
    # @discordjs/voice 0.19.2 VoiceUDPSocket.keepAlive: Buffer.alloc(8), writeUInt32LE(counter, 0).
    assert keepalive_packet(0) == bytes(8)
    assert keepalive_packet(0x01020304) == b"\x04\x03\x02\x01\x00\x00\x00\x00"
    assert keepalive_packet(2**32) == bytes(8)  # the counter wraps after 2**32 - 1
    assert KEEPALIVE_INTERVAL_S == 5.0  # KEEP_ALIVE_INTERVAL = 5e3


async def test_one_at_start_then_every_interval_until_stopped(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    bot, server = pair
    clock = FakeClock()
    counted: list[str] = []
    keepalive = UdpKeepAlive(socket_source=lambda: bot, clock=clock, count=counted.append)
    keepalive.start()
    assert await _next(server) == keepalive_packet(0)  # at once, as discord.js does (setImmediate)
    clock.advance(KEEPALIVE_INTERVAL_S - 0.01)
    await asyncio.sleep(0)
    assert counted == [stats.UDP_KEEPALIVE]  # the sleeper is not due: nothing more was sent
    clock.advance(0.01)
    assert await _next(server) == keepalive_packet(1)
    keepalive.send_now()  # after a RESUME: one now, outside the cadence
    assert await _next(server) == keepalive_packet(2)
    keepalive.start()  # a later op 4 while running: one now, still one task
    assert await _next(server) == keepalive_packet(3)
    await keepalive.aclose()
    assert not keepalive.running
    clock.advance(10 * KEEPALIVE_INTERVAL_S)
    await asyncio.sleep(0)
    assert counted == [stats.UDP_KEEPALIVE] * 4
    assert keepalive.counter == 4


async def test_no_socket_and_a_failed_send_are_counted_not_raised() -> None:
    clock = FakeClock()
    counted: list[str] = []
    current: list[socket.socket | None] = [None]
    keepalive = UdpKeepAlive(
        socket_source=lambda: current[0], clock=clock, count=counted.append, interval_s=1.0
    )
    keepalive.send_now()  # between sessions: discord.py's socket is MISSING
    closed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    closed.close()
    current[0] = closed
    keepalive.send_now()  # closed by a leave
    unconnected = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    current[0] = unconnected
    try:
        keepalive.send_now()  # send() on an unconnected datagram socket raises: counted as failed
    finally:
        unconnected.close()
    assert counted == [
        stats.UDP_KEEPALIVE_NO_SOCKET,
        stats.UDP_KEEPALIVE_NO_SOCKET,
        stats.UDP_KEEPALIVE_FAILED,
    ]
    with pytest.raises(ValueError):
        UdpKeepAlive(socket_source=lambda: None, clock=clock, count=counted.append, interval_s=0)


async def test_the_receiver_counts_them_in_udp_sent() -> None:
    clock = FakeClock()
    receiver = VoiceReceiver(bus=EventBus(), clock=clock)
    receiver.start(asyncio.get_running_loop())
    try:
        for kind in (stats.UDP_KEEPALIVE, stats.UDP_KEEPALIVE, stats.UDP_KEEPALIVE_FAILED):
            receiver.count_sent(kind)
        await receiver.sync()
        assert receiver.snapshot()["udp_sent"] == {"keepalive": 2, "keepalive_failed": 1}
    finally:
        await receiver.aclose()
