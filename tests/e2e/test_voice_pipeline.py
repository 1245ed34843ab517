"""End to end: the real bot (discord.py + our receiver/playback) against the loopback emulator."""

from __future__ import annotations

import asyncio
import os
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from openab_voice.config import load_settings
from openab_voice.discord.wire.events import SpeakerLeft
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator
from tests.e2e.audio_match import HOP, best_correlation, energy, envelope
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

ASSETS = Path(str(resources.files("openab_voice.testing") / "assets"))
ALICE, BOB = 1001, 1002
FRAMES_PER_S = 50


@pytest.fixture(scope="module")
def clips() -> dict[int, bytes]:
    return {ALICE: load_wav_48k_stereo(ASSETS / "alice.wav"), BOB: load_wav_48k_stereo(ASSETS / "bob.wav")}


def settings(playback: bool = False):
    return load_settings({}, playback_enabled=playback)


def tone(freq: float, seconds: float, amplitude: float = 0.3) -> bytes:
    t = np.arange(int(48_000 * seconds)) / 48_000
    mono = (np.sin(2 * np.pi * freq * t) * amplitude * 32767).astype("<i2")
    return np.repeat(mono[:, None], 2, axis=1).tobytes()


async def drain(h: BotOnEmulator, seconds: float = 0.4) -> None:
    """Let the jitter buffers flush the tail of the last talk spurt."""
    await asyncio.sleep(seconds)  # real time: the jitter buffers time out on the real clock


@pytest.mark.parametrize("dave", [False, True], ids=["dave-off", "dave-on"])
async def test_two_speakers_are_heard_separately(dave: bool, clips: dict[int, bytes]) -> None:
    starts = {ALICE: 0.2, BOB: 0.9}  # overlapping speech: separation must come from SSRCs, not timing
    async with BotOnEmulator(
        settings(), EmulatorConfig(dave=dave, seed=1), users={ALICE: "alice", BOB: "bob"}
    ) as h:
        if dave:
            assert h.session.dave_enabled and h.session.privacy_code
        else:
            assert not h.session.dave_enabled and h.session.privacy_code is None

        async def speak(uid: int) -> None:
            await h.at(starts[uid])
            # bob's first 10 packets go out before his SSRC is announced: they must be attributed, not guessed
            await h.emulator.speaker(uid).say(clips[uid], send_before_speaking=10 if uid == BOB else 0)

        await asyncio.gather(speak(ALICE), speak(BOB))
        await drain(h)
        snap = h.session.receiver.snapshot()
        tracks = {uid: envelope(h.recorder.track(str(uid))) for uid in (ALICE, BOB)}

    sent = {uid: envelope(clips[uid]) for uid in (ALICE, BOB)}
    for uid, other in ((ALICE, BOB), (BOB, ALICE)):
        own, _ = best_correlation(tracks[uid], sent[uid], round(starts[uid] * FRAMES_PER_S))
        cross, _ = best_correlation(tracks[uid], sent[other], round(starts[other] * FRAMES_PER_S))
        assert own >= 0.9, f"{uid}: heard audio does not match what was sent (r={own:.3f})"
        assert cross < 0.5, f"{uid}: heard audio resembles the other speaker (r={cross:.3f})"
        stats = snap["speakers"][str(uid)]
        expected_packets = len(clips[uid]) // (HOP * 4) + 5  # + 5 trailing silence frames
        assert stats["packets"] >= expected_packets - 1
        assert stats["dropped"].get("dave_decrypt_failed", 0) == 0
    assert "unknown_ssrc_expired" not in snap["unattributed"]
    assert "pending_overflow" not in snap["unattributed"]


async def test_loss_and_reordering_are_concealed(clips: dict[int, bytes]) -> None:
    config = EmulatorConfig(dave=True, loss=0.03, reorder=0.03, seed=7)
    async with BotOnEmulator(settings(), config, users={ALICE: "alice"}) as h:
        await h.at(0.2)
        report = await h.emulator.speaker(ALICE).say(clips[ALICE])
        await drain(h)
        stats = h.session.receiver.snapshot()["speakers"][str(ALICE)]
        arrivals = h.session.receiver.arrival_sources()
        track = envelope(h.recorder.track(str(ALICE)))
    assert report.dropped_by_impairment > 0 and report.reordered > 0
    assert 0 < stats["concealed"] <= stats["lost"]
    # every packet the emulator dropped is detected as lost; reordering within the jitter depth loses nothing
    assert report.dropped_by_impairment <= stats["lost"] <= report.dropped_by_impairment + report.reordered
    corr, _ = best_correlation(track, envelope(clips[ALICE]), round(0.2 * FRAMES_PER_S))
    # It failed once in CI (r=0.813, not reproduced idle or with four cores busy): say what the
    # buffer did (cuts, drops, concealment) and where arrival times came from.
    assert corr >= 0.9, f"r={corr:.3f} receive={stats} sent={report} arrivals={arrivals}"


