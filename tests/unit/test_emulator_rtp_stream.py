"""The emulator's RTP sender: timestamps follow the sender's sample clock, pauses included; clips
encoded ahead are sent as encoded."""

from __future__ import annotations

import asyncio

import numpy as np
from discord.opus import Decoder

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, DISCORD_FRAME_SAMPLES
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.transport import XCHACHA, cipher_for, open_packet
from openab_voice.testing.emulator.echo import EchoPath, EchoRenderer, RoomAudio
from openab_voice.testing.emulator.impairments import ImpairmentPlanner, Impairments
from openab_voice.testing.emulator.rtp_stream import (
    SILENCE_FRAMES,
    RtpStream,
    StreamOptions,
    encode_speech,
    prepare_speech,
)
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


async def test_a_prepared_clip_is_sent_as_encoded_ahead_and_decodes_to_its_audio() -> None:
    clock = FakeClock()
    sent: list[bytes] = []
    stream = RtpStream(clock=clock, ssrc=9, rtp_start=(0, 0), send=lambda packet, _: sent.append(packet))
    conn = VoiceConnection(None)
    conn.mode, conn.cipher, conn.bot_addr = XCHACHA, cipher_for(XCHACHA, KEY), ("127.0.0.1", 9)
    t = np.arange(10 * DISCORD_FRAME_SAMPLES) / 48_000
    tone = (np.sin(2 * np.pi * 440.0 * t) * 8000).astype("<i2")
    pcm = np.repeat(tone, 2).tobytes()  # stereo
    prepare_speech(pcm)
    hits = encode_speech.cache_info().hits
    planner = ImpairmentPlanner(Impairments(), seed=0)
    await _run(
        clock, asyncio.ensure_future(stream.stream(conn, pcm, planner, StreamOptions(speaking_user=None)))
    )
    assert encode_speech.cache_info().hits == hits + 1  # sent from the frames encoded ahead
    payloads = [open_packet(conn.cipher, packet)[1] for packet in sent]
    assert payloads[:10] == list(encode_speech(pcm)) and len(payloads) == 10 + SILENCE_FRAMES
    decoder = Decoder()
    heard = np.frombuffer(b"".join(decoder.decode(p) for p in payloads[:10]), dtype="<i2")[::2]
    assert np.sqrt(np.mean(heard[4800:].astype(np.float64) ** 2)) > 3000  # the tone, not silence
