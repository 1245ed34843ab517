"""Datagram arrival times from the kernel's receive stamp (``discord/wire/arrival.py``), on real sockets.

The reader here gets to its datagrams late on purpose (it reads them only after all were sent), the
way discord.py's reader thread does when the CPU or the GIL holds it up.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from openab_voice.bench.receive import RtpSender, opus_tone
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.arrival import ArrivalStamps
from openab_voice.discord.wire.receiver import VoiceReceiver
from openab_voice.discord.wire.transport import XCHACHA, cipher_for

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIOCGSTAMPNS is Linux's")
KEY = bytes(range(32))
GAP_S = 0.030  # at least this long between two sends (a sleep never returns early)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.connect(receiver.getsockname())
    yield receiver, sender
    receiver.close()
    sender.close()


def wait_until_stamping(clock: FakeClock, receiver: socket.socket, sender: socket.socket) -> None:
    """The kernel switches recording on lazily (a static key flipped by a deferred work item): until it
    does, a datagram reads back as arriving "now". Probe until one reads back older than that."""
    probe = ArrivalStamps(clock, lambda: receiver)
    for _ in range(200):
        sender.send(b"probe")
        time.sleep(0.005)  # real time: the probe must be older than 4 ms when it is read
        receiver.recv(64)
        if probe.arrival() < clock.monotonic() - 0.004:  # the fake clock stands still
            return
    raise AssertionError("the kernel never stamped a datagram")


def send_spaced(sender: socket.socket, datagrams: list[bytes]) -> None:
    for i, datagram in enumerate(datagrams):
        if i:
            time.sleep(GAP_S)  # real time: the kernel stamps the real gaps between datagrams
        sender.send(datagram)


@linux_only
def test_a_late_reader_learns_when_each_datagram_arrived(pair: tuple[socket.socket, socket.socket]) -> None:
    receiver, sender = pair
    clock = FakeClock()  # stands still: every arrival is now minus the datagram's age
    stamps = ArrivalStamps(clock, lambda: receiver)
    wait_until_stamping(clock, receiver, sender)
    send_spaced(sender, [b"a", b"b", b"c"])
    arrivals = []
    for _ in range(3):
        receiver.recv(64)
        arrivals.append(stamps.arrival())
    # Read back to back, they still lie at least GAP_S apart, all before the moment they were read.
    assert arrivals[0] < arrivals[1] < arrivals[2] < clock.monotonic()
    assert arrivals[1] - arrivals[0] >= GAP_S - 0.001 and arrivals[2] - arrivals[1] >= GAP_S - 0.001
    assert stamps.kernel == 3


def test_without_a_socket_or_with_a_closed_one_the_arrival_is_now(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    receiver, sender = pair
    clock = FakeClock()
    assert ArrivalStamps(clock, lambda: None).arrival() == clock.monotonic()
    sender.send(b"x")
    receiver.recv(64)
    receiver.close()
    stamps = ArrivalStamps(clock, lambda: receiver)
    assert stamps.arrival() == clock.monotonic()
    assert (stamps.kernel, stamps.read) == (0, 1)


@linux_only
async def test_a_talk_spurt_the_reader_got_to_late_is_not_trimmed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    receiver_socket, sender_socket = pair
    tone = opus_tone(12)
    rtp = RtpSender(ssrc=7, cipher=cipher_for(XCHACHA, KEY))
    send_spaced(sender_socket, [rtp.packet(t) for t in tone])
    datagrams = [receiver_socket.recv(2048) for _ in tone]  # the reader gets to them late
    trimmed = {}
    for kernel in (False, True):
        clock = FakeClock()
        receiver = VoiceReceiver(bus=EventBus(), clock=clock)
        receiver.start(asyncio.get_running_loop())
        receiver.set_transport(XCHACHA, KEY)
        receiver.map_ssrc(7, "alice")
        if kernel:
            rtp = RtpSender(ssrc=7, cipher=cipher_for(XCHACHA, KEY))
            receiver.set_socket_source(lambda: receiver_socket)
            wait_until_stamping(clock, receiver_socket, sender_socket)
            send_spaced(sender_socket, [rtp.packet(t) for t in tone])
            datagrams = []
            for _ in tone:
                datagrams.append(receiver_socket.recv(2048))
                receiver.feed(datagrams[-1])  # right after recv, as discord.py's reader calls it
        else:
            for datagram in datagrams:  # stamped all alike: when the reader got to them
                receiver.feed(datagram)
        clock.advance(1.0)
        await asyncio.sleep(0)
        await receiver.sync()
        trimmed[kernel] = receiver.snapshot()["speakers"]["alice"]["trimmed_ms"]
        await receiver.aclose()
    # Read-time stamps put the spurt's first frames late and the burst behind them early: the
    # anchor moved back frame by frame and all but about one frame of every step was cut.
    assert trimmed[False] >= (len(tone) - 2) * 20 - 1
    assert trimmed[True] == 0.0
