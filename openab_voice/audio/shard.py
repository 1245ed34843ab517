"""A front-end shard: the speakers one processing thread owns, and its own copy of the render reference.

The front end's CPU work grows with the number of speakers and one thread uses one core at most, so
speakers are spread over shards, one thread each (ADR 0006, decision 10). Each shard keeps its own
render ring, resampler and history: every render frame is pushed to every shard, which fans it out
to its pipelines before processing their capture, so a capture chunk is never processed before the
render of its moment (ADR 0006, decision 1). A speaker stays in one shard for its whole life, so its
frames and speech marks stay in order; events raised in a shard go with that shard's batch.
Measurements and history: docs/adr/0006-audio-plane-under-cpu-contention.md.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from openab_voice.audio.capture_stream import CaptureItem
from openab_voice.audio.echo_gate import mean_square
from openab_voice.audio.resample import Chunk, Chunker, Resampler
from openab_voice.audio.ring import FrameRing
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.audio.speakers import Speaker
from openab_voice.bus.events import Event
from openab_voice.clock import Clock

__all__ = ["Shard"]


class Shard:
    """One processing thread's speakers, render copy, batch and events.

    Args:
        index: 0-based; names the thread.
        settings: front-end settings (ring sizes, internal rate, render history).
        clock: injected clock (for the render ring's overrun events).
        emit: where the render ring reports an overrun.
    """

    def __init__(
        self, index: int, settings: FrontEndSettings, *, clock: Clock, emit: Callable[[Event], None]
    ) -> None:
        self.index = index
        rate = settings.internal_rate
        self.render_ring = FrameRing("render", settings.render_ring_frames, clock=clock, emit=emit)
        self._resampler = Resampler(rate)
        self._chunker = Chunker(rate // 100, rate)
        # Recent render, to seed a speaker who starts while the bot is already talking.
        self.render_recent: collections.deque[Chunk] = collections.deque(
            maxlen=max(1, settings.render_history_ms // 10)
        )
        self.removed: collections.deque[tuple[Speaker, str]] = collections.deque()
        self.batch: list[CaptureItem] = []  # the batch being processed: frames and speech marks
        self.outbox: collections.deque[Event] = collections.deque()  # its pipelines' events
        self.members = 0  # live speakers assigned here (for balancing)
        self.lock = threading.Lock()  # one batch at a time
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def thread_name(self) -> str:
        return "openab-voice-frontend" if self.index == 0 else f"openab-voice-frontend-{self.index}"

    def fan_out_render(self, speakers: list[Speaker]) -> None:
        """Resample what was pushed to the render ring and hand it to this shard's pipelines."""
        pipelines = [s.pipeline for s in speakers if s.pipeline is not None]
        for frame in self.render_ring.drain():
            mono = self._resampler.process(frame)
            end = frame.timestamp + frame.duration - self._resampler.delay_s
            for chunk in self._chunker.push(mono, end):
                # The level is computed once here for every speaker's echo gate.
                shared = Chunk(chunk.timestamp, chunk.samples, mean_square(chunk.samples))
                self.render_recent.append(shared)
                for pipeline in pipelines:
                    pipeline.add_render(shared)

    def take_batch(self) -> list[CaptureItem]:
        batch, self.batch = self.batch, []
        return batch

    def take_events(self) -> list[Event]:
        events = []
        while self.outbox:
            events.append(self.outbox.popleft())
        return events

    def close(self) -> None:
        """Free the native resampler stream deterministically."""
        self._resampler.reset()
