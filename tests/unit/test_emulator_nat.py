"""The emulator's NAT, held against a raw UDP client (a plain loopback socket, no discord.py): the
voice server's datagrams stop reaching it after ``nat_timeout_s`` of its own silence and come again
after it sends one keep-alive. Time is a fake clock; each step waits on the datagram itself."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from openab_voice.clock import FakeClock
from openab_voice.discord.wire.keepalive import keepalive_packet
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.emulator.voice_udp import Address, VoiceUdpServer, datagram_kind

NAT_S = 30.0


class _Client:
    """A raw UDP client, and a gate per datagram the server has handled."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.heard: asyncio.Queue[bytes] = asyncio.Queue()

    @property
    def address(self) -> Address:
        host, port = self.sock.getsockname()
        return str(host), int(port)

    async def send(self, data: bytes) -> None:
        """Send ``data`` and wait until the server has handled it."""
        self.sock.send(data)
        assert await self.heard.get() == data

    async def receive(self) -> bytes:
        return await asyncio.get_running_loop().sock_recv(self.sock, 2048)


@pytest.fixture
async def rig() -> AsyncIterator[tuple[VoiceUdpServer, _Client, FakeClock]]:
    clock = FakeClock()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    client: _Client | None = None

    def on_media(data: bytes, _addr: Address) -> None:
        assert client is not None
        client.heard.put_nowait(data)

    server = VoiceUdpServer(on_media, clock=clock, nat_timeout_s=NAT_S)
    port = await server.start()
    sock.connect(("127.0.0.1", port))
    client = _Client(sock)
    try:
        yield server, client, clock
    finally:
        server.close()
        sock.close()


async def test_server_packets_stop_after_silence_and_resume_after_one_keepalive(
    rig: tuple[VoiceUdpServer, _Client, FakeClock],
) -> None:
    server, client, clock = rig
    server.send(b"before any", client.address)  # no mapping yet: nothing from the client so far
    assert server.nat_dropped == 1
    await client.send(keepalive_packet(0))
    server.send(b"one", client.address)
    assert await client.receive() == b"one"
    clock.advance(NAT_S)  # silent for exactly the timeout: still open
    server.send(b"two", client.address)
    assert await client.receive() == b"two"
    clock.advance(0.001)  # past it: the mapping is gone
    server.send(b"three", client.address)
    server.send(b"four", client.address)
    assert server.nat_dropped == 3
    await client.send(keepalive_packet(1))  # one keep-alive opens it again
    server.send(b"five", client.address)
    # Loopback keeps order: had "three" or "four" gone out, one of them would come first.
    assert await client.receive() == b"five"
    assert server.from_bot == {"keepalive": 2, "media": 0, "other": 0}


async def test_any_datagram_from_the_client_refreshes_it_and_each_kind_is_counted(
    rig: tuple[VoiceUdpServer, _Client, FakeClock],
) -> None:
    server, client, clock = rig
    rtp = bytes([0x80, 0x78]) + bytes(10) + b"opus payload and tag....."
    for data in (rtp, b"\x01\x00" + bytes(70), b"\xff"):  # RTP, an IP-discovery-sized odd one, garbage
        clock.advance(NAT_S + 1)
        await client.send(data)
        server.send(b"still open", client.address)
        assert await client.receive() == b"still open"
    assert server.from_bot == {"keepalive": 0, "media": 1, "other": 2} and server.nat_dropped == 0


def test_datagram_kinds_and_config() -> None:
    assert datagram_kind(bytes(8)) == "keepalive"
    assert datagram_kind(bytes([0x80, 0x78]) + bytes(30)) == "media"
    assert datagram_kind(bytes([0x80, 200]) + bytes(30)) == "other"  # RTCP sender report
    assert datagram_kind(bytes(74)) == "other"  # IP discovery
    assert EmulatorConfig().nat_timeout_s is None
    with pytest.raises(EmulatorError):
        EmulatorConfig(nat_timeout_s=0)


async def test_without_a_nat_nothing_is_dropped() -> None:
    server = VoiceUdpServer(lambda _d, _a: None, clock=FakeClock())
    assert server.nat_open(("127.0.0.1", 9))
    server.send(b"x", ("127.0.0.1", 9))  # not started: dropped silently, never counted as NAT
    assert server.nat_dropped == 0
