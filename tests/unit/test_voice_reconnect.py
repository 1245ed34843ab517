"""The pieces of a voice connection's gap, each alone: which recovery a close code asks for, the
receiver's stream cut (kept and forgotten state), and DAVE frames while transport-only media is in
force. End to end through the bot: ``tests/e2e/test_bot_voice_life*.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import davey
import pytest
from discord.voice_state import ConnectionFlowState

from openab_voice.audio.frame import AudioFrame
from openab_voice.bench.receive import RtpSender, opus_tone
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.receiver import ReceiverSettings, VoiceReceiver
from openab_voice.discord.wire.reconnect import (
    Recovery,
    ResumePolicy,
    SupervisedConnectionState,
    moved,
    recovery_for,
)
from openab_voice.discord.wire.transport import XCHACHA, cipher_for
from openab_voice.discord.wire.voice_client import DAVE_MAGIC, _TransportOnly
from openab_voice.testing.emulator.mls import DaveGroup

KEY, NEW_KEY = bytes(range(32)), bytes(range(1, 33))
ALICE = "111111111111"
BOT, CHANNEL = 999_999_999_999, 5_555_555_555
TONE = opus_tone(30, frequency=440.0)


@pytest.mark.parametrize(
    ("code", "cause", "recovery"),
    [
        (4015, "voice_server_crash", Recovery.RESUME),
        (1006, "network", Recovery.RESUME),
        (None, "network", Recovery.RESUME),  # 30 s without a message
        (-1, "network", Recovery.RESUME),  # discord.py's "no code"
        (4000, "network", Recovery.RESUME),  # discord.py's own heartbeat timeout
        (4006, "session_invalid", Recovery.REJOIN),
        (4009, "session_invalid", Recovery.REJOIN),
        (4004, "session_invalid", Recovery.REJOIN),
        (4014, "disconnected", Recovery.RECONNECT),
        (4022, "disconnected", Recovery.RECONNECT),
        (4021, "rate_limited", Recovery.LEAVE),
        (1000, "closed", Recovery.LEAVE),
    ],
)
def test_each_close_code_has_its_recovery(code: int | None, cause: str, recovery: Recovery) -> None:
    decision = recovery_for(code)
    assert (decision.cause, decision.recovery) == (cause, recovery)


@dataclass
class Rig:
    clock: FakeClock
    receiver: VoiceReceiver
    frames: list[AudioFrame]

    async def speak(self, sender: RtpSender, count: int) -> None:
        for k in range(count):
            self.receiver.feed(sender.packet(TONE[k % len(TONE)]))
            self.clock.advance(0.02)
            await asyncio.sleep(0)
        await self.receiver.sync()


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    clock = FakeClock()
    receiver = VoiceReceiver(bus=EventBus(), clock=clock, settings=ReceiverSettings(jitter_depth=3))
    frames: list[AudioFrame] = []
    receiver.add_frame_sink(frames.append)
    receiver.start(asyncio.get_running_loop())
    receiver.set_transport(XCHACHA, KEY)
    receiver.map_ssrc(1001, ALICE)
    yield Rig(clock, receiver, frames)
    await receiver.aclose()


async def cut(rig: Rig, *, new_session: bool) -> tuple[tuple[str, ...], int]:
    """Cut; returns the speakers and how many frames the sinks had when ``then`` ran."""
    done: asyncio.Future[tuple[tuple[str, ...], int]] = asyncio.get_running_loop().create_future()
    loop = asyncio.get_running_loop()

    def then(speakers: tuple[str, ...]) -> None:
        loop.call_soon_threadsafe(done.set_result, (speakers, len(rig.frames)))

    rig.receiver.cut_streams(new_session=new_session, then=then)
    return await done


async def test_a_resume_cut_plays_out_and_keeps_the_session(rig: Rig) -> None:
    alice = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, KEY))
    await rig.speak(alice, 10)
    speakers, delivered = await cut(rig, new_session=False)
    assert speakers == (ALICE,)
    assert delivered == 10  # what the jitter buffer held went to the sinks before ``then``
    alice.sequence += 25  # 0.5 s of packets lost in the gap
    alice.timestamp += 25 * 960
    await rig.speak(alice, 5)
    rig.clock.advance(0.2)
    await rig.receiver.sync()
    stats = rig.receiver.snapshot()["speakers"][ALICE]
    # The SSRC map and key were kept; the gap is not concealed or counted as loss across the cut.
    assert stats["packets"] == 15 and stats["lost"] == 0 and stats["concealed"] == 0
    assert not any(f.concealed for f in rig.frames)


async def test_a_new_session_cut_forgets_the_ssrc_map_and_the_key(rig: Rig) -> None:
    alice = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, KEY))
    await rig.speak(alice, 4)
    assert await cut(rig, new_session=True) == ((ALICE,), 4)
    await rig.speak(alice, 3)  # old key, nothing to open it with
    assert rig.receiver.snapshot()["unattributed"]["no_transport_key"] == 3
    rig.receiver.set_transport(XCHACHA, NEW_KEY)
    moved = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, NEW_KEY), sequence=100)
    await rig.speak(moved, 3)  # the SSRC may belong to someone else now: held, not guessed
    assert rig.receiver.snapshot()["speakers"][ALICE]["packets"] == 4
    rig.receiver.map_ssrc(1001, ALICE)
    await rig.receiver.sync()
    assert rig.receiver.snapshot()["speakers"][ALICE]["packets"] == 7


class _Session:
    def __init__(self, ready: bool) -> None:
        self.ready = ready
        self.calls: list[bytes] = []

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes:
        self.calls.append(packet)
        return b"plain:" + packet[:2]


def test_transport_only_passes_plain_opus_and_decrypts_dave_frames() -> None:
    session = _Session(ready=True)
    window = _TransportOnly(session)
    assert window.ready
    assert window.decrypt(1, davey.MediaType.audio, b"\x78\x01\x02") == b"\x78\x01\x02"
    assert session.calls == []
    sealed = b"\x01\x02cipher" + DAVE_MAGIC
    assert window.decrypt(1, davey.MediaType.audio, sealed) == b"plain:\x01\x02"
    not_yet = _TransportOnly(_Session(ready=False))
    with pytest.raises(ValueError, match="before the session has keys"):
        not_yet.decrypt(1, davey.MediaType.audio, sealed)


def test_every_close_code_maps_somewhere() -> None:
    seen: dict[Recovery, int] = {}
    for code in [None, *range(1000, 1016), *range(4000, 4030)]:
        recovery = recovery_for(code).recovery
        seen[recovery] = seen.get(recovery, 0) + 1
    assert set(seen) == {Recovery.RESUME, Recovery.REJOIN, Recovery.RECONNECT, Recovery.LEAVE}


async def test_frames_the_session_cannot_open_yet_wait_for_it(rig: Rig) -> None:
    """A member joins: Alice's client moves to the next epoch's key as soon as it has the commit,
    the bot a moment later (op 29 still on its way). Her frames in between are held, and decrypted
    in order once the bot's session has the epoch."""
    bob = 222_222_222_222
    group = DaveGroup(CHANNEL, [int(ALICE), bob])
    bot = davey.DaveSession(1, BOT, CHANNEL)
    bot.set_external_sender(group.external_sender.serialized())
    _, welcome = group.admit(bot.get_serialized_key_package())
    bot.process_welcome(welcome)
    rig.receiver.set_dave_source(lambda: bot)
    alice = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, KEY), dave=group.sessions[int(ALICE)])
    await rig.speak(alice, 3)
    group.join(333_333_333_333)  # Alice's session committed the Add; the bot's did not yet
    await rig.speak(alice, 4)
    assert len(rig.frames) == 3
    assert group.last_proposals is not None and group.last_commit is not None
    bot.process_proposals(davey.ProposalsOperationType.append, group.last_proposals[1:])
    bot.process_commit(group.last_commit)
    await rig.speak(alice, 3)
    rig.clock.advance(1.5)
    await rig.receiver.sync()
    stats = rig.receiver.snapshot()["speakers"][ALICE]
    assert [(f.frame_id, f.concealed) for f in rig.frames] == [(i, False) for i in range(10)], stats
    assert (stats["dave_late"], stats["dropped"], stats["lost"]) == (4, {}, 0)


