"""The emulator's RTP sender: timestamps follow the sender's sample clock, pauses included."""

from __future__ import annotations

import asyncio

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.clock import FakeClock
from openab_voice.discord.transport import XCHACHA, cipher_for, open_packet
from openab_voice.testing.emulator.echo import EchoPath, EchoRenderer, RoomAudio
from openab_voice.testing.emulator.impairments import ImpairmentPlanner, Impairments
from openab_voice.testing.emulator.rtp_stream import RtpStream, StreamOptions
from openab_voice.testing.emulator.voice_connection import VoiceConnection

KEY = bytes(range(32))


async def _run(clock: FakeClock, work: asyncio.Future[object]) -> None:
    """Advance the fake clock 1 ms at a time until ``work`` is done."""
    while not work.done():
        for _ in range(5):
            await asyncio.sleep(0)
        clock.advance(0.001)
    work.result()


async def test_rtp_timestamps_count_the_pause_between_utterances() -> None:
    clock = FakeClock()
    sent: list[tuple[float, bytes]] = []
    stream = RtpStream(
        clock=clock, ssrc=7, rtp_start=(0, 0), send=lambda packet, _: sent.append((clock.monotonic(), packet))
    )
    conn = VoiceConnection(None)
    conn.mode, conn.cipher, conn.bot_addr = XCHACHA, cipher_for(XCHACHA, KEY), ("127.0.0.1", 9)
    # Mixing an (empty) echo encodes just in time on the clock: no worker thread, fully deterministic.
    echo = EchoRenderer(RoomAudio(), EchoPath())
    planner = ImpairmentPlanner(Impairments(), seed=0)
    options = StreamOptions(speaking_user=None)
    pcm = bytes(3 * DISCORD_FRAME_BYTES)

    await _run(clock, asyncio.ensure_future(stream.stream(conn, pcm, planner, options, echo)))
    first_of_second = len(sent)
    clock.advance(0.405)  # a pause that is not a whole number of frames
    await _run(clock, asyncio.ensure_future(stream.stream(conn, pcm, planner, options, echo)))

    (sent_a, packet_a), (sent_b, packet_b) = sent[0], sent[first_of_second]
    ts_a = open_packet(conn.cipher, packet_a)[0].timestamp
    ts_b = open_packet(conn.cipher, packet_b)[0].timestamp
    # The RTP clock advanced by the time that passed between the two first packets (within the fake
    # clock's 1 ms step); counting whole frames from the last send overshot this pause by 15 ms.
    assert abs((ts_b - ts_a) / 48_000 - (sent_b - sent_a)) <= 0.001 + 1e-9
