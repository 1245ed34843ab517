"""End to end through Discord: the bot's own echo never counts as user speech; a user talking over
the bot does. The echo is made by the emulator from what the bot actually sent. Both hold idle and
with one core taken by a busy loop (what the embedded LLM does while the bot talks)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from openab_voice.audio.events import EchoGateDecision, SpeechStarted
from openab_voice.bench.load import BusyLoad
from openab_voice.config import load_settings
from openab_voice.testing.emulator import EchoPath, EmulatorConfig, load_wav_48k_stereo
from openab_voice.testing.harness import BotOnEmulator
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

ASSETS = Path(str(resources.files("openab_voice.testing") / "assets"))
ALICE = 1001
ROOM = EchoPath(delay_ms=80.0, gain_db=-6.0, reverb_ms=40.0, reverb_db=-12.0, seed=1)


@pytest.fixture(params=[0, 1], ids=["idle", "one-core-busy"])
def load(request: pytest.FixtureRequest) -> Iterator[int]:
    with BusyLoad(request.param):
        yield request.param


@pytest.mark.parametrize("dave", [True])
async def test_echo_only_while_the_bot_speaks_never_starts_user_speech(dave: bool, load: int) -> None:
    far = load_wav_48k_stereo(ASSETS / "far_end.wav")
    seconds = len(far) / (48_000 * 4)
    async with BotOnEmulator(
        load_settings({}, playback_enabled=True), EmulatorConfig(dave=dave, seed=2), users={ALICE: "alice"}
    ) as h:
        starts: list[SpeechStarted] = []
        decisions: list[EchoGateDecision] = []
        h.bus.subscribe(SpeechStarted, starts.append)
        h.bus.subscribe(EchoGateDecision, decisions.append)
        playback = h.session.playback
        assert playback is not None
        bot = asyncio.create_task(playback.play(far))
        echo = await h.emulator.speaker(ALICE).say_echo_only(seconds + 0.3, ROOM)
        result = await bot
        await asyncio.sleep(0.6)  # real time: the front end finishes the tail; no onset may follow
        heard_ms = h.session.receiver.snapshot()["speakers"][str(ALICE)]["decoded_ms"]
    assert result.played_ms >= seconds * 1000 - 40 and not result.interrupted
    assert echo.sent > seconds * 50 and heard_ms > seconds * 1000 * 0.9  # the echo really reached the bot
    assert [s for s in starts if s.speaker_id == str(ALICE)] == [], decisions


async def test_user_talking_over_the_bot_is_detected(load: int) -> None:
    far = load_wav_48k_stereo(ASSETS / "far_end.wav")
    alice = load_wav_48k_stereo(ASSETS / "alice.wav")
    async with BotOnEmulator(
        load_settings({}, playback_enabled=True), EmulatorConfig(dave=True, seed=3), users={ALICE: "alice"}
    ) as h:
        starts: list[SpeechStarted] = []
        h.bus.subscribe(SpeechStarted, starts.append)
        playback = h.session.playback
        assert playback is not None
        bot = asyncio.create_task(playback.play(far))
        await asyncio.sleep(1.0)  # real time: alice starts talking one second into the bot's answer
        await h.emulator.speaker(ALICE).say(alice, echo=ROOM)
        await bot
        await until(
            lambda: any(s.speaker_id == str(ALICE) for s in starts),
            "double talk: the user's speech to be detected",
            within_s=10.0,
        )
    mine = [s for s in starts if s.speaker_id == str(ALICE)]
    assert mine[0].during_playback