async def test_held_frames_are_bounded_and_counted(rig: Rig) -> None:
    group = DaveGroup(CHANNEL, [int(ALICE), 222_222_222_222])
    never = davey.DaveSession(1, BOT, CHANNEL)  # never welcomed
    rig.receiver.set_dave_source(lambda: never)
    alice = RtpSender(ssrc=1001, cipher=cipher_for(XCHACHA, KEY), dave=group.sessions[int(ALICE)])
    await rig.speak(alice, 54)  # 50 held at most: the 4 oldest are given up at once
    assert rig.receiver.snapshot()["speakers"][ALICE]["dropped"] == {"dave_not_ready": 4}
    rig.clock.advance(1.0)  # the rest once they waited dave_hold_s
    await rig.receiver.sync()
    assert rig.receiver.snapshot()["speakers"][ALICE]["dropped"] == {"dave_not_ready": 54}
    assert rig.frames == []


@pytest.mark.parametrize(
    ("state", "token", "is_move"),
    [
        (ConnectionFlowState.connected, "t1", True),  # mid-call: a move, even with the same token
        (ConnectionFlowState.websocket_connected, "t1", False),  # a repeat during a RESUME
        (ConnectionFlowState.websocket_connected, "t0", True),  # a new server during a RESUME
        (ConnectionFlowState.got_voice_state_update, "t0", False),  # the handshake's own update
        (ConnectionFlowState.set_guild_voice_state, "t0", False),
        (ConnectionFlowState.disconnected, "t0", False),
    ],
)
def test_which_server_updates_move_the_call(state: ConnectionFlowState, token: str, is_move: bool) -> None:
    update = {"token": "t1", "endpoint": "127.0.0.1:1", "guild_id": "1"}
    assert moved(state, token, update) is is_move
    assert not moved(state, token, {**update, "endpoint": None})  # "awaiting endpoint"


