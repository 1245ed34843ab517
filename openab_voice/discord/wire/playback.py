"""Playback: an ``AudioSource`` fed from asyncio through a bounded buffer.

discord.py's ``AudioPlayer`` thread calls :meth:`PlaybackSource.read` every 20 ms and sends what it
returns; an empty read stops the player. So :meth:`Playback.interrupt` only has to empty the
buffer: the next read (at most one 20 ms frame later) returns ``b""`` and sound stops. Everything
the player reads is also published as the render reference (the echo canceller's far end).

Threading: the buffer is the only state shared with the player thread and is guarded by one
lock; every other piece of state lives on the event loop, which the player thread reaches only
through ``loop.call_soon_threadsafe``. The one exception is the render reference: render sinks are
called on the player thread, with the frame stamped at the moment it was handed to Discord. Under
CPU contention the event loop can run hundreds of milliseconds late; a reference that hopped
through it would reach the echo canceller and the echo gate after the echo it explains (the capture
path does not wait on the loop), and the bot's own voice would look like a person talking.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import discord

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_FRAME_BYTES, DISCORD_RATE, AudioFrame
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.wire.events import PlaybackFinished, PlaybackStarted
from openab_voice.errors import ErrorCode, VoiceError
from openab_voice.lifecycle import Lifecycle
from openab_voice.priority import boost_audio_thread
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

FRAME_MS = 20.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybackResult:
    """How much of an utterance reached Discord."""

    utterance_id: str
    played_ms: float
    interrupted: bool


class PlayerHost(Protocol):
    """The part of ``discord.VoiceClient`` playback needs."""

    def play(self, source: discord.AudioSource, *, after: Callable[[Exception | None], object]) -> None: ...

    def is_playing(self) -> bool: ...

    def is_connected(self) -> bool: ...


class _Utterance:
    def __init__(self, utterance_id: str, future: asyncio.Future[PlaybackResult]) -> None:
        self.id = utterance_id
        self.future = future
        self.queued = 0
        self.played = 0
        self.finished = False  # no more audio will be written
        self.started = False


class PlaybackSource(discord.AudioSource):
    """The player-thread side: pops 20 ms frames from the shared buffer."""

    def __init__(self, playback: Playback) -> None:
        self._playback = playback
        self._boosted = False

    def is_opus(self) -> bool:
        return False

    def read(self) -> bytes:
        if not self._boosted:  # discord.py's player thread: part of the audio plane (priority.py)
            self._boosted = True
            boost_audio_thread()
        return self._playback._read_frame()


class Playback:
    """Queue 48 kHz stereo PCM for one voice connection; interrupt it; tap it as render reference."""

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        buffer_ms: int = default_of(VoiceSettings, "playback_buffer_ms"),
        session_id: str | None = None,
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._max_frames = max(1, int(buffer_ms / FRAME_MS))
        self._lock = threading.Lock()
        self._frames: collections.deque[tuple[_Utterance, bytes]] = collections.deque()
        self._utterances: collections.deque[_Utterance] = collections.deque()
        # Recently finished (played out or interrupted) utterances: a write racing an interrupt is
        # dropped quietly instead of failing the response that was just cut.
        self._finished: collections.OrderedDict[str, _Utterance] = collections.OrderedDict()
        self._render_sinks: tuple[Callable[[AudioFrame], None], ...] = ()
        self._render_ids = itertools.count()
        self.render_sink_errors = 0  # written by the player thread only
        self._ids = itertools.count(1)
        self._space = asyncio.Event()
        self._host: PlayerHost | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._life = Lifecycle("playback", started=True)

    # --- wiring ------------------------------------------------------------------------------

    def attach(self, host: PlayerHost, loop: asyncio.AbstractEventLoop) -> None:
        """Bind to a connected voice client."""
        self._host = host
        self._loop = loop

    def add_render_sink(self, sink: Callable[[AudioFrame], None]) -> Callable[[], None]:
        """Call ``sink`` with every frame sent to Discord, *on the player thread*; returns a remover.

        The sink must be thread-safe and never block (the front end's ``push_render`` only appends
        to a bounded ring); an exception in it is swallowed, so the player never stops.
        """
        self._render_sinks = (*self._render_sinks, sink)  # replaced, never mutated: read without a lock

        def remove() -> None:
            self._render_sinks = tuple(s for s in self._render_sinks if s is not sink)

        return remove

    # --- asyncio side ------------------------------------------------------------------------

    def begin(self, utterance_id: str | None = None) -> str:
        """Start an utterance; returns its id. Audio is added with :meth:`write`."""
        if self._life.closed or self._host is None or self._loop is None:
            raise VoiceError(
                "playback is not attached to a voice connection", code=ErrorCode.VOICE_PLAYBACK_UNAVAILABLE
            )
        utt = _Utterance(utterance_id or f"utt-{next(self._ids)}", self._loop.create_future())
        self._utterances.append(utt)
        return utt.id

    async def write(self, utterance_id: str, pcm: bytes) -> None:
        """Append 48 kHz stereo s16le PCM; waits while the buffer is full. A partial last frame is padded.

        Audio for an utterance that already finished (it was interrupted) is dropped.
        """
        utt = self._find(utterance_id)
        for start in range(0, len(pcm), DISCORD_FRAME_BYTES):
            frame = pcm[start : start + DISCORD_FRAME_BYTES]
            if len(frame) < DISCORD_FRAME_BYTES:
                frame += bytes(DISCORD_FRAME_BYTES - len(frame))
            while True:
                if utt.future.done():  # interrupted while waiting: drop the rest
                    return
                with self._lock:
                    if len(self._frames) < self._max_frames:
                        self._frames.append((utt, frame))
                        utt.queued += 1
                        break
                self._space.clear()
                await self._space.wait()
            self._ensure_playing()

    def finish(self, utterance_id: str) -> asyncio.Future[PlaybackResult]:
        """No more audio for this utterance; the future resolves once it has all been played."""
        utt = self._find(utterance_id)
        with self._lock:
            utt.finished = True
            done = utt.played >= utt.queued
        if done:
            self._complete(utt, interrupted=False)
        return utt.future

    async def play(self, pcm: bytes) -> PlaybackResult:
        """Play one complete clip and wait until it was sent (or interrupted)."""
        uid = self.begin()
        await self.write(uid, pcm)
        return await self.finish(uid)

    def interrupt(self) -> PlaybackResult | None:
        """Drop all queued audio; sound stops within one frame. Returns the current utterance's position."""
        with self._lock:
            self._frames.clear()
        current: PlaybackResult | None = None
        while self._utterances:
            utt = self._utterances[0]
            result = self._complete(utt, interrupted=True)
            if current is None and result is not None:
                current = result
        self._space.set()
        return current

    @property
    def queued_ms(self) -> float:
        with self._lock:
            return len(self._frames) * FRAME_MS

    async def aclose(self) -> None:
        """Stop playing and fail nothing: pending utterances resolve as interrupted. Idempotent."""
        if self._life.closed:
            return
        self.interrupt()
        self._life.close_now()

    # --- internals ---------------------------------------------------------------------------

    def _find(self, utterance_id: str) -> _Utterance:
        for utt in self._utterances:
            if utt.id == utterance_id:
                return utt
        finished = self._finished.get(utterance_id)
        if finished is not None:
            return finished
        raise VoiceError(
            f"unknown or finished utterance {utterance_id!r}", code=ErrorCode.VOICE_UTTERANCE_UNKNOWN
        )

    def _ensure_playing(self) -> None:
        host = self._host
        if host is None or not host.is_connected() or host.is_playing():
            return
        host.play(PlaybackSource(self), after=self._after_threadsafe)

    def _after_threadsafe(self, error: Exception | None) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_player_stopped)

    def _on_player_stopped(self) -> None:
        # The player may have stopped on an empty read just before more audio arrived.
        with self._lock:
            pending = bool(self._frames)
        if pending and not self._life.closed:
            self._ensure_playing()

    def _read_frame(self) -> bytes:
        """Player thread: the next frame or ``b""`` to stop. Must not raise."""
        with self._lock:
            if not self._frames:
                return b""
            utt, frame = self._frames.popleft()
            utt.played += 1  # counted here, under the lock, so interrupt() sees every frame handed over
        stamp = self._clock.monotonic()
        # Every frame handed to Discord is render reference, even one whose utterance was
        # interrupted meanwhile: it is still in the room. Tapped here, not on the loop (module doc).
        render = AudioFrame(
            pcm=frame,
            sample_rate=DISCORD_RATE,
            channels=DISCORD_CHANNELS,
            timestamp=stamp,
            frame_id=next(self._render_ids),
            speaker_id=None,
        )
        for sink in self._render_sinks:
            try:
                sink(render)
            except Exception:  # the player thread must never die of a consumer's bug
                self.render_sink_errors += 1
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # loop closing: nobody left to tell
                loop.call_soon_threadsafe(self._on_frame_sent, utt, stamp)
        return frame

    def _on_frame_sent(self, utt: _Utterance, stamp: float) -> None:
        self._space.set()
        if utt.future.done():
            return
        if not utt.started:
            utt.started = True
            self._bus.publish(PlaybackStarted(at=stamp, utterance_id=utt.id, session_id=self._session_id))
        with self._lock:
            done = utt.finished and utt.played >= utt.queued
        if done:
            self._complete(utt, interrupted=False)

    def _complete(self, utt: _Utterance, *, interrupted: bool) -> PlaybackResult | None:
        if utt in self._utterances:
            self._utterances.remove(utt)
        self._finished[utt.id] = utt
        while len(self._finished) > 64:
            self._finished.popitem(last=False)
        if utt.future.done():
            return None
        result = PlaybackResult(utterance_id=utt.id, played_ms=utt.played * FRAME_MS, interrupted=interrupted)
        utt.future.set_result(result)
        self._bus.publish(
            PlaybackFinished(
                at=self._clock.monotonic(),
                utterance_id=utt.id,
                played_ms=result.played_ms,
                interrupted=interrupted,
                session_id=self._session_id,
            )
        )
        return result
