"""The receive worker's per-packet path, single-threaded and synchronous.

Filter (keepalive, IP discovery, oversize, RTCP) -> transport decrypt -> SSRC -> user (unmapped SSRCs
are held, never guessed) -> DAVE decrypt (Opus silence bypasses it) -> jitter buffer (order, FEC/PLC,
Opus decode). :class:`~openab_voice.discord.wire.receiver.VoiceReceiver` runs it on its worker thread;
the receive benchmark calls it directly.
"""

from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

import davey

from openab_voice.audio.frame import AudioFrame
from openab_voice.bus.events import Event
from openab_voice.discord.wire import stats as reasons
from openab_voice.discord.wire.events import ReceiveStatsUpdated, SpeakerLeft, SpeakerMapped
from openab_voice.discord.wire.jitter import JitterBuffer, JitterSettings
from openab_voice.discord.wire.rtp import MIN_RTP_PACKET, OPUS_SILENCE, is_ip_discovery, is_rtcp
from openab_voice.discord.wire.stats import ReceiveStats, reason_for_code
from openab_voice.discord.wire.transport import TransportCipher, open_packet
from openab_voice.errors import PacketError
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings

__all__ = ["DaveDecryptor", "ReceivePipeline", "ReceiverSettings"]

log = logging.getLogger(__name__)

_MAX_HELD_SSRCS: Final = 64  # unmapped SSRCs held at once; packets are authenticated, so few exist


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverSettings:
    """Receive tuning; the defaults suit Discord's 20 ms Opus frames (those of ``OPENAB_*`` settings
    are their declarations': :mod:`~openab_voice.settings.defaults`).

    Attributes:
        jitter_depth: packets (and 20 ms units of waiting) the jitter buffer holds back.
        max_conceal: longest burst of missing packets concealed by FEC/PLC instead of counted lost.
        pending_per_ssrc: packets held per SSRC while its user is unknown (oldest dropped first).
        pending_ttl_s: how long a held packet waits for its SSRC's mapping.
        inbox_packets: packets waiting for the worker before new ones are refused.
        max_packet_bytes: larger datagrams are dropped unread.
        stats_interval_s: period of ``ReceiveStatsUpdated`` events.
        subscriber_frames: default bound of a :class:`FrameSubscription`.
        dave_hold_packets: DAVE frames held per SSRC while the session cannot decrypt them yet
            (around a transition a sender may use the next epoch's key before the bot has processed
            the commit, and after op 31 the session has no keys until its welcome); retried, in
            order, as soon as one of that SSRC's frames decrypts again.
        dave_hold_s: how long such a frame is held before it is dropped and counted.
        udp_keepalive_s: seconds between UDP keep-alives on the voice socket, from join to leave, so
            a NAT in front of the bot keeps the path open while it does not play (0: none; see
            :mod:`~openab_voice.discord.wire.keepalive`).
    """

    jitter_depth: int = default_of(VoiceSettings, "jitter_depth")
    max_conceal: int = default_of(VoiceSettings, "max_conceal_frames")
    pending_per_ssrc: int = default_of(VoiceSettings, "pending_packets_per_ssrc")
    pending_ttl_s: float = default_of(VoiceSettings, "pending_ttl_s")
    inbox_packets: int = default_of(VoiceSettings, "receive_queue_packets")
    max_packet_bytes: int = 1500
    stats_interval_s: float = 1.0
    subscriber_frames: int = 500
    dave_hold_packets: int = 50
    dave_hold_s: float = 1.0
    udp_keepalive_s: float = default_of(VoiceSettings, "udp_keepalive_s")


class DaveDecryptor(Protocol):
    """What the receiver needs from ``davey.DaveSession``."""

    @property
    def ready(self) -> bool: ...

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes: ...


