"""The bot's voice session through Discord's closes, drops, moves and gateway resumes, end to end:
the real bot (discord.py, our connection supervisor, receiver, front end and transcriber) joined to
the loopback emulator. For each event: both speakers' audio before and after is theirs, the utterance
in progress at the gap is ended there (no final spans it), and the gap is reported with its cause and
duration (``docs/voice-session-life.md``)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from openab_voice.audio.events import SpeechEnded
from openab_voice.audio.frame import AudioFrame
from openab_voice.config import load_settings
from openab_voice.discord.wire.events import VoiceGap, VoiceGapStarted
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.stt.base import Hypothesis, SttCapabilities
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator
from tests.e2e.audio_match import HOP, best_correlation, envelope
from tests.e2e.test_emulator import until

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

ASSETS = Path(str(resources.files("openab_voice.testing") / "assets"))
ALICE, BOB = 1101, 1102
RATE = 48_000
GAP_TOLERANCE_S = 0.03  # a frame and a half: where the last frame before the gap ends


class CountingStt:
    """Transcribes an utterance as its length: enough to see where finals begin and end."""

    capabilities = SttCapabilities(
        name="counting", streaming=True, sample_rate=16_000, languages=("en",), model="counting"
    )

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        return Hypothesis(text=f"speech {samples.size / 16_000:.2f} seconds", confidence=0.9)

    def transcribe_batch(self, requests: Any) -> list[Hypothesis | Exception]:
        return [self.transcribe(samples, final=final) for samples, final, _ in requests]

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def clips() -> dict[int, bytes]:
    return {ALICE: load_wav_48k_stereo(ASSETS / "alice.wav"), BOB: load_wav_48k_stereo(ASSETS / "bob.wav")}


class Heard:
    """Everything the bot decoded, per speaker, and the events of the session."""

    def __init__(self, h: BotOnEmulator) -> None:
        self.frames: list[AudioFrame] = []
        self.ahead = 0.0  # how far frame times ran ahead of the clock when the frames came
        self._clock = h.clock
        self.gaps: list[VoiceGap] = []
        self.started: list[VoiceGapStarted] = []
        self.ends: list[SpeechEnded] = []
        self.finals: list[TranscriptFinal] = []
        self._gap = asyncio.Event()
        self._task = asyncio.create_task(self._consume(h))
        for kind, sink in (
            (VoiceGap, self._on_gap),
            (VoiceGapStarted, self.started.append),
            (SpeechEnded, self.ends.append),
            (TranscriptFinal, self.finals.append),
        ):
            h.bus.subscribe(kind, sink)  # type: ignore[arg-type]

    async def _consume(self, h: BotOnEmulator) -> None:
        async for frame in h.session.receiver.subscribe(maxsize=5000):
            self.frames.append(frame)
            # A talk spurt's frames are timed from its first packet's arrival plus the RTP clock; a
            # first packet stamped late (a busy reader thread) puts the rest ahead of the clock.
            self.ahead = max(self.ahead, frame.timestamp + frame.duration - self._clock.monotonic())

    def _on_gap(self, event: VoiceGap) -> None:
        log.warning(
            "voice gap: %s %s -> %s in %.1f ms (%d attempt(s))",
            event.cause,
            event.close_code,
            event.recovery,
            event.duration_s * 1000,
            event.attempts,
        )
        self.gaps.append(event)
        self._gap.set()

    async def gap(self, timeout: float = 15.0) -> VoiceGap:  # noqa: ASYNC109
        """The next gap to end (awaited on the bus, not polled)."""
        await asyncio.wait_for(self._gap.wait(), timeout)
        self._gap.clear()
        return self.gaps[-1]

    def count(self, uid: int, since: float) -> int:
        return sum(1 for f in self.frames if f.speaker_id == str(uid) and f.timestamp >= since)

    def track(self, uid: int, since: float) -> npt.NDArray[np.float64]:
        """The speaker's envelope from ``since`` on (20 ms hops, silence where nothing came)."""
        chunks = [f for f in self.frames if f.speaker_id == str(uid) and f.timestamp >= since]
        if not chunks:
            return np.zeros(0)
        end = max(round((f.timestamp - since) * RATE) + len(f.pcm) // 4 for f in chunks)
        out = np.zeros((end, 2), dtype=np.int16)
        for f in chunks:
            off = round((f.timestamp - since) * RATE)
            pcm = np.frombuffer(f.pcm, dtype="<i2").reshape(-1, 2)
            out[off : off + len(pcm)] = pcm
        return envelope(out)

    async def aclose(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def settings() -> Any:
    return load_settings({})


def bot(dave: bool, seed: int) -> BotOnEmulator:
    return BotOnEmulator(
        settings(),
        EmulatorConfig(dave=dave, seed=seed),
        users={ALICE: "alice", BOB: "bob"},
        providers=ConversationProviders(stt=CountingStt()),
    )


async def both_speak(h: BotOnEmulator, heard: Heard, clips: dict[int, bytes]) -> None:
    """Alice, then Bob 0.4 s later, talking over each other (2 s each); each hears only themself."""
    t0 = h.clock.monotonic()
    clips = {uid: clip[: RATE * 4 * 2] for uid, clip in clips.items()}
    offsets = {ALICE: 0.0, BOB: 0.4}

    async def speak(uid: int) -> None:
        await h.clock.sleep(offsets[uid])  # real time: bob starts 0.4 s after alice, over her
        await h.emulator.speaker(uid).say(clips[uid])

    await asyncio.gather(speak(ALICE), speak(BOB))
    for uid in (ALICE, BOB):
        frames = len(clips[uid]) // (HOP * 4)
        await until(lambda uid=uid, n=frames: heard.count(uid, t0) >= n, f"{uid}'s audio", timeout=5)
    assert_attributed(heard, clips, t0, offsets)


def assert_attributed(heard: Heard, clips: dict[int, bytes], t0: float, offsets: dict[int, float]) -> None:
    sent = {uid: envelope(clips[uid]) for uid in clips}
    for uid, other in ((ALICE, BOB), (BOB, ALICE)):
        track = heard.track(uid, t0)
        # Searched over 2 s: the emulator encodes an utterance before sending it (up to ~0.5 s on
        # a busy machine); what is checked is whose audio each track holds, not when it began.
        own, at = best_correlation(track, sent[uid], round(offsets[uid] * 50), search=100)
        cross, _ = best_correlation(track, sent[other], round(offsets[other] * 50), search=100)
        # 0.8, not test_voice_pipeline's 0.9: on a loaded machine (load average 7-14 here) a talk
        # spurt re-anchored after a stall shifts part of the envelope by a frame or two.
        frames = heard.count(uid, t0)
        assert own >= 0.8, (
            f"{uid}: heard audio does not match what was sent (r={own:.3f} at {at}, {frames} frames)"
        )
        assert cross < 0.5, f"{uid}: heard audio resembles the other speaker (r={cross:.3f})"


async def gap_during_speech(
    h: BotOnEmulator, heard: Heard, clips: dict[int, bytes], event: Callable[[], Awaitable[object]]
) -> tuple[VoiceGap, float]:
    """Alice talks; one second in, ``event`` breaks the connection. Returns the gap and when she began."""
    t0 = h.clock.monotonic()
    talk = asyncio.create_task(h.emulator.speaker(ALICE).say(clips[ALICE]))
    # One second into what the bot hears (the emulator encodes before it sends).
    await until(lambda: heard.count(ALICE, t0) > 0, "alice's first frame", timeout=5)
    await h.clock.sleep(1.0)  # real time: the break comes one second into her speech
    await event()
    gap = await heard.gap()
    await talk
    return gap, t0


def assert_cut_cleanly(heard: Heard, gap: VoiceGap, t0: float) -> None:
    """Alice's speech in progress ended where the gap began; no final spans the gap (times on the
    frames' timeline, which may run ahead of the clock by ``heard.ahead``)."""
    tolerance = GAP_TOLERANCE_S + heard.ahead
    assert str(ALICE) in gap.speakers_cut, gap
    cut = [e for e in heard.ends if e.speaker_id == str(ALICE) and e.reason == "voice_gap"]
    assert cut, heard.ends
    assert t0 < cut[0].audio_time <= gap.started_at + tolerance
    # A RESUME refused and escalated to a rejoin cuts again what came in meanwhile (decrypted
    # with the old session's still valid key): every cut lies inside the gap.
    assert all(e.audio_time <= gap.at + tolerance for e in cut), cut
    alice = [f for f in heard.finals if f.speaker_id == str(ALICE) and f.audio_end > t0]
    assert alice, "no final for the speech before the gap"
    for final in alice:
        spans = final.audio_start < gap.started_at - tolerance < final.audio_end - 2 * tolerance
        assert not spans, f"a final spans the gap at {gap.started_at:.3f}: {final}"
    assert any(f.audio_end <= gap.started_at + tolerance for f in alice), "the speech before the gap"


async def finals_settled(heard: Heard, since: float) -> None:
    """Wait for the final of every speech end after ``since`` (the counting STT is instant)."""
    await until(
        lambda: (
            len([f for f in heard.finals if f.audio_end > since])
            >= len([e for e in heard.ends if e.audio_time > since and e.duration_s > 0.2])
        ),
        "the finals",
    )


@pytest.mark.parametrize("dave", [True, False], ids=["dave-on", "dave-off"])
async def test_voice_server_crash_is_resumed(dave: bool, clips: dict[int, bytes]) -> None:
    """4015 with the media path down too (what a crashed voice server means): the bot RESUMEs
    (op 7 -> op 9, the same SSRC, key and DAVE group), well within a second."""
    async with bot(dave, 21) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)
        first = h.emulator.voice_session()
        assert first is not None

        async def crash() -> None:
            outage = asyncio.create_task(h.emulator.udp_blackout(0.3))
            await h.emulator.close_voice(4015)
            await outage

        gap, t0 = await gap_during_speech(h, heard, clips, crash)
        assert (gap.cause, gap.close_code, gap.recovery, gap.recovered) == (
            "voice_server_crash",
            4015,
            "resume",
            True,
        )
        assert 0 < gap.duration_s < 1.0 and gap.media_interrupted
        stats = h.emulator.voice_stats()
        assert (stats["resumes"], stats["failed_resumes"]) == (1, 0)
        again = h.emulator.voice_session()
        assert again is not None and again.bot_ssrc == first.bot_ssrc  # the same session throughout
        assert again.privacy_code == first.privacy_code
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert_cut_cleanly(heard, gap, t0)
        assert h.session.gaps == [gap]
        await heard.aclose()


async def test_network_drop_is_resumed(clips: dict[int, bytes]) -> None:
    """The websocket's TCP connection dies without a close frame (1006) while UDP is down: the bot
    RESUMEs; what was said during the outage is lost, never concealed or stitched."""
    async with bot(True, 22) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)

        async def drop() -> None:
            outage = asyncio.create_task(h.emulator.udp_blackout(0.4))
            h.emulator.drop_voice_socket()
            await outage

        gap, t0 = await gap_during_speech(h, heard, clips, drop)
        assert (gap.cause, gap.recovery, gap.recovered) == ("network", "resume", True)
        assert gap.close_code is not None and gap.close_code < 4000
        assert 0 < gap.duration_s < 1.0
        assert h.emulator.voice_stats()["resumes"] == 1
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert_cut_cleanly(heard, gap, t0)
        await heard.aclose()


