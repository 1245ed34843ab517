"""VoiceReceiver through its public API: real packets, a real worker thread, a real event loop."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import davey
import numpy as np
import pytest

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, AudioFrame
from openab_voice.bench.receive import RtpSender, opus_tone
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock, SystemClock
from openab_voice.discord.wire.events import ReceiveStatsUpdated, SpeakerLeft, SpeakerMapped
from openab_voice.discord.wire.inbox import Inbox
from openab_voice.discord.wire.receiver import ReceiverSettings, VoiceReceiver
from openab_voice.discord.wire.rtp import OPUS_SILENCE
from openab_voice.discord.wire.subscription import FrameSubscription
from openab_voice.discord.wire.transport import XCHACHA, cipher_for
from openab_voice.errors import VoiceError
from openab_voice.testing.emulator.mls import DaveGroup

KEY = bytes(range(32))
CIPHER = cipher_for(XCHACHA, KEY)
SETTINGS = ReceiverSettings(pending_ttl_s=1.0, pending_per_ssrc=8, stats_interval_s=0.5)
ALICE, BOB, BOT = 111_111_111_111, 222_222_222_222, 999_999_999_999
TONE_A = opus_tone(30, frequency=440.0)
TONE_B = opus_tone(30, frequency=660.0)
CHANNEL = 5_555_555_555


@dataclass
class Rig:
    clock: FakeClock
    bus: EventBus
    receiver: VoiceReceiver

    async def advance(self, seconds: float) -> None:
        """Move fake time on and let the ticker enqueue its tick before anything else."""
        self.clock.advance(seconds)
        await asyncio.sleep(0)

    async def settle(self) -> None:
        """Let every jitter buffer time out, then wait until the worker caught up."""
        await self.advance(0.2)
        await self.receiver.sync()

    async def speak(self, senders: list[tuple[RtpSender, list[bytes]]], frames: int) -> None:
        for k in range(frames):
            for sender, tone in senders:
                self.receiver.feed(sender.packet(tone[k % len(tone)]))
            await self.advance(0.020)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    clock = FakeClock()
    bus = EventBus()
    receiver = VoiceReceiver(bus=bus, clock=clock, settings=SETTINGS, session_id="s-1")
    receiver.start(asyncio.get_running_loop())
    receiver.set_transport(XCHACHA, KEY)
    yield Rig(clock, bus, receiver)
    await receiver.aclose()


async def drain(subscription: FrameSubscription) -> list[AudioFrame]:
    subscription.close()
    return [frame async for frame in subscription]


def dominant_hz(frames: list[AudioFrame]) -> float:
    left = np.concatenate([f.samples()[:, 0] for f in frames]).astype(np.float64)
    spectrum = np.abs(np.fft.rfft(left * np.hanning(len(left))))
    return float(np.argmax(spectrum) * 48_000 / len(left))


def by_speaker(frames: list[AudioFrame]) -> dict[str | None, list[AudioFrame]]:
    out: dict[str | None, list[AudioFrame]] = {}
    for f in frames:
        out.setdefault(f.speaker_id, []).append(f)
    return out


async def test_two_ssrcs_are_attributed_to_the_right_users(rig: Rig) -> None:
    frames = rig.receiver.subscribe()
    alice = RtpSender(ssrc=1001, cipher=CIPHER)
    bob = RtpSender(ssrc=1002, cipher=CIPHER, extension=None)
    rig.receiver.map_ssrc(1001, str(ALICE))
    rig.receiver.map_ssrc(1002, str(BOB))
    await rig.speak([(alice, TONE_A), (bob, TONE_B)], 20)
    await rig.settle()

    got = by_speaker(await drain(frames))
    assert set(got) == {str(ALICE), str(BOB)}
    for uid, hz in ((str(ALICE), 440.0), (str(BOB), 660.0)):
        speaker = got[uid]
        assert len(speaker) == 20
        assert [f.frame_id for f in speaker] == list(range(20))
        assert all(len(f.pcm) == DISCORD_FRAME_BYTES and not f.concealed for f in speaker)
        assert abs(dominant_hz(speaker) - hz) < 10
        times = [f.timestamp for f in speaker]
        assert times == sorted(times)
    snap = rig.receiver.snapshot()
    assert snap["speakers"][str(ALICE)]["packets"] == 20
    assert snap["speakers"][str(BOB)]["decoded_frames"] == 20
    assert snap["speakers"][str(BOB)]["decoded_ms"] == pytest.approx(400.0)
    assert snap["unattributed"] == {}


async def test_packets_before_mapping_are_attributed_when_it_arrives(rig: Rig) -> None:
    frames = rig.receiver.subscribe()
    mapped = rig.bus.stream(SpeakerMapped)
    alice = RtpSender(ssrc=1001, cipher=CIPHER)
    await rig.speak([(alice, TONE_A)], 5)
    await rig.receiver.sync()
    assert rig.receiver.snapshot()["speakers"] == {}

    rig.receiver.map_ssrc(1001, str(ALICE))
    rig.receiver.map_ssrc(1001, str(ALICE))  # op 5 repeats on every speaking change
    await rig.speak([(alice, TONE_A)], 5)
    await rig.settle()

    event = await anext(mapped)
    assert isinstance(event, SpeakerMapped)
    assert (event.speaker_id, event.ssrc, event.buffered, event.session_id) == (str(ALICE), 1001, 5, "s-1")
    got = await drain(frames)
    assert [f.frame_id for f in got] == list(range(10))
    assert {f.speaker_id for f in got} == {str(ALICE)}
    assert rig.receiver.snapshot()["speakers"][str(ALICE)]["packets"] == 10
    mapped.close()
    assert [e async for e in mapped] == []  # mapped once, not twice


async def test_never_mapped_ssrc_expires_and_is_counted(rig: Rig) -> None:
    stranger = RtpSender(ssrc=4040, cipher=CIPHER)
    await rig.speak([(stranger, TONE_A)], 3)
    await rig.advance(SETTINGS.pending_ttl_s + 0.5)
    await rig.receiver.sync()
    snap = rig.receiver.snapshot()
    assert snap["unattributed"] == {"unknown_ssrc_expired": 3}
    assert snap["speakers"] == {}

    flood = RtpSender(ssrc=4041, cipher=CIPHER)
    await rig.speak([(flood, TONE_A)], SETTINGS.pending_per_ssrc + 4)
    await rig.receiver.sync()
    assert rig.receiver.snapshot()["unattributed"]["pending_overflow"] == 4


async def test_remove_user_frees_state_and_keeps_counters(rig: Rig) -> None:
    frames = rig.receiver.subscribe()
    left = rig.bus.stream(SpeakerLeft)
    alice = RtpSender(ssrc=1001, cipher=CIPHER)
    rig.receiver.map_ssrc(1001, str(ALICE))
    await rig.speak([(alice, TONE_A)], 6)
    rig.receiver.remove_user(str(ALICE))  # frames still in the jitter buffer are played out
    await rig.receiver.sync()
    assert len(await drain(frames)) == 6
    event = await anext(left)
    assert isinstance(event, SpeakerLeft) and (event.speaker_id, event.ssrc) == (str(ALICE), 1001)

    later = rig.receiver.subscribe()
    await rig.speak([(alice, TONE_A)], 3)  # same SSRC, no longer attributed
    await rig.advance(SETTINGS.pending_ttl_s + 0.5)
    await rig.receiver.sync()
    snap = rig.receiver.snapshot()
    assert snap["speakers"][str(ALICE)]["packets"] == 6
    assert snap["unattributed"]["unknown_ssrc_expired"] == 3
    assert await drain(later) == []

    again = rig.receiver.subscribe()  # re-mapped: a fresh decoder, frame ids keep increasing
    rig.receiver.map_ssrc(1001, str(ALICE))
    await rig.speak([(alice, TONE_A)], 2)
    await rig.settle()
    assert [f.frame_id for f in await drain(again)] == [6, 7]


async def test_bad_input_never_crashes_and_is_counted_by_reason(rig: Rig) -> None:
    frames = rig.receiver.subscribe()
    group = DaveGroup(CHANNEL, [ALICE, BOT])
    rig.receiver.set_dave_source(lambda: group.sessions[BOT])
    rig.receiver.map_ssrc(1001, str(ALICE))
    alice = RtpSender(ssrc=1001, cipher=CIPHER, dave=group.sessions[ALICE])
    good = alice.packet(TONE_A[0])

    rng = random.Random(7)
    noise = [rng.randbytes(rng.randint(16, 300)) for _ in range(200)]
    wrong_key = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, bytes(32))).packet(TONE_A[0])
    outsider = DaveGroup(CHANNEL, [ALICE, 12345])  # Alice's frame under keys the bot never had
    not_for_us = RtpSender(ssrc=1001, cipher=CIPHER, dave=outsider.sessions[ALICE]).packet(TONE_A[1])
    rtcp = b"\x80\xc9\x00\x07" + rng.randbytes(28)
    bad = [
        *noise,
        good[:13] + b"\xff" * 3,  # the header claims more than the packet holds
        good[:20],
        wrong_key,
        rtcp,
        bytes(1501),
        b"\x00" * 8,
        b"",
        not_for_us,
        b"\x00\x02\x00\x46" + bytes(70),  # an IP discovery reply on the same socket
    ]
    for data in bad:
        rig.receiver.feed(data)
    rig.receiver.feed(good)  # the worker is still alive after all that
    await rig.settle()

    snap = rig.receiver.snapshot()
    unattributed = snap["unattributed"]
    assert unattributed["rtcp"] >= 1 and unattributed["oversize"] == 1 and unattributed["keepalive"] == 2
    assert unattributed["rtp_truncated"] >= 2 and unattributed["transport_decrypt_failed"] >= 2
    assert unattributed["rtp_bad_version"] > 0 and unattributed["ip_discovery"] == 1
    assert "internal_error" not in unattributed
    alice_stats = snap["speakers"][str(ALICE)]
    assert alice_stats["dropped"] == {"dave_decrypt_failed": 1}
    assert sum(unattributed.values()) + alice_stats["packets"] == len(bad) + 1
    got = await drain(frames)
    assert len(got) == 1 and got[0].speaker_id == str(ALICE)


async def test_no_key_and_full_inbox_are_counted() -> None:
    clock = FakeClock()
    receiver = VoiceReceiver(bus=EventBus(), clock=clock, settings=ReceiverSettings(inbox_packets=5))
    sender = RtpSender(ssrc=1, cipher=CIPHER)
    for _ in range(20):  # before start(): nothing drains the inbox yet
        receiver.feed(sender.packet(TONE_A[0]))
    receiver.start(asyncio.get_running_loop())
    await receiver.sync()
    assert receiver.snapshot()["unattributed"] == {"no_transport_key": 5, "queue_full": 15}
    with pytest.raises(VoiceError):
        receiver.set_transport("xsalsa20_poly1305", KEY)
    await receiver.aclose()
    await receiver.aclose()  # idempotent
    receiver.feed(b"late")  # never raises, even after close


async def test_dave_group_audio_decrypts_for_the_admitted_bot(rig: Rig) -> None:
    group = DaveGroup(CHANNEL, [ALICE, BOB])
    bot = davey.DaveSession(1, BOT, CHANNEL)
    bot.set_external_sender(group.external_sender.serialized())
    _, welcome = group.admit(bot.get_serialized_key_package())
    bot.process_welcome(welcome)
    assert bot.voice_privacy_code == group.privacy_code

    frames = rig.receiver.subscribe()
    rig.receiver.set_dave_source(lambda: bot)
    rig.receiver.map_ssrc(1001, str(ALICE))
    rig.receiver.map_ssrc(1002, str(BOB))
    alice = RtpSender(ssrc=1001, cipher=CIPHER, dave=group.sessions[ALICE])
    bob = RtpSender(ssrc=1002, cipher=CIPHER, dave=group.sessions[BOB])
    await rig.speak([(alice, TONE_A), (bob, TONE_B)], 15)
    silent = RtpSender(ssrc=1001, cipher=CIPHER, sequence=15, timestamp=15 * 960)  # clients skip DAVE here
    for _ in range(3):
        rig.receiver.feed(silent.packet(OPUS_SILENCE))
        await rig.advance(0.020)
    await rig.settle()

    got = by_speaker(await drain(frames))
    assert len(got[str(ALICE)]) == 18 and len(got[str(BOB)]) == 15
    assert abs(dominant_hz(got[str(ALICE)][:15]) - 440) < 10
    assert abs(dominant_hz(got[str(BOB)]) - 660) < 10
    loudness = [int(np.abs(f.samples()).max()) for f in got[str(ALICE)]]
    assert max(loudness[:15]) > 5000 and loudness[-1] < 50  # the decoder fades out into silence
    snap = rig.receiver.snapshot()
    assert all(s["dropped"] == {} for s in snap["speakers"].values())


async def test_periodic_stats_events_and_bounded_subscribers(rig: Rig) -> None:
    stats = rig.bus.stream(ReceiveStatsUpdated)
    slow = rig.receiver.subscribe(maxsize=2)
    alice = RtpSender(ssrc=1001, cipher=CIPHER)
    rig.receiver.map_ssrc(1001, str(ALICE))
    await rig.speak([(alice, TONE_A)], 5)
    await rig.advance(SETTINGS.stats_interval_s)
    await rig.settle()
    event: Event = await anext(stats)
    assert isinstance(event, ReceiveStatsUpdated) and event.session_id == "s-1"
    assert str(ALICE) in event.speakers and event.speakers[str(ALICE)]["packets"] == 5
    assert slow.dropped == 3 and len(await drain(slow)) == 2


async def test_frames_before_the_bot_joined_the_dave_group_are_dropped(rig: Rig) -> None:
    group = DaveGroup(CHANNEL, [ALICE, BOB])
    pending_bot = davey.DaveSession(1, BOT, CHANNEL)  # key package sent, no welcome yet
    rig.receiver.set_dave_source(lambda: pending_bot)
    rig.receiver.map_ssrc(1001, str(ALICE))
    await rig.speak([(RtpSender(ssrc=1001, cipher=CIPHER, dave=group.sessions[ALICE]), TONE_A)], 4)
    await rig.settle()
    await rig.advance(SETTINGS.dave_hold_s)  # held for the session to catch up; it never does
    await rig.receiver.sync()
    assert rig.receiver.snapshot()["speakers"][str(ALICE)]["dropped"] == {"dave_not_ready": 4}


async def test_real_clock_ticker_releases_a_short_talk_spurt() -> None:
    receiver = VoiceReceiver(bus=EventBus(), clock=SystemClock())
    frames = receiver.subscribe()
    receiver.start(asyncio.get_running_loop())
    receiver.set_transport(XCHACHA, KEY)
    receiver.map_ssrc(7, str(ALICE))
    sender = RtpSender(ssrc=7, cipher=CIPHER)
    for k in range(2):  # fewer than the jitter depth: only the timeout can release them
        receiver.feed(sender.packet(TONE_A[k]))
    got = [await anext(frames), await anext(frames)]
    await receiver.aclose()
    assert [f.frame_id for f in got] == [0, 1] and got[1].timestamp > got[0].timestamp
    assert [f async for f in frames] == []


async def test_close_without_start_is_quick_and_idempotent() -> None:
    receiver = VoiceReceiver(bus=EventBus(), clock=FakeClock())
    frames = receiver.subscribe()
    await receiver.aclose()
    await receiver.aclose()
    assert [f async for f in frames] == []
    assert receiver.snapshot() == {"speakers": {}, "unattributed": {}, "udp_sent": {}, "active": []}


def test_inbox_bounds_packets_but_never_control_messages() -> None:
    inbox: Inbox[str] = Inbox(2)
    assert inbox.offer("p1") and inbox.offer("p2")
    assert not inbox.offer("p3")  # full: refused, counted, never blocks
    inbox.put("map")  # control still goes in, after the packets
    assert inbox.take_all(0) == ["p1", "p2", "map"]
    assert inbox.offer("p4") and inbox.refused == 1
    inbox.close()
    assert not inbox.offer("p5")
    inbox.put("ignored")
    assert inbox.take_all() == ["p4"] and inbox.take_all() == []


async def test_watermark_follows_the_frames_it_vouches_for_and_advances_without_the_loop(rig: Rig) -> None:
    """Under load the loop's ticker runs late: packets' own arrival times advance the watermark."""
    log: list[tuple[str, float]] = []  # appended on the worker thread only
    rig.receiver.add_frame_sink(lambda f: log.append(("frame", f.timestamp)))
    rig.receiver.add_watermark_sink(lambda t: log.append(("watermark", t)))
    alice = RtpSender(ssrc=1001, cipher=CIPHER)
    rig.receiver.map_ssrc(1001, str(ALICE))
    # Feed 40 packets 20 ms apart without ever yielding to the event loop: its ticker cannot run.
    for k in range(40):
        rig.receiver.feed(alice.packet(TONE_A[k % len(TONE_A)]))
        rig.clock.advance(0.020)
    last_arrival = rig.clock.monotonic() - 0.020
    deadline = time.monotonic() + 5.0
    # In-order packets leave the jitter buffer at once: the watermark is the last arrival itself.
    while not any(kind == "watermark" and t >= last_arrival - 0.010 - 1e-9 for kind, t in list(log)):
        assert time.monotonic() < deadline, "the watermark did not advance with the packets"
        # real time: the loop's thread is held while the receiver's worker thread works
        time.sleep(0.002)  # noqa: ASYNC251 - holding the loop is the point: no ticker may help
    await rig.receiver.sync()
    marks = [i for i, (kind, _) in enumerate(log) if kind == "watermark"]
    assert marks  # one per worker batch (the worker took the 40 packets in few batches)
    for i in marks:  # nothing that starts before a watermark arrives after it
        t = log[i][1]
        assert all(ts >= t for kind, ts in log[i + 1 :] if kind == "frame")
    values = [log[i][1] for i in marks]
    assert values == sorted(values)
