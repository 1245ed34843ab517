import asyncio
import threading

import pytest

from openab_voice.audio.frame import DISCORD_FRAME_BYTES, AudioFrame
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.events import PlaybackFinished, PlaybackStarted
from openab_voice.discord.wire.playback import Playback
from openab_voice.errors import VoiceError
from tests.fakes.player import FakePlayerHost


def frames(n: int, value: int = 1) -> bytes:
    return bytes([value]) * (DISCORD_FRAME_BYTES * n)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.fixture
async def setup():
    bus = EventBus()
    events: list[object] = []
    bus.subscribe(PlaybackStarted, events.append)
    bus.subscribe(PlaybackFinished, events.append)
    clock = FakeClock()
    host = FakePlayerHost()
    playback = Playback(bus=bus, clock=clock, buffer_ms=200)
    playback.attach(host, asyncio.get_running_loop())
    return playback, host, events


async def test_plays_in_order_and_reports_completion(setup) -> None:
    playback, host, events = setup
    render: list[AudioFrame] = []
    playback.add_render_sink(render.append)
    uid = playback.begin()
    await playback.write(uid, frames(2, 1) + frames(1, 2)[:100])  # partial last frame is padded
    done = playback.finish(uid)
    assert host.plays == 1
    for _ in range(3):
        assert host.tick_in_thread()
    await settle()
    result = await asyncio.wait_for(done, 1)
    assert result.played_ms == 60 and not result.interrupted
    assert host.sent[0][0] == 1 and host.sent[2][0] == 2 and len(host.sent[2]) == DISCORD_FRAME_BYTES
    assert [f.speaker_id for f in render] == [None, None, None]
    assert [f.frame_id for f in render] == [0, 1, 2]
    assert [type(e) for e in events] == [PlaybackStarted, PlaybackFinished]
    assert host.tick() == b""  # empty buffer stops the player


async def test_interrupt_stops_within_one_frame_and_reports_position(setup) -> None:
    playback, host, events = setup
    uid = playback.begin()
    await playback.write(uid, frames(8))
    done = playback.finish(uid)
    host.tick_in_thread()
    host.tick_in_thread()
    result = playback.interrupt()
    assert result is not None and result.played_ms == 40 and result.interrupted
    assert host.tick_in_thread() == b""  # the very next read is silence: the player stops
    await settle()
    assert (await done).interrupted
    finished = [e for e in events if isinstance(e, PlaybackFinished)]
    assert len(finished) == 1 and finished[0].played_ms == 40
    assert playback.interrupt() is None  # idempotent


async def test_bounded_buffer_applies_backpressure(setup) -> None:
    playback, host, _ = setup  # 200 ms = 10 frames
    uid = playback.begin()
    writer = asyncio.create_task(playback.write(uid, frames(14)))
    await settle()
    assert not writer.done()
    assert playback.queued_ms == 200
    for _ in range(4):
        host.tick_in_thread()
    await settle()
    await asyncio.wait_for(writer, 1)
    assert playback.queued_ms == 200


async def test_interrupt_releases_a_blocked_writer(setup) -> None:
    playback, host, _ = setup
    uid = playback.begin()
    writer = asyncio.create_task(playback.write(uid, frames(30)))
    await settle()
    playback.interrupt()
    await asyncio.wait_for(writer, 1)
    assert playback.queued_ms == 0


async def test_player_restarts_when_audio_arrives_after_it_stopped(setup) -> None:
    playback, host, _ = setup
    uid = playback.begin()
    await playback.write(uid, frames(1))
    host.tick_in_thread()
    assert host.tick_in_thread() == b""  # stopped on an empty read
    await settle()
    await playback.write(uid, frames(1))
    assert host.plays == 2


async def test_unattached_playback_is_a_structured_error() -> None:
    playback = Playback(bus=EventBus(), clock=FakeClock())
    with pytest.raises(VoiceError) as info:
        playback.begin()
    assert info.value.code == "VOICE_PLAYBACK_UNAVAILABLE"


async def test_write_racing_an_interrupt_is_dropped_not_an_error(setup) -> None:
    playback, host, _ = setup
    uid = playback.begin()
    await playback.write(uid, frames(2))
    playback.interrupt()
    await playback.write(uid, frames(2))  # the response's next chunk arrives just after the cut
    assert playback.queued_ms == 0
    assert (await playback.finish(uid)).interrupted
    with pytest.raises(VoiceError):
        await playback.write("never-begun", frames(1))


async def test_render_reference_is_tapped_on_the_player_thread_not_the_loop(setup) -> None:
    """Under CPU contention the loop runs late; the echo canceller's reference must not wait for it."""
    playback, host, _ = setup
    seen: list[tuple[int, str]] = []
    playback.add_render_sink(lambda f: seen.append((f.frame_id, threading.current_thread().name)))
    uid = playback.begin()
    await playback.write(uid, frames(2))
    playback.finish(uid)
    # No await between the two reads: the loop never runs, yet both frames are already tapped.
    assert host.tick_in_thread() and host.tick_in_thread()
    assert [i for i, _ in seen] == [0, 1]
    assert all(name != threading.main_thread().name for _, name in seen)


async def test_a_failing_render_sink_never_stops_the_player(setup) -> None:
    playback, host, _ = setup

    def broken(frame: object) -> None:
        raise RuntimeError("consumer bug")

    playback.add_render_sink(broken)
    uid = playback.begin()
    await playback.write(uid, frames(1))
    playback.finish(uid)
    assert host.tick_in_thread()
    assert playback.render_sink_errors == 1
