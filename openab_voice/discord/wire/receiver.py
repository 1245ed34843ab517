"""Per-speaker voice receive on top of discord.py's voice client.

Data flow (notes §4)::

    discord.py reader thread    receive worker thread (ReceivePipeline)            event loop
    feed(datagram) ─► Inbox ─►  filter: keepalive, IP discovery, oversize, RTCP ─► FrameSubscription(s)
    event loop thread:          transport decrypt (open_packet)                     (AudioFrame batches)
    map_ssrc, remove_user, ─►   SSRC → user; unmapped SSRCs are held, never guessed ─► EventBus
    set_transport, ticks        DAVE decrypt (Opus silence bypasses it)             (SpeakerMapped,
                                JitterBuffer: order, FEC/PLC, Opus decode            SpeakerLeft, stats)

All receive state belongs to the worker thread; the reader thread and the loop only enqueue into the
one :class:`~openab_voice.discord.wire.inbox.Inbox`. Packets carry their kernel arrival stamp
(``arrival.py``). Threads, ticks and the capture watermark: docs/adr/0001-own-voice-receiver.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from openab_voice.audio.frame import AudioFrame
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.wire import stats as reasons
from openab_voice.discord.wire.arrival import ArrivalStamps
from openab_voice.discord.wire.inbox import Inbox
from openab_voice.discord.wire.pipeline import DaveDecryptor, ReceivePipeline, ReceiverSettings
from openab_voice.discord.wire.subscription import FrameSubscription
from openab_voice.discord.wire.transport import TransportCipher, cipher_for
from openab_voice.lifecycle import Lifecycle, Phase
from openab_voice.priority import boost_audio_thread

__all__ = ["DaveDecryptor", "FrameSubscription", "ReceiverSettings", "VoiceReceiver"]

log = logging.getLogger(__name__)

TICK_S: Final = 0.010  # resolution of jitter-buffer timeouts
_JOIN_TIMEOUT_S: Final = 2.0
_MAX_LOGGED_ERRORS: Final = 10


@dataclass(frozen=True, slots=True)
class _Map:
    ssrc: int
    user_id: str
    at: float


@dataclass(frozen=True, slots=True)
class _Remove:
    user_id: str
    at: float


@dataclass(frozen=True, slots=True)
class _Transport:
    cipher: TransportCipher


@dataclass(frozen=True, slots=True)
class _DaveSource:
    source: Callable[[], DaveDecryptor | None]


@dataclass(frozen=True, slots=True)
class _Cut:
    new_session: bool
    then: Callable[[tuple[str, ...]], object] | None


@dataclass(frozen=True, slots=True)
class _Tick:
    at: float


@dataclass(frozen=True, slots=True)
class _Barrier:
    done: Callable[[], object]


@dataclass(frozen=True, slots=True)
class _Stop:
    at: float


@dataclass(frozen=True, slots=True)
class _Sent:
    kind: str


_Control = _Map | _Remove | _Transport | _DaveSource | _Cut | _Tick | _Barrier | _Stop | _Sent
_Item = tuple[bytes, float] | _Control


class VoiceReceiver:
    """Receives every speaker of one voice connection separately (see the module docstring).

    Args:
        bus: where ``SpeakerMapped``, ``SpeakerLeft`` and ``ReceiveStatsUpdated`` go.
        clock: the injected clock (arrival times, ticks, event times).
        settings: receive tuning.
        session_id: stamped on events.
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        settings: ReceiverSettings | None = None,
        session_id: str | None = None,
    ) -> None:
        self._bus = bus
        self._clock = clock
        settings = settings or ReceiverSettings()
        self._settings = settings
        self._frames: list[AudioFrame] = []
        self._pipeline = ReceivePipeline(
            settings=settings, emit=self._frames.append, publish=bus.publish_threadsafe, session_id=session_id
        )
        self._inbox: Inbox[_Item] = Inbox(settings.inbox_packets)
        self._snapshot: dict[str, Any] = self._pipeline.snapshot()
        self._subscriptions: list[FrameSubscription] = []
        self._sinks: tuple[Callable[[AudioFrame], None], ...] = ()
        self._watermark_sinks: tuple[Callable[[float], None], ...] = ()
        self._watermark_at: float | None = None  # worker thread only: time of the last tick not yet told
        self._last_tick: float | None = None  # worker thread only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ticker: asyncio.Task[None] | None = None
        # new: packets are queued, nothing decodes them yet; running: the worker thread and the ticker
        # run; closed: held frames played out, every subscription ended
        self._life = Lifecycle("voice receiver")
        self._refused_seen = 0
        self._feed_failures = 0  # written by the reader thread only
        self._reader_boosted = False  # written by the reader thread only
        self._feed_failures_seen = 0
        self._errors_logged = 0
        self._arrivals = ArrivalStamps(clock, lambda: None)

    @property
    def settings(self) -> ReceiverSettings:
        return self._settings

    def set_socket_source(self, source: Callable[[], socket.socket | None]) -> None:
        """The socket the datagrams given to :meth:`feed` are read from (read per datagram: a
        reconnect replaces it); their arrival is then its kernel receive stamp. Call before the
        listener is registered."""
        self._arrivals = ArrivalStamps(self._clock, source)

    def arrival_sources(self) -> dict[str, int]:
        """How many datagram arrivals came from the kernel's stamp, and how many from the clock when
        the reader got to them (written by the reader thread; a snapshot for diagnostics)."""
        return {"kernel": self._arrivals.kernel, "read": self._arrivals.read}

    # --- any thread ---------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """discord.py socket listener: runs in its reader thread, so it only enqueues, never raises."""
        try:
            if not self._reader_boosted:
                # The reader thread is part of the audio plane: starved, it would leave datagrams in
                # the kernel's buffer while ticks move the capture watermark past them.
                self._reader_boosted = True
                boost_audio_thread()
            self._inbox.offer((data, self._arrivals.arrival()))
        except Exception:  # an exception here would kill discord.py's SocketReader thread
            self._feed_failures += 1

    # --- event loop thread --------------------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._life.phase

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the worker thread and the ticker; call on ``loop``'s thread, once."""
        if not self._life.new:
            return
        self._life.start()
        self._loop = loop
        self._bus.bind_loop(loop)
        self._thread = threading.Thread(target=self._run, name="openab-voice-receive", daemon=True)
        self._thread.start()
        self._ticker = loop.create_task(self._tick_forever(), name="openab-voice-receive-ticker")

    async def aclose(self) -> None:
        """Stop the worker (bounded wait), play out held frames, end every subscription. Idempotent."""
        if not self._life.begin_close():
            return
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.wait([self._ticker])
        self._inbox.put(_Stop(self._clock.monotonic()))
        self._inbox.close()
        if self._thread is not None:
            # A thread's join, so on real time: the worker runs on its own thread whatever the clock.
            await asyncio.to_thread(self._thread.join, _JOIN_TIMEOUT_S)
            if self._thread.is_alive():
                log.warning("receive worker did not stop within %.1f s", _JOIN_TIMEOUT_S)
        for subscription in list(self._subscriptions):
            subscription.close()
        self._life.finish_close()

    def set_transport(self, mode: str, key: bytes) -> None:
        """Use the transport mode and key of op 4 from now on.

        Raises:
            VoiceError: ``TRANSPORT_UNSUPPORTED_MODE`` or ``TRANSPORT_BAD_KEY``.
        """
        self._inbox.put(_Transport(cipher_for(mode, bytes(key))))

    def set_dave_source(self, source: Callable[[], DaveDecryptor | None]) -> None:
        """``source()`` returns the current DAVE session, or None when DAVE is off; read per packet."""
        self._inbox.put(_DaveSource(source))

    def map_ssrc(self, ssrc: int, user_id: str) -> None:
        """Attribute ``ssrc`` to ``user_id`` (voice gateway op 5)."""
        self._inbox.put(_Map(ssrc, str(user_id), self._clock.monotonic()))

    def remove_user(self, user_id: str) -> None:
        """Free ``user_id``'s decoder and jitter state (op 13); its counters are kept."""
        self._inbox.put(_Remove(str(user_id), self._clock.monotonic()))

    def count_sent(self, kind: str) -> None:
        """Count a datagram the bot sent on the voice socket besides media (the UDP keep-alive,
        ``stats.UDP_KEEPALIVE*``), in the receive stats' ``udp_sent``."""
        self._inbox.put(_Sent(kind))

    def cut_streams(
        self, *, new_session: bool, then: Callable[[tuple[str, ...]], object] | None = None
    ) -> None:
        """The voice connection broke: in order with everything fed before, play out every jitter
        buffer and restart each stream at its next packet (with ``new_session``, also forget the
        SSRC map, held packets and the transport key). ``then(speakers)`` runs *on the worker
        thread* once the played-out frames went to the frame sinks and before any later packet is
        handled, with the speakers whose streams were cut.
        """
        self._inbox.put(_Cut(new_session, then))

    def subscribe(self, *, maxsize: int | None = None) -> FrameSubscription:
        """A new bounded stream of decoded frames (default bound: ``settings.subscriber_frames``)."""
        subscription = FrameSubscription(
            self._settings.subscriber_frames if maxsize is None else maxsize, self._subscriptions.remove
        )
        self._subscriptions.append(subscription)
        return subscription

    def snapshot(self) -> dict[str, Any]:
        """``{"speakers": {user_id: counters}, "unattributed": {reason: n}, "active": [user_id]}`` as of the
        last tick or :meth:`sync`; ``active`` lists users whose decoder state is allocated."""
        return copy.deepcopy(self._snapshot)

    async def sync(self) -> None:
        """Wait until everything fed or sent before this call is processed, and the clock's time so
        far (a tick at its ``monotonic()`` now: held frames that have waited long enough are given
        up), and the frames delivered. The ticker's own tick for a clock just advanced may not be
        queued yet; this one is, before the barrier."""
        if not self._life.running:
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not done.done():
                done.set_result(None)

        self._inbox.put(_Tick(self._clock.monotonic()))
        self._inbox.put(_Barrier(lambda: loop.call_soon_threadsafe(resolve)))
        await done

    async def _tick_forever(self) -> None:
        while True:
            await self._clock.sleep(TICK_S)
            self._inbox.put(_Tick(self._clock.monotonic()))

    def add_frame_sink(self, sink: Callable[[AudioFrame], None]) -> None:
        """Call ``sink`` with every decoded frame *on the worker thread*, before subscribers see it.

        For consumers that are themselves thread-safe and never block (the audio front end's
        ``push_capture``): it saves the hop through the event loop. A sink that raises is counted as
        ``internal_error`` and does not stop the worker.
        """
        self._sinks = (*self._sinks, sink)  # replaced, never mutated: the worker reads it without a lock

    def add_watermark_sink(self, sink: Callable[[float], None]) -> None:
        """Call ``sink(t)`` *on the worker thread* once every decoded frame that starts before ``t`` has
        gone to the frame sinks (after each tick, so every 10 ms while the worker keeps up).

        The audio front end judges "capture stopped" on it instead of the wall clock: a worker that
        runs late under CPU contention then delays an end of speech, never invents one.
        """
        self._watermark_sinks = (*self._watermark_sinks, sink)

    def _dispatch(self, frames: list[AudioFrame]) -> None:
        for subscription in tuple(self._subscriptions):
            subscription.deliver(frames)

    # --- worker thread ------------------------------------------------------------------------

    def _run(self) -> None:
        boost_audio_thread()  # the audio plane keeps real time first (openab_voice/priority.py)
        pipeline = self._pipeline
        stop = False
        while not stop:
            items = self._inbox.take_all()
            for item in items:
                try:
                    if isinstance(item, tuple):
                        pipeline.handle_packet(*item)
                        self._media_tick(item[1])
                    else:
                        stop = self._control(item) or stop
                except Exception:  # one bad packet or message never stops the worker
                    self._internal_error()
            self._settle()
            stop = stop or (not items and self._inbox.closed)

    def _media_tick(self, arrival: float) -> None:
        """Packets carry time too: while audio flows, tick on their arrival times.

        The loop's ticker still covers silence, but under CPU contention it runs late, and jitter
        buffers waiting on it would hold frames after every lost packet for as long. A packet's
        arrival is a time the worker has reached on its own (every packet fed before it was handled).
        """
        if self._last_tick is None or arrival - self._last_tick >= TICK_S:
            self._last_tick = arrival
            self._pipeline.tick(arrival)
            self._watermark_at = arrival

    def _control(self, item: _Control) -> bool:
        pipeline = self._pipeline
        match item:
            case _Map():
                pipeline.map_ssrc(item.ssrc, item.user_id, item.at)
            case _Remove():
                pipeline.remove_user(item.user_id, item.at)
            case _Transport():
                pipeline.set_transport(item.cipher)
            case _DaveSource():
                pipeline.set_dave_source(item.source)
            case _Cut():
                speakers = pipeline.cut(new_session=item.new_session)
                self._settle()  # the played-out frames reach the sinks before ``then`` runs
                if item.then is not None:
                    item.then(speakers)
            case _Tick():
                if self._last_tick is not None and item.at < self._last_tick:
                    return False  # a media tick already went past this time
                self._last_tick = item.at
                pipeline.tick(item.at)
                self._snapshot = pipeline.snapshot()
                # Every packet fed before this tick has been processed (the inbox keeps order).
                self._watermark_at = item.at
            case _Barrier():
                self._settle()
                self._snapshot = pipeline.snapshot()
                item.done()
            case _Sent():
                pipeline.stats.count_sent(item.kind)
            case _Stop():
                pipeline.close()
                self._settle()
                self._snapshot = pipeline.snapshot()
                pipeline.publish_stats(item.at)
                return True
        return False

    def _settle(self) -> None:
        """Fold reader-thread counters into the stats and hand decoded frames to the event loop."""
        stats = self._pipeline.stats
        refused = self._inbox.refused
        stats.drop_unattributed(reasons.QUEUE_FULL, refused - self._refused_seen)
        self._refused_seen = refused
        failures = self._feed_failures
        stats.drop_unattributed(reasons.INTERNAL_ERROR, failures - self._feed_failures_seen)
        self._feed_failures_seen = failures
        if self._frames:
            batch = self._frames.copy()
            self._frames.clear()
            for sink in self._sinks:
                try:
                    for frame in batch:
                        sink(frame)
                except Exception:
                    self._internal_error()
            if self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
                    self._loop.call_soon_threadsafe(self._dispatch, batch)
        at, self._watermark_at = self._watermark_at, None
        if at is not None and self._watermark_sinks:  # only after the frames it vouches for went out
            # Once per batch, not per tick: what the buffers still hold now bounds it for the last tick.
            watermark = self._pipeline.watermark(at)
            for watermark_sink in self._watermark_sinks:
                try:
                    watermark_sink(watermark)
                except Exception:
                    self._internal_error()

    def _internal_error(self) -> None:
        self._pipeline.stats.drop_unattributed(reasons.INTERNAL_ERROR)
        if self._errors_logged < _MAX_LOGGED_ERRORS:
            self._errors_logged += 1
            log.exception("receive worker: unexpected error (counted as internal_error)")
