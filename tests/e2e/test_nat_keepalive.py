"""A receive-only bot behind a NAT, end to end: the real bot (discord.py, our voice client, receiver)
joined to the loopback emulator with ``nat_timeout_s``. discord.py sends nothing on UDP while it does
not play, so without our keep-alive the NAT closes and every datagram of the next utterance is dropped
before the bot; with it, the utterance is heard, also after a RESUME (4015, same socket) and a rejoin
(4006, a new socket and voice client).

Time is real (discord.py's handshake runs on the loop's clock), so both times are scaled down by the
same factor: a 1 s NAT timeout against a 1/6 s keep-alive is Discord's 30 s against our 5 s default.
The waits are on the datagrams themselves: the NAT's drop count is read after the utterance was sent
(deterministic), and the receiver is polled until it has every packet that went out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import numpy as np
import pytest

from openab_voice.clock import wait_for
from openab_voice.config import load_settings
from openab_voice.discord.wire.events import VoiceGap
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.emulator.rtp_stream import SendReport
from openab_voice.testing.harness import BotOnEmulator

pytestmark = pytest.mark.e2e

ALICE = 1301
NAT_S = 1.0
KEEPALIVE_S = NAT_S / 6  # our 5 s default against a 30 s NAT, scaled
SILENCE_S = 1.6 * NAT_S  # longer than the NAT's timeout: only the keep-alive keeps it open
TONE = (
    (np.sin(2 * np.pi * 440 * np.arange(int(48_000 * 0.4)) / 48_000) * 8000)
    .astype(np.int16)
    .repeat(2)
    .tobytes()
)  # 0.4 s, 48 kHz stereo


@asynccontextmanager
async def bot_behind_nat(keepalive_s: float) -> AsyncIterator[BotOnEmulator]:
    settings = load_settings({}, udp_keepalive_s=keepalive_s)
    config = EmulatorConfig(dave=False, seed=31, nat_timeout_s=NAT_S)
    async with BotOnEmulator(settings, config, users={ALICE: "alice"}) as h:
        yield h


def heard_packets(h: BotOnEmulator) -> int:
    return int(h.session.receiver.snapshot()["speakers"].get(str(ALICE), {}).get("packets", 0))


async def speak_after_silence(h: BotOnEmulator) -> SendReport:
    """Nobody talks and the bot does not play for ``SILENCE_S``; then alice speaks."""
    await h.clock.sleep(SILENCE_S)  # real time: the silence outlasts the emulator's NAT timeout
    report = await h.emulator.speaker(ALICE).say(TONE)
    assert report.completed and report.sent > 0
    return report


async def all_heard(h: BotOnEmulator, expected: int) -> None:
    """Until the receiver has attributed ``expected`` packets to alice (the reader thread feeds it)."""

    async def poll() -> None:
        while heard_packets(h) < expected:
            await h.session.receiver.sync()
            await h.clock.sleep(0.02)  # real time: the reader thread feeds the receiver; polled

    try:
        await wait_for(h.clock, 5.0, poll())
    except TimeoutError:
        pytest.fail(f"the bot heard {heard_packets(h)} of {expected} packets")


async def test_keepalives_hold_the_nat_open_through_silence_a_resume_and_a_rejoin() -> None:
    async with bot_behind_nat(KEEPALIVE_S) as h:
        gaps: asyncio.Queue[VoiceGap] = asyncio.Queue()
        h.bus.subscribe(VoiceGap, gaps.put_nowait)
        expected = 0

        async def silence_then_heard(what: str) -> None:
            nonlocal expected
            dropped = h.emulator.udp_stats()["nat_dropped"]
            report = await speak_after_silence(h)
            assert h.emulator.udp_stats()["nat_dropped"] == dropped, f"the NAT closed {what}"
            expected += report.sent
            await all_heard(h, expected)

        await silence_then_heard("after the join")
        await h.emulator.close_voice(4015)  # RESUME: the same socket, the same keep-alive
        gap = await wait_for(h.clock, 10.0, gaps.get())
        assert (gap.recovery, gap.recovered) == ("resume", True)
        await silence_then_heard("after a RESUME")
        before_rejoin = h.emulator.voice_session()
        await h.emulator.close_voice(4006)  # a rejoin: a new voice client, socket and keep-alive
        gap = await wait_for(h.clock, 10.0, gaps.get())
        assert (gap.recovery, gap.recovered) == ("rejoin", True)
        again = await h.emulator.wait_voice_ready()
        assert before_rejoin is not None and again.bot_ssrc != before_rejoin.bot_ssrc
        await silence_then_heard("after a rejoin")

        udp = h.emulator.udp_stats()
        # At least one per keep-alive interval of the call; the bot never played, so no media.
        assert udp["udp_from_bot"]["keepalive"] >= 3 * SILENCE_S / KEEPALIVE_S
        assert udp["udp_from_bot"]["media"] == 0 and udp["nat_dropped"] == 0
        sent = h.session.receiver.snapshot()["udp_sent"]
        assert sent["keepalive"] > 0 and set(sent) == {"keepalive"}, sent


async def test_without_keepalives_the_nat_drops_the_utterance_after_a_silence() -> None:
    """The same call with the keep-alive off: what the test above guards against."""
    async with bot_behind_nat(0.0) as h:
        report = await speak_after_silence(h)
        udp = h.emulator.udp_stats()
        assert udp["nat_dropped"] >= report.sent  # every packet of the utterance, and its op-less kin
        assert udp["udp_from_bot"]["keepalive"] == 0
        await h.session.receiver.sync()
        assert heard_packets(h) == 0
        assert h.session.receiver.snapshot()["udp_sent"] == {}
