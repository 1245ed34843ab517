"""``FrontEnd``: one pipeline per speaker, the shared render reference, and the processed-capture API.

:meth:`FrontEnd.push_capture` and :meth:`FrontEnd.push_render` only append to bounded rings (O(1),
any thread; overflow drops the oldest and reports ``audio_buffer_overrun``). :meth:`FrontEnd.process_pending`
does the CPU work (resample, APM, VAD, gate); :meth:`FrontEnd.start` runs it on one thread per
:class:`~openab_voice.audio.shard.Shard`, never behind the event loop. Events are published on the
loop with their batch. Consumers: :meth:`FrontEnd.subscribe_marked` (frames with in-band speech
marks) and :meth:`FrontEnd.add_speech_sink` (:mod:`~openab_voice.audio.capture_stream`); ends of
speech after capture stops are judged on :meth:`FrontEnd.advance_capture_watermark`. Pipelines are
built on a speaker's first frame and freed by :meth:`FrontEnd.remove_speaker`.
Threads and ownership in detail: docs/adr/0006-audio-plane-under-cpu-contention.md.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from types import TracebackType

from openab_voice.audio.capture_stream import (
    CaptureDelivery,
    CaptureItem,
    ProcessedCaptureStream,
    SpeechSink,
)
from openab_voice.audio.events import CapturePaused, SpeechEnded, SpeechStarted
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.audio.pipeline import SpeakerPipeline
from openab_voice.audio.ring import FrameRing
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.audio.shard import Shard
from openab_voice.audio.speakers import PipelineFactory, Speaker
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.lifecycle import Lifecycle
from openab_voice.priority import available_cpus, boost_audio_thread
from openab_voice.providers.apm import ApmCapabilities, ApmConfig, AudioProcessor
from openab_voice.providers.registry import ProviderRegistry
from openab_voice.providers.vad import VadCapabilities, VadConfig, VoiceActivityDetector

log = logging.getLogger(__name__)

_JOIN_TIMEOUT_S = 2.0


class FrontEnd:
    """The audio front end of one voice session.

    Args:
        settings: front-end settings (defaults: WebRTC APM, Silero VAD, 16 kHz).
        bus: where events go.
        clock: injected clock.
        apm_providers / vad_providers: registries (tests inject fakes or missing modules).
        session_id: stamped on every event that has none.
        interval_s: processing cadence once :meth:`start`-ed.

    Raises:
        ProviderUnavailable: a configured provider cannot start (checked here, at start-up, by
            building one instance of each); never a silent pass-through.
        ConfigError: unknown provider name.
    """

    def __init__(
        self,
        settings: FrontEndSettings | None = None,
        *,
        bus: EventBus,
        clock: Clock,
        apm_providers: ProviderRegistry[ApmConfig, AudioProcessor] | None = None,
        vad_providers: ProviderRegistry[VadConfig, VoiceActivityDetector] | None = None,
        session_id: str | None = None,
        interval_s: float = 0.02,
    ) -> None:
        self.settings = settings = settings or FrontEndSettings()
        self._clock = clock
        self._interval = interval_s
        self._outbox: collections.deque[Event] = collections.deque()  # events not raised by a pipeline
        # Providers are checked here, at start-up: a missing library or model is an error now, not
        # a surprise on the first speaker's first frame.
        self._pipelines = PipelineFactory(
            settings,
            clock=clock,
            emit=self._from_pipeline,
            apm_providers=apm_providers,
            vad_providers=vad_providers,
        )
        self.apm_capabilities: ApmCapabilities = self._pipelines.apm_capabilities
        self.vad_capabilities: VadCapabilities = self._pipelines.vad_capabilities
        if self.degraded:
            log.warning("audio front end is degraded: %s", ", ".join(self.degraded_reasons))
        workers = settings.workers or min(2, available_cpus())
        self._shards = [Shard(i, settings, clock=clock, emit=self._outbox.append) for i in range(workers)]
        self._current = threading.local()  # the shard whose batch this thread is processing
        self._speakers: dict[str, Speaker] = {}
        self._speakers_lock = threading.Lock()
        self._delivery = CaptureDelivery(bus=bus, session_id=session_id)
        self._watermark: float | None = None  # capture time up to which the receiver pushed everything
        self._loop: asyncio.AbstractEventLoop | None = None
        self._life = Lifecycle("audio front end")
        self.batch_errors = 0

    # --- status -------------------------------------------------------------------------------

    @property
    def degraded_reasons(self) -> tuple[str, ...]:
        """Why the front end does not clean audio as a production setup should (empty when fine)."""
        return self._pipelines.degraded_reasons

    @property
    def degraded(self) -> bool:
        """True with the ``disabled`` APM or any APM stage switched off."""
        return bool(self.degraded_reasons)

    @property
    def speakers(self) -> tuple[str, ...]:
        """Speakers with a ring (and, after their first batch, a pipeline)."""
        with self._speakers_lock:
            return tuple(self._speakers)

    def pipeline(self, speaker_id: str) -> SpeakerPipeline | None:
        """The speaker's pipeline (None before its first processed frame); for diagnostics."""
        with self._speakers_lock:
            speaker = self._speakers.get(speaker_id)
        return speaker.pipeline if speaker is not None else None

    # --- input (any thread, never waits on processing) -----------------------------------------

    def push_capture(self, frame: AudioFrame) -> None:
        """Queue a decoded capture frame (the receiver's 48 kHz stereo 20 ms frames)."""
        if frame.speaker_id is None:
            raise ValueError("capture frames need a speaker_id; the bot's own audio goes to push_render")
        with self._speakers_lock:
            speaker = self._speakers.get(frame.speaker_id)
            if speaker is None:
                shard = min(self._shards, key=lambda sh: (sh.members, sh.index))  # the least loaded
                shard.members += 1
                speaker = Speaker(self._capture_ring(frame.speaker_id), shard=shard.index)
                self._speakers[frame.speaker_id] = speaker
        speaker.ring.push(frame)
        self._shards[speaker.shard].wake.set()

    def push_render(self, frame: AudioFrame) -> None:
        """Queue what the bot just handed to Discord (speaker_id None); fanned out to every speaker."""
        if frame.speaker_id is not None:
            raise ValueError("render reference frames have speaker_id None")
        for shard in self._shards:  # each shard resamples its own copy (see audio/shard.py)
            shard.render_ring.push(frame)
            shard.wake.set()

    def advance_capture_watermark(self, at: float) -> None:
        """Every capture frame that starts before ``at`` has been pushed (the receive worker's promise).

        From then on, a speaker is judged silent (capture stopped) on this watermark, never on the
        wall clock alone. Any thread; monotonic (an older value is ignored).
        """
        if self._watermark is None or at > self._watermark:
            self._watermark = at

    def remove_speaker(self, speaker_id: str, reason: str = "speaker_left") -> None:
        """Forget a speaker now; its pipeline is closed (speech ended, providers freed) next batch."""
        with self._speakers_lock:
            speaker = self._speakers.pop(speaker_id, None)
            if speaker is not None:
                self._shards[speaker.shard].members -= 1
        if speaker is not None:
            shard = self._shards[speaker.shard]
            shard.removed.append((speaker, reason))
            shard.wake.set()

    def break_capture(self, reason: str = "voice_gap") -> tuple[str, ...]:
        """The capture broke off for everyone (the voice connection's gap): end each speaker's speech
        in progress after the frames already pushed, and start the frames pushed from now on in
        fresh pipelines, so nothing before the break joins anything after it. Any thread; returns
        the speakers it ended."""
        with self._speakers_lock:
            speakers = tuple(self._speakers)
        for speaker_id in speakers:
            self.remove_speaker(speaker_id, reason)
        return speakers

    def subscribe(
        self, speaker_id: str | None = None, *, maxsize: int | None = None
    ) -> ProcessedCaptureStream[ProcessedFrame]:
        """Processed capture of one speaker (or all): an async iterator of :class:`ProcessedFrame`."""
        stream: ProcessedCaptureStream[ProcessedFrame] = ProcessedCaptureStream(
            speaker_id=speaker_id,
            maxsize=maxsize or self.settings.processed_queue_frames,
            clock=self._clock,
            emit=self._emit,
            on_close=self._delivery.remove_stream,
        )
        self._delivery.add_stream(stream)
        return stream

    def subscribe_marked(self, *, maxsize: int | None = None) -> ProcessedCaptureStream[CaptureItem]:
        """Every speaker's processed capture with its speech marks in band (``SpeechStarted``,
        ``SpeechEnded``, ``CapturePaused``, in order with the frames): what a transcriber consumes."""
        stream: ProcessedCaptureStream[CaptureItem] = ProcessedCaptureStream(
            speaker_id=None,
            maxsize=maxsize or self.settings.processed_queue_frames,
            clock=self._clock,
            emit=self._emit,
            on_close=self._delivery.remove_stream,
            marks=True,
        )
        self._delivery.add_stream(stream)
        return stream

    def add_speech_sink(self, sink: SpeechSink) -> None:
        """Call ``sink`` with every ``SpeechStarted`` / ``SpeechEnded``, on the event loop, in the
        same callback that delivers the frames of its batch (the conversation's barge-in path)."""
        self._delivery.add_speech_sink(sink)

    # --- processing -----------------------------------------------------------------------------

    def process_pending(self) -> list[ProcessedFrame]:
        """Process everything queued, deliver to subscribers, publish events; returns the frames.

        Call from the event loop thread (or a test); with :meth:`start` the front end calls it itself.
        """
        items: list[CaptureItem] = []
        for shard in self._shards:
            with shard.lock:
                items.extend(self._process_batch(shard))
        self._deliver(items)
        return [item for item in items if isinstance(item, ProcessedFrame)]

    def _process_batch(self, shard: Shard) -> list[CaptureItem]:
        self._current.shard = shard  # where its pipelines' events go (_from_pipeline)
        # Read before the rings are drained: the receiver raises the watermark only after pushing
        # the frames it vouches for, so every one of them is in the rings now. Read after the drain,
        # it could vouch for frames pushed meanwhile and end a speech that is still arriving.
        idle_now = self._idle_now()
        # The pipelines' speech marks land in the batch as they are emitted (_from_pipeline), so
        # each mark is in order with the frames processed before and after it.
        outputs = shard.batch
        while shard.removed:
            speaker, reason = shard.removed.popleft()
            # What it pushed before it was removed is still its own: processed, then its speech
            # ends (in order, before any frame of a pipeline that replaced it).
            if speaker.pipeline is not None:
                for frame in speaker.ring.drain():
                    out = speaker.pipeline.process(frame)
                    if out is not None:
                        outputs.append(out)
            ended = self._stop(speaker, reason)
            if ended is not None:
                outputs.append(ended)
        with self._speakers_lock:
            speakers = [s for s in self._speakers.values() if s.shard == shard.index]
        for speaker in speakers:
            if speaker.pipeline is None and len(speaker.ring):
                speaker.pipeline = self._pipelines.start(speaker, shard.render_recent)
        shard.fan_out_render(speakers)
        for speaker in speakers:
            frames = speaker.ring.drain()
            if speaker.pipeline is None:
                continue  # provider start failed; reported in _start, retried later
            for frame in frames:
                out = speaker.pipeline.process(frame)
                if out is not None:
                    outputs.append(out)
        for speaker in speakers:
            speaker.ring.poll()
            if speaker.pipeline is not None:
                outputs.extend(speaker.pipeline.check_idle(idle_now))
        shard.render_ring.poll()
        return shard.take_batch()

    def _idle_now(self) -> float:
        """The time up to which silence is known: the capture watermark when a receiver sets one."""
        now = self._clock.monotonic()
        watermark = self._watermark
        return now if watermark is None else min(now, watermark)

    def _capture_ring(self, speaker_id: str) -> FrameRing:
        return FrameRing(
            "capture",
            self.settings.capture_ring_frames,
            clock=self._clock,
            emit=self._outbox.append,
            speaker_id=speaker_id,
        )

    def _from_pipeline(self, event: Event) -> None:
        """A pipeline's event (on the thread processing its shard, under the shard's lock): queued
        for the bus with the shard's batch, and a speech mark also goes in band into that batch."""
        shard: Shard = getattr(self._current, "shard", None) or self._shards[0]
        shard.outbox.append(event)
        if isinstance(event, SpeechStarted | SpeechEnded | CapturePaused):
            shard.batch.append(event)

    def _stop(self, speaker: Speaker, reason: str) -> ProcessedFrame | None:
        """Close the speaker's pipeline; returns the frame that ends its speech in progress, if any."""
        return self._pipelines.stop(speaker, reason)

    def _emit(self, event: Event) -> None:
        self._outbox.append(event)

    def _deliver(self, items: list[CaptureItem]) -> None:
        """Caller's thread: hand ``items`` out, then every queued event (overruns they caused too)."""
        self._delivery.items(items)
        for shard in self._shards:
            for event in shard.take_events():
                self._delivery.event(event)
        while self._outbox:
            self._delivery.event(self._outbox.popleft())

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start processing on the front end's own threads; results reach subscribers on this loop."""
        self._life.require_open("start")
        if self._life.new:
            self._loop = asyncio.get_running_loop()
            self._life.start()
            for shard in self._shards:
                shard.thread = threading.Thread(
                    target=self._run, args=(shard,), name=shard.thread_name, daemon=True
                )
                shard.thread.start()

    def _run(self, shard: Shard) -> None:
        """A shard's thread: process whatever was pushed to it; otherwise check for idle speakers."""
        loop = self._loop
        assert loop is not None
        boost_audio_thread()  # the audio plane keeps real time first (openab_voice/priority.py)
        while not self._life.closed:
            shard.wake.wait(self._interval)
            shard.wake.clear()
            if self._life.closed:
                return
            try:
                with shard.lock:  # with nothing queued, this is just the idle check
                    items = self._process_batch(shard)
            except Exception as exc:  # a bug must not silently stop the front end: report, go on
                self.batch_errors += 1
                log.exception("audio front end batch failed")
                self._outbox.append(_error_event(exc, self._clock.monotonic()))
                items = shard.take_batch()
            events = shard.take_events()
            while self._outbox:  # ring overruns, stream drops, errors: whichever thread is first
                try:
                    events.append(self._outbox.popleft())
                except IndexError:  # the other shard took the last one
                    break
            if not items and not events:
                continue
            try:
                loop.call_soon_threadsafe(self._deliver_batch, items, events)
            except RuntimeError:  # the loop closed: nobody is listening any more
                return

    def _deliver_batch(self, items: list[CaptureItem], events: list[Event]) -> None:
        """Event loop: hand one batch to subscribers, then its events to the speech sinks and the
        bus, in order, all in this one callback."""
        self._delivery.items(items)
        for event in events:
            self._delivery.event(event)

    async def aclose(self) -> None:
        """Stop processing, end speech in progress, free every pipeline, end subscriptions (idempotent)."""
        if not self._life.begin_close():
            return
        for shard in self._shards:
            thread, shard.thread = shard.thread, None
            if thread is not None:
                shard.wake.set()
                await asyncio.to_thread(thread.join, _JOIN_TIMEOUT_S)
                if thread.is_alive():
                    log.warning("audio front end thread did not stop within %.1f s", _JOIN_TIMEOUT_S)
        with self._speakers_lock:
            speakers = list(self._speakers.values())
            self._speakers.clear()
        ended: list[CaptureItem] = []  # the marks of the speech the close ended
        for shard in self._shards:
            with shard.lock:
                self._current.shard = shard
                for speaker in speakers:
                    if speaker.shard == shard.index:
                        self._stop(speaker, "closed")
                while shard.removed:
                    speaker, reason = shard.removed.popleft()
                    self._stop(speaker, reason)
                shard.close()  # free the native soxr stream deterministically
                ended.extend(shard.take_batch())
        # Batches the threads handed over before they stopped are still queued on the loop
        # (callbacks run in order): let them through first, so subscribers see frames and events in
        # order.
        barrier = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(barrier.set_result, None)
        await barrier
        self._deliver(ended)
        for stream in tuple(self._delivery.streams):
            stream.close()
        self._life.finish_close()

    async def __aenter__(self) -> FrontEnd:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _error_event(exc: Exception, at: float) -> ErrorRaised:
    if isinstance(exc, OpenabError):
        return ErrorRaised(at=at, stage="audio", code=exc.code, message=exc.message, retryable=exc.retryable)
    return ErrorRaised(
        at=at,
        stage="audio",
        code=ErrorCode.AUDIO_FRONTEND_ERROR,
        message=f"{type(exc).__name__}: {exc}",
        retryable=True,
    )