@pytest.mark.parametrize("dave", [True, False], ids=["dave-on", "dave-off"])
async def test_session_invalid_rejoins(dave: bool, clips: dict[int, bytes]) -> None:
    """4006: the session is gone, so the bot leaves and joins again: a new voice session (SSRC, key,
    DAVE group); the receiver forgets the old SSRC map and key, and attribution stays right."""
    async with bot(dave, 23) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)
        first = h.emulator.voice_session()
        assert first is not None
        gap, t0 = await gap_during_speech(h, heard, clips, lambda: h.emulator.close_voice(4006))
        assert (gap.cause, gap.close_code, gap.recovery, gap.recovered) == (
            "session_invalid",
            4006,
            "rejoin",
            True,
        )
        assert 0 < gap.duration_s < 3.0
        again = await h.emulator.wait_voice_ready()
        assert again.session_id != first.session_id and again.bot_ssrc != first.bot_ssrc
        if dave:
            assert again.privacy_code and again.privacy_code != first.privacy_code
            assert sorted(h.emulator.dave_members()) == sorted(
                [ALICE, BOB, h.emulator.bot_user_id, h.emulator.recorder_user_id]
            )
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert_cut_cleanly(heard, gap, t0)
        assert h.session.status()["connected"]
        await heard.aclose()


