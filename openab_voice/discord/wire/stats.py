"""Receive counters: per speaker, plus drops that no speaker can be blamed for.

A packet is *attributed* once transport decryption proved where it came from and its SSRC maps to
a user; everything rejected before that (random bytes, RTCP, keepalives, failed transport
authentication, SSRCs that never mapped, a full inbox) is counted under ``unattributed``. What the bot
itself sends on the voice socket besides media (the UDP keep-alive) is counted under ``udp_sent``. The
receive worker thread owns these objects; other threads only ever see :meth:`ReceiveStats.snapshot`
copies, which are plain JSON-able dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

# Stable drop-reason names (lowercase; safe to match on in tests, dashboards and reports).
RTP_TRUNCATED: Final = "rtp_truncated"
RTP_BAD_VERSION: Final = "rtp_bad_version"
TRANSPORT_DECRYPT_FAILED: Final = "transport_decrypt_failed"
NO_TRANSPORT_KEY: Final = "no_transport_key"
OVERSIZE: Final = "oversize"
RTCP: Final = "rtcp"
KEEPALIVE: Final = "keepalive"
IP_DISCOVERY: Final = "ip_discovery"
UNKNOWN_SSRC_EXPIRED: Final = "unknown_ssrc_expired"
PENDING_OVERFLOW: Final = "pending_overflow"
SESSION_RESET: Final = "session_reset"  # held for an SSRC of a voice session that was replaced
DAVE_DECRYPT_FAILED: Final = "dave_decrypt_failed"
DAVE_NOT_READY: Final = "dave_not_ready"
LATE: Final = "late"
DUPLICATE: Final = "duplicate"
QUEUE_FULL: Final = "queue_full"
OPUS_DECODE_FAILED: Final = "opus_decode_failed"
INTERNAL_ERROR: Final = "internal_error"

# What the bot sent on its voice UDP socket besides media (``ReceiveStats.count_sent``).
UDP_KEEPALIVE: Final = "keepalive"
UDP_KEEPALIVE_FAILED: Final = "keepalive_failed"  # the send raised (full buffer, socket closed)
UDP_KEEPALIVE_NO_SOCKET: Final = "keepalive_no_socket"  # no open socket at the time (between sessions)


def reason_for_code(code: str) -> str:
    """The drop reason for a :class:`~openab_voice.errors.PacketError` code (``RTP_TRUNCATED`` → ``rtp_truncated``)."""
    return code.lower()


@dataclass(slots=True)
class SpeakerCounters:
    """Cumulative receive counters of one speaker.

    Attributes:
        packets: authentic packets attributed to the speaker (before DAVE and the jitter buffer).
        decoded_frames: frames delivered, concealed ones included.
        decoded_ms: milliseconds of audio delivered, concealed audio included.
        lost: packets never received (detected as sequence gaps), whether concealed or not.
        concealed: frames synthesized by Opus FEC or PLC in place of lost packets (<= lost).
        dropped: packets dropped after attribution, by reason.
        dave_late: DAVE frames decrypted only after they waited for the session to catch up (a
            transition, op 31): held, not lost.
        trimmed_ms: milliseconds of audio cut from the start of frames whose time was already
            covered, after a talk spurt's anchor moved earlier (:mod:`~openab_voice.discord.wire.jitter`).
    """

    packets: int = 0
    decoded_frames: int = 0
    decoded_ms: float = 0.0
    lost: int = 0
    concealed: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    dave_late: int = 0
    trimmed_ms: float = 0.0

    def drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` packets dropped for ``reason``."""
        self.dropped[reason] = self.dropped.get(reason, 0) + count

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able copy."""
        return {
            "packets": self.packets,
            "decoded_frames": self.decoded_frames,
            "decoded_ms": round(self.decoded_ms, 3),
            "lost": self.lost,
            "concealed": self.concealed,
            "dropped": dict(self.dropped),
            "dave_late": self.dave_late,
            "trimmed_ms": round(self.trimmed_ms, 3),
        }


class ReceiveStats:
    """All receive counters of one voice connection."""

    def __init__(self) -> None:
        self._speakers: dict[str, SpeakerCounters] = {}
        self._unattributed: dict[str, int] = {}
        self._sent: dict[str, int] = {}

    def speaker(self, user_id: str) -> SpeakerCounters:
        """The counters of ``user_id``, created on first use; kept after the user leaves."""
        counters = self._speakers.get(user_id)
        if counters is None:
            counters = self._speakers[user_id] = SpeakerCounters()
        return counters

    def drop_unattributed(self, reason: str, count: int = 1) -> None:
        """Count ``count`` packets dropped before they could be attributed to a speaker."""
        if count:
            self._unattributed[reason] = self._unattributed.get(reason, 0) + count

    def unattributed(self, reason: str) -> int:
        """How many unattributed packets were dropped for ``reason``."""
        return self._unattributed.get(reason, 0)

    def count_sent(self, kind: str) -> None:
        """Count one datagram the bot sent (or failed to send) on its voice socket that is not media:
        the UDP keep-alive (:mod:`~openab_voice.discord.wire.keepalive`)."""
        self._sent[kind] = self._sent.get(kind, 0) + 1

    def sent(self, kind: str) -> int:
        """How many datagrams of ``kind`` :meth:`count_sent` counted."""
        return self._sent.get(kind, 0)

    def snapshot(self) -> dict[str, Any]:
        """``{"speakers": {user_id: {...}}, "unattributed": {reason: n}, "udp_sent": {kind: n}}``,
        JSON-able and detached."""
        return {
            "speakers": {uid: c.to_dict() for uid, c in self._speakers.items()},
            "unattributed": dict(self._unattributed),
            "udp_sent": dict(self._sent),
        }