class ReceivePipeline:
    """Everything the receive worker does, single-threaded and synchronous (benchmarks call it directly).

    Args:
        settings: receive tuning.
        emit: called with every decoded frame, in order per speaker.
        publish: called with receive events.
        session_id: stamped on events.
    """

    def __init__(
        self,
        *,
        settings: ReceiverSettings,
        emit: Callable[[AudioFrame], None],
        publish: Callable[[Event], None],
        session_id: str | None = None,
    ) -> None:
        self.stats = ReceiveStats()
        self._settings = settings
        self._jitter = JitterSettings(depth=settings.jitter_depth, max_conceal=settings.max_conceal)
        self._emit = emit
        self._publish = publish
        self._session_id = session_id
        self._cipher: TransportCipher | None = None
        self._dave_source: Callable[[], DaveDecryptor | None] | None = None
        self._users: dict[int, tuple[str, int | None]] = {}  # ssrc -> (user id, numeric id for davey)
        self._ssrc_of: dict[str, int] = {}
        self._streams: dict[int, JitterBuffer] = {}
        self._frame_ids: dict[str, Iterator[int]] = {}
        # ssrc -> packets (sequence, RTP timestamp, payload, arrival) waiting for the SSRC's user.
        self._held: dict[int, collections.deque[tuple[int, int, bytes, float]]] = {}
        # ssrc -> DAVE frames not decryptable yet: (sequence, RTP timestamp, payload, arrival, reason).
        self._sealed: dict[int, collections.deque[tuple[int, int, bytes, float, str]]] = {}
        self._last_stats: float | None = None

    def set_transport(self, cipher: TransportCipher) -> None:
        self._cipher = cipher

    def set_dave_source(self, source: Callable[[], DaveDecryptor | None]) -> None:
        self._dave_source = source

    def handle_packet(self, data: bytes, arrival: float) -> None:
        """Process one datagram that arrived at ``arrival``; every rejection is counted by reason."""
        stats = self.stats
        if len(data) < MIN_RTP_PACKET:
            stats.drop_unattributed(reasons.KEEPALIVE)
        elif is_ip_discovery(data):
            stats.drop_unattributed(reasons.IP_DISCOVERY)
        elif len(data) > self._settings.max_packet_bytes:
            stats.drop_unattributed(reasons.OVERSIZE)
        elif is_rtcp(data):
            stats.drop_unattributed(reasons.RTCP)
        elif self._cipher is None:
            stats.drop_unattributed(reasons.NO_TRANSPORT_KEY)
        else:
            try:
                header, payload = open_packet(self._cipher, data)
            except PacketError as exc:
                stats.drop_unattributed(reason_for_code(exc.code))
                return
            user = self._users.get(header.ssrc)
            if user is None:
                self._hold(header.ssrc, (header.sequence, header.timestamp, payload, arrival))
            else:
                self._deliver(header.ssrc, user, header.sequence, header.timestamp, payload, arrival)

    def map_ssrc(self, ssrc: int, user_id: str, now: float) -> None:
        """Attribute ``ssrc`` to ``user_id`` (op 5) and deliver what was held for it."""
        current = self._users.get(ssrc)
        if current is not None and current[0] == user_id:
            return  # op 5 repeats whenever the user starts speaking
        if current is not None:
            self._close(ssrc)
        previous = self._ssrc_of.get(user_id)
        if previous is not None:
            self._close(previous)
        user = (user_id, int(user_id) if user_id.isdecimal() else None)
        self._users[ssrc] = user
        self._ssrc_of[user_id] = ssrc
        held = self._held.pop(ssrc, ())
        for sequence, timestamp, payload, arrival in held:
            self._deliver(ssrc, user, sequence, timestamp, payload, arrival)
        self._publish(
            SpeakerMapped(
                at=now, session_id=self._session_id, speaker_id=user_id, ssrc=ssrc, buffered=len(held)
            )
        )

    def remove_user(self, user_id: str, now: float) -> None:
        """Forget ``user_id`` (op 13): play out what its jitter buffer holds, free its decoder."""
        ssrc = self._ssrc_of.get(user_id)
        if ssrc is not None:
            self._close(ssrc)
        self._publish(SpeakerLeft(at=now, session_id=self._session_id, speaker_id=user_id, ssrc=ssrc))

    def snapshot(self) -> dict[str, Any]:
        """Counters plus ``active``: the users whose jitter buffer and decoder are allocated."""
        snap = self.stats.snapshot()
        snap["active"] = sorted(self._users[ssrc][0] for ssrc in self._streams if ssrc in self._users)
        return snap

    def tick(self, now: float) -> None:
        """Time passed: release overdue jitter-buffer frames, expire held packets, publish stats."""
        for stream in self._streams.values():
            for frame in stream.flush(now):
                self._emit(frame)
        deadline = now - self._settings.pending_ttl_s
        for ssrc in [s for s, q in self._held.items() if q[0][3] < deadline]:
            queue = self._held[ssrc]
            while queue and queue[0][3] < deadline:
                queue.popleft()
                self.stats.drop_unattributed(reasons.UNKNOWN_SSRC_EXPIRED)
            if not queue:
                del self._held[ssrc]
        sealed_deadline = now - self._settings.dave_hold_s
        for ssrc in [s for s, q in self._sealed.items() if q[0][3] < sealed_deadline]:
            self._drop_sealed(ssrc, before=sealed_deadline)
        if self._last_stats is None:
            self._last_stats = now
        elif now - self._last_stats >= self._settings.stats_interval_s:
            self._last_stats = now
            self.publish_stats(now)

    def watermark(self, now: float) -> float:
        """Capture time before which every frame has been emitted, given that every packet that
        arrived by ``now`` has been handled: ``now``, unless a jitter buffer (or an SSRC waiting
        for its user) still holds audio from earlier."""
        mark = now
        for stream in self._streams.values():
            since = stream.pending_since()
            if since is not None and since < mark:
                mark = since
        for queue in self._held.values():
            if queue and queue[0][3] < mark:
                mark = queue[0][3]
        for sealed in self._sealed.values():
            if sealed and sealed[0][3] < mark:
                mark = sealed[0][3]
        return mark

    def publish_stats(self, now: float) -> None:
        snapshot = self.stats.snapshot()
        self._publish(
            ReceiveStatsUpdated(
                at=now,
                session_id=self._session_id,
                speakers=snapshot["speakers"],
                unattributed=snapshot["unattributed"],
            )
        )

    def cut(self, *, new_session: bool) -> tuple[str, ...]:
        """The voice connection broke: play out every jitter buffer now and start each stream
        afresh at its next packet (nothing is concealed across the gap, and frame times re-anchor
        on arrival). With ``new_session`` (a rejoin or a move) everything the old session taught is
        forgotten too: the SSRC map (a new session may give an SSRC to someone else), packets held
        for unmapped SSRCs, and the transport key until the new op 4.

        Returns:
            The speakers whose streams were cut, sorted.
        """
        speakers = sorted({self._users[ssrc][0] for ssrc in self._streams if ssrc in self._users})
        for ssrc in list(self._sealed):
            self._drop_sealed(ssrc)
        for ssrc in list(self._streams):
            for frame in self._streams.pop(ssrc).drain():
                self._emit(frame)
        if new_session:
            self.stats.drop_unattributed(reasons.SESSION_RESET, sum(len(q) for q in self._held.values()))
            self._held.clear()
            self._users.clear()
            self._ssrc_of.clear()
            self._cipher = None
        return tuple(speakers)

    def close(self) -> None:
        """Play out every jitter buffer (shutdown)."""
        for ssrc in list(self._streams):
            for frame in self._streams.pop(ssrc).drain():
                self._emit(frame)

    def _hold(self, ssrc: int, packet: tuple[int, int, bytes, float]) -> None:
        queue = self._held.get(ssrc)
        if queue is None:
            if len(self._held) >= _MAX_HELD_SSRCS:
                self.stats.drop_unattributed(reasons.PENDING_OVERFLOW)
                return
            queue = self._held[ssrc] = collections.deque()
        if len(queue) >= self._settings.pending_per_ssrc:
            queue.popleft()
            self.stats.drop_unattributed(reasons.PENDING_OVERFLOW)
        queue.append(packet)

    def _deliver(
        self,
        ssrc: int,
        user: tuple[str, int | None],
        sequence: int,
        timestamp: int,
        payload: bytes,
        arrival: float,
    ) -> None:
        user_id, numeric_id = user
        counters = self.stats.speaker(user_id)
        counters.packets += 1
        # Silence frames are sent unencrypted by clients and passed through by the SFU (notes §3).
        if payload != OPUS_SILENCE and self._dave_source is not None:
            dave = self._dave_source()
            if dave is not None:
                caught_up = ssrc not in self._sealed or self._retry_sealed(ssrc, user, dave)
                opened = _open_dave(dave, numeric_id, payload)
                if isinstance(opened, str):
                    self._seal(ssrc, user_id, (sequence, timestamp, payload, arrival, opened))
                    return
                if not caught_up:  # newer frames open, the held ones never will
                    self._drop_sealed(ssrc)
                payload = opened
        self._push(ssrc, user_id, sequence, timestamp, payload, arrival)

    def _push(
        self, ssrc: int, user_id: str, sequence: int, timestamp: int, payload: bytes, arrival: float
    ) -> None:
        stream = self._streams.get(ssrc)
        if stream is None:
            stream = self._streams[ssrc] = JitterBuffer(
                speaker_id=user_id,
                counters=self.stats.speaker(user_id),
                settings=self._jitter,
                frame_ids=self._frame_ids.setdefault(user_id, itertools.count()),
            )
        for frame in stream.push(sequence, timestamp, payload, arrival):
            self._emit(frame)

    def _seal(self, ssrc: int, user_id: str, packet: tuple[int, int, bytes, float, str]) -> None:
        """Hold a frame DAVE cannot open yet (bounded: the oldest is dropped and counted)."""
        queue = self._sealed.setdefault(ssrc, collections.deque())
        if len(queue) >= self._settings.dave_hold_packets:
            self.stats.speaker(user_id).drop(queue.popleft()[4])
        queue.append(packet)

    def _retry_sealed(self, ssrc: int, user: tuple[str, int | None], dave: DaveDecryptor) -> bool:
        """Try the held frames again, oldest first (davey refuses a frame older than one it has
        already opened); False, with nothing changed, while the oldest still cannot be opened."""
        user_id, numeric_id = user
        queue = self._sealed[ssrc]
        first = _open_dave(dave, numeric_id, queue[0][2])
        if isinstance(first, str):
            return False
        counters = self.stats.speaker(user_id)
        del self._sealed[ssrc]
        for i, (sequence, timestamp, payload, arrival, reason) in enumerate(queue):
            opened = first if i == 0 else _open_dave(dave, numeric_id, payload)
            if isinstance(opened, str):
                counters.drop(reason)
                continue
            counters.dave_late += 1
            self._push(ssrc, user_id, sequence, timestamp, opened, arrival)
        return True

    def _drop_sealed(self, ssrc: int, before: float | None = None) -> None:
        """Give up on held DAVE frames (all, or those that arrived before ``before``), counted."""
        queue = self._sealed.get(ssrc)
        user = self._users.get(ssrc)
        while queue and (before is None or queue[0][3] < before):
            reason = queue.popleft()[4]
            if user is not None:
                self.stats.speaker(user[0]).drop(reason)
        if not queue:
            self._sealed.pop(ssrc, None)

    def _close(self, ssrc: int) -> None:
        self._drop_sealed(ssrc)
        user = self._users.pop(ssrc, None)
        if user is not None and self._ssrc_of.get(user[0]) == ssrc:
            del self._ssrc_of[user[0]]
        stream = self._streams.pop(ssrc, None)
        if stream is not None:
            for frame in stream.drain():
                self._emit(frame)


def _open_dave(dave: DaveDecryptor, numeric_id: int | None, payload: bytes) -> bytes | str:
    """The frame DAVE-decrypted, or the drop reason when it cannot be (yet)."""
    if not dave.ready:
        # Joining an E2EE call, or re-joining after op 31: frames are sealed with keys we do not
        # have yet, and decoding them as plain Opus would only produce noise.
        return reasons.DAVE_NOT_READY
    if numeric_id is None:
        return reasons.DAVE_DECRYPT_FAILED  # DAVE needs a numeric user id
    try:
        return dave.decrypt(numeric_id, davey.MediaType.audio, payload)
    except Exception:  # davey raises plain ValueError/RuntimeError; the reason is enough
        return reasons.DAVE_DECRYPT_FAILED