class _HangingResume(SupervisedConnectionState):
    """A connection state whose RESUME websocket never reaches op 9 (a server gone quiet)."""

    def __init__(self, clock: FakeClock, policy: ResumePolicy) -> None:
        super().__init__(cast(Any, None), hook=None, life=None, clock=clock, policy=policy)
        self.opened = 0
        self.abandoned = 0

    async def _open_resumed(self, seq_ack: int) -> Any:
        self.opened += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.abandoned += 1
            raise


class _ClosedWs:
    seq_ack = 7

    async def close(self) -> None:
        return None


async def test_each_resume_attempt_is_bounded_on_the_injected_clock() -> None:
    clock = FakeClock()
    state = _HangingResume(clock, ResumePolicy(attempts=2, timeout_s=5.0, backoff_s=0.25))
    try:
        state.ws = cast(Any, _ClosedWs())
        resuming = asyncio.ensure_future(state._resume())
        for _ in range(10):
            await asyncio.sleep(0)
        assert state.opened == 1
        clock.advance(4.9)
        for _ in range(10):
            await asyncio.sleep(0)
        assert state.abandoned == 0 and not resuming.done()  # no real time counts, only the clock's
        clock.advance(0.1)  # the first attempt's 5 s: cancelled, then the back-off
        for _ in range(10):
            await asyncio.sleep(0)
        assert state.abandoned == 1 and state.opened == 1
        clock.advance(0.25)
        for _ in range(10):
            await asyncio.sleep(0)
        assert state.opened == 2
        clock.advance(5.0)
        assert await resuming is False  # both attempts timed out: the caller rejoins
        assert state.abandoned == 2 and state.resumes == 0
    finally:
        state._socket_reader.stop()