async def test_refused_resume_falls_back_to_a_rejoin(clips: dict[int, bytes]) -> None:
    """A 4015 whose session the server no longer knows (its RESUME is answered 4006): one gap,
    resume escalated to rejoin."""
    async with bot(True, 24) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)

        async def crash_and_forget() -> None:
            # The restarted server lost the session: its token no longer matches (no public API
            # for that; the emulator's own session record is changed).
            conn = h.emulator._voice.active
            assert conn is not None and conn.credentials is not None
            conn.credentials = dataclasses.replace(conn.credentials, token="forgotten")
            await h.emulator.close_voice(4015)

        gap, t0 = await gap_during_speech(h, heard, clips, crash_and_forget)
        assert (gap.cause, gap.recovery, gap.recovered) == ("voice_server_crash", "rejoin", True)
        assert h.emulator.voice_stats()["failed_resumes"] >= 1
        assert len(heard.started) == 1 and len(heard.gaps) == 1
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert_cut_cleanly(heard, gap, t0)
        await heard.aclose()


async def test_voice_server_move(clips: dict[int, bytes]) -> None:
    """A VOICE_SERVER_UPDATE mid-call: identify at the new endpoint (new SSRC, key, DAVE group)."""
    async with bot(True, 25) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)
        first = h.emulator.voice_session()
        assert first is not None

        async def move() -> None:
            h.emulator.move_voice_server()

        gap, t0 = await gap_during_speech(h, heard, clips, move)
        assert (gap.cause, gap.recovery, gap.recovered) == ("server_move", "reconnect", True)
        assert 0 < gap.duration_s < 2.0
        moved = await h.emulator.wait_voice_ready()
        assert moved.bot_ssrc != first.bot_ssrc and moved.privacy_code != first.privacy_code
        vc = h.session.voice_client
        assert vc is not None and vc.endpoint == f"127.0.0.1:{h.emulator.voice_stats()['endpoint_port']}"
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert_cut_cleanly(heard, gap, t0)
        await heard.aclose()


async def test_main_gateway_resume_leaves_voice_alone(clips: dict[int, bytes]) -> None:
    """The main gateway reconnects and RESUMEs (op 7 -> op 6 -> RESUMED) while Alice talks: the voice
    connection is another websocket, so nothing is cut; the control gap is still reported."""
    async with bot(True, 26) as h:
        heard = Heard(h)
        await both_speak(h, heard, clips)
        first = h.emulator.voice_session()

        async def reconnect() -> None:
            assert h.emulator.gateway_reconnect() == 1

        gap, t0 = await gap_during_speech(h, heard, clips, reconnect)
        assert (gap.cause, gap.recovery, gap.recovered, gap.media_interrupted) == (
            "gateway",
            "none",
            True,
            False,
        )
        assert gap.speakers_cut == () and 0 < gap.duration_s < 2.0
        assert h.emulator.voice_stats()["gateway_resumes"] == 1
        assert h.emulator.voice_session() == first
        await both_speak(h, heard, clips)
        await finals_settled(heard, t0)
        assert not [e for e in heard.ends if e.reason == "voice_gap"]
        await heard.aclose()