async def test_bot_playback_is_decoded_by_the_emulator_and_interrupt_stops_within_a_frame() -> None:
    async with BotOnEmulator(settings(playback=True), EmulatorConfig(dave=True), users={ALICE: "alice"}) as h:
        playback = h.session.playback
        assert playback is not None
        result = await playback.play(tone(440.0, 1.0))
        assert result.played_ms == pytest.approx(1000, abs=20) and not result.interrupted
        await until(  # the emulator decoded all of it (a frame may still be on its way at the return)
            lambda: len(h.emulator.bot_audio.pcm()) / 192 >= result.played_ms - 20,
            lambda: (
                f"{result.played_ms} ms decoded by the emulator; {len(h.emulator.bot_audio.pcm()) / 192} ms so far"
            ),
        )
        heard = np.frombuffer(h.emulator.bot_audio.pcm(), dtype="<i2").reshape(-1, 2)[:, 0].astype(float)
        assert len(heard) / 48 == pytest.approx(1000, abs=120)  # ms, plus trailing silence frames
        spectrum = np.abs(np.fft.rfft(heard))
        assert np.fft.rfftfreq(len(heard), 1 / 48_000)[spectrum.argmax()] == pytest.approx(440, abs=5)

        # Interrupt a long utterance half a second in.
        uid = playback.begin()
        writer = asyncio.create_task(playback.write(uid, tone(660.0, 3.0)))
        await asyncio.sleep(0.5)  # real time: the interrupt comes half a second into the playback
        before = len(h.emulator.bot_audio.pcm())
        position = playback.interrupt()
        await asyncio.sleep(0.3)  # real time: a window for any sound after interrupt() to reach Discord
        await writer
        after = np.frombuffer(h.emulator.bot_audio.pcm()[before:], dtype="<i2").reshape(-1, 2)[:, 0]
    assert position is not None and position.interrupted
    assert 400 <= position.played_ms <= 600
    frames = after[: len(after) // 960 * 960].reshape(-1, 960).astype(float)
    loud = int((np.sqrt((frames**2).mean(axis=1)) > 100).sum())
    assert loud <= 1, f"{loud} frames of sound reached Discord after interrupt()"


async def test_speaker_leaving_frees_state(clips: dict[int, bytes]) -> None:
    async with BotOnEmulator(settings(), EmulatorConfig(dave=False), users={ALICE: "alice", BOB: "bob"}) as h:
        left: list[SpeakerLeft] = []
        h.bus.subscribe(SpeakerLeft, left.append)
        await h.emulator.speaker(ALICE).say(clips[ALICE][: 48_000 * 4])  # 1 s
        await drain(h, 0.2)
        await h.session.receiver.sync()
        assert str(ALICE) in h.session.receiver.snapshot()["active"]
        await h.emulator.speaker(ALICE).leave()
        await drain(h, 0.3)
        await h.session.receiver.sync()
        assert str(ALICE) not in h.session.receiver.snapshot()["active"]
        assert [e.speaker_id for e in left] == [str(ALICE)]


async def test_bad_packets_are_counted_and_never_stop_the_receiver(clips: dict[int, bytes]) -> None:
    quick_expiry = load_settings({}, pending_ttl_s=0.5)  # unmapped packets are given up on after 0.5 s
    async with BotOnEmulator(quick_expiry, EmulatorConfig(dave=True, seed=3), users={ALICE: "alice"}) as h:
        emu = h.emulator
        rng = np.random.default_rng(0)
        for _ in range(20):
            await emu.send_raw_udp(rng.integers(0, 256, int(rng.integers(16, 300)), dtype=np.uint8).tobytes())
        await emu.send_raw_udp(b"\x90\x78" + bytes(15))  # X bit set, but the extension preamble is cut off
        await emu.send_raw_udp(b"\x81\xc9\x00\x07" + os.urandom(28))  # RTCP receiver report
        await emu.send_raw_udp(b"\x90\x78" + os.urandom(3000))  # oversize
        await emu.send_raw_udp(b"\x00" * 8)  # keepalive-sized
        await emu.speaker(ALICE).say_with_wrong_key(
            clips[ALICE][: 48_000 * 4 // 5]
        )  # 200 ms, wrong transport key
        await emu.speaker(ALICE).say_without_dave(clips[ALICE][: 48_000 * 4 // 5])  # not E2E-encrypted
        await emu.send_unmapped_ssrc(4242, clips[ALICE][: 48_000 * 4 // 5])  # an SSRC that never maps
        await emu.speaker(ALICE).say(clips[ALICE])  # the real thing still gets through
        await drain(h)
        snap = h.session.receiver.snapshot()
        status = await h.command("status")
        track = envelope(h.recorder.track(str(ALICE)))
    alice = snap["speakers"][str(ALICE)]
    unattributed = snap["unattributed"]
    assert unattributed.get("transport_decrypt_failed", 0) + unattributed.get("rtp_bad_version", 0) >= 20
    assert unattributed.get("rtp_truncated", 0) >= 1
    assert unattributed.get("rtcp", 0) >= 1
    assert unattributed.get("oversize", 0) >= 1
    assert unattributed.get("keepalive", 0) >= 1
    assert alice["dropped"].get("dave_decrypt_failed", 0) >= 5
    assert unattributed.get("transport_decrypt_failed", 0) >= 10  # the wrong-key packets
    assert unattributed.get("unknown_ssrc_expired", 0) >= 10  # SSRC 4242 never mapped: dropped, not guessed
    assert set(snap["speakers"]) == {str(ALICE)}
    assert "DAVE on" in status and "alice" in status
    corr, _ = best_correlation(track, envelope(clips[ALICE]), int(np.argmax(track > 0)), search=100)
    assert corr >= 0.9
    assert energy(track, 0, 5) == 0.0
