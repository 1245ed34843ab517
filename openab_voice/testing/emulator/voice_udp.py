"""The voice server's UDP socket: IP discovery, the bot's RTP in, fake speakers' RTP out.

IP discovery (discord.py ``DiscordVoiceWebSocket.discover_ip``): the client sends 74 bytes
``>H 1, >H 70, >I ssrc, 66 zero bytes``; the reply is type 2 with the client's address as
NUL-terminated ASCII from byte 8 and its port as ``>H`` in the last two bytes.

A NAT in front of the bot (``nat_timeout_s``): a mapping stays open while the bot's address has sent
something within the timeout, so the server's datagrams to an address silent for longer are dropped
(and counted) until it sends again. The NAT sits at the bot's edge: a datagram a blackout loses further
on still refreshes it. Kinds of datagrams from the bot are counted: ``keepalive`` (8 bytes, as
``@discordjs/voice`` and our bot send), ``media`` (RTP) and ``other`` (IP discovery, RTCP, garbage).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Final

from openab_voice.clock import Clock, SystemClock
from openab_voice.discord.wire.rtp import is_rtcp

log = logging.getLogger(__name__)

Address = tuple[str, int]
# (datagram, sender) -> None; called for every datagram that is not IP discovery.
MediaHandler = Callable[[bytes, Address], None]

_DISCOVERY_LEN = 74
_DISCOVERY_REQUEST = 1
_DISCOVERY_REPLY = 2
KEEPALIVE_LEN: Final = 8
_RTP_HEADER_LEN = 12


def datagram_kind(data: bytes) -> str:
    """``keepalive``, ``media`` (RTP version 2, not RTCP) or ``other``."""
    if len(data) == KEEPALIVE_LEN:
        return "keepalive"
    if len(data) >= _RTP_HEADER_LEN and data[0] >> 6 == 2 and not is_rtcp(data):
        return "media"
    return "other"


def discovery_reply(ssrc: int, address: Address) -> bytes:
    """The 74-byte IP discovery answer for ``address``."""
    ip = address[0].encode("ascii")[:63]
    packet = bytearray(_DISCOVERY_LEN)
    struct.pack_into(">HHI", packet, 0, _DISCOVERY_REPLY, 70, ssrc)
    packet[8 : 8 + len(ip)] = ip
    struct.pack_into(">H", packet, _DISCOVERY_LEN - 2, address[1])
    return bytes(packet)


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, owner: VoiceUdpServer) -> None:
        self._owner = owner

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        host, port = addr[0], addr[1]
        if isinstance(host, str) and isinstance(port, int):
            self._owner._received(data, (host, port))

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable after the bot closed its socket: harmless on loopback.
        log.debug("voice UDP error: %s", exc)


class VoiceUdpServer:
    """One UDP socket on 127.0.0.1.

    Args:
        on_media: called with every non-discovery datagram (RTP, RTCP, keep-alives, garbage).
        clock: the NAT's clock (the system clock by default).
        nat_timeout_s: model a NAT in front of the bot with this idle timeout (None: no NAT).

    Attributes:
        discovered: the last address that sent IP discovery, per SSRC.
        rtcp_packets: RTCP datagrams received (counted, ignored).
        blackout: while True, every datagram either way is dropped (a network outage).
        blackout_dropped: datagrams dropped by blackouts, ``{"in": n, "out": n}``.
        from_bot: datagrams received, by :func:`datagram_kind`.
        nat_dropped: datagrams to the bot dropped because its NAT mapping had expired.
    """

    def __init__(
        self, on_media: MediaHandler, *, clock: Clock | None = None, nat_timeout_s: float | None = None
    ) -> None:
        self._on_media = on_media
        self._clock: Clock = clock or SystemClock()
        self._nat_timeout_s = nat_timeout_s
        self._heard: dict[Address, float] = {}  # the last datagram from each address
        self._transport: asyncio.DatagramTransport | None = None
        self.discovered: dict[int, Address] = {}
        self.rtcp_packets = 0
        self.blackout = False
        self.blackout_dropped = {"in": 0, "out": 0}
        self.from_bot = {"keepalive": 0, "media": 0, "other": 0}
        self.nat_dropped = 0
        self.port = 0

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(self), local_addr=("127.0.0.1", 0)
        )
        self._transport = transport
        self.port = int(transport.get_extra_info("sockname")[1])
        return self.port

    def send(self, data: bytes, address: Address) -> None:
        """Send one datagram from the voice server's port (dropped silently once closed)."""
        if self.blackout:
            self.blackout_dropped["out"] += 1
            return
        if not self.nat_open(address):
            self.nat_dropped += 1
            return
        if self._transport is not None and not self._transport.is_closing():
            self._transport.sendto(data, address)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def nat_open(self, address: Address) -> bool:
        """Whether the bot's NAT lets a datagram to ``address`` through now: always without a NAT;
        otherwise only while ``address`` has sent something within ``nat_timeout_s``."""
        if self._nat_timeout_s is None:
            return True
        heard = self._heard.get(address)
        return heard is not None and self._clock.monotonic() - heard <= self._nat_timeout_s

    def _received(self, data: bytes, addr: Address) -> None:
        self._heard[addr] = self._clock.monotonic()  # the bot's NAT saw it leave, whatever follows
        if self.blackout:
            self.blackout_dropped["in"] += 1
            return
        self.from_bot[datagram_kind(data)] += 1
        if len(data) == _DISCOVERY_LEN and struct.unpack_from(">H", data)[0] == _DISCOVERY_REQUEST:
            ssrc = struct.unpack_from(">I", data, 4)[0]
            self.discovered[ssrc] = addr
            self.send(discovery_reply(ssrc, addr), addr)
            return
        if is_rtcp(data):
            self.rtcp_packets += 1
            return
        self._on_media(data, addr)
