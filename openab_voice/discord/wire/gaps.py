"""The gaps in one voice session: the open ones and their events (``docs/voice-session-life.md``).

At most one gap of the voice connection is open at a time (a refused RESUME escalates the open gap's
recovery instead of opening another), and one of the main gateway beside it. A gap opens with
:class:`~openab_voice.bus.events.VoiceGapStarted` and closes with
:class:`~openab_voice.bus.events.VoiceGap`, which carries its cause, duration and recovery.

The receive streams are cut on the receive worker's thread, which may run behind: a RESUME can be
back (op 9, milliseconds later) before the worker has said whose speech it cut. A recovered gap
therefore closes once every cut it asked for is in (:meth:`GapLog.expect_cut`,
:meth:`GapLog.add_cut`), its duration still ending when media was back.
"""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.discord.wire.events import VoiceGap, VoiceGapStarted
from openab_voice.discord.wire.reconnect import CAUSE_GATEWAY, Recovery
from openab_voice.discord.wire.voice_client import (
    OP_DAVE_EXECUTE_TRANSITION,
    OP_RESUMED,
    OP_SESSION_DESCRIPTION,
    ReceivingVoiceClient,
)


@dataclass(slots=True)
class OpenGap:
    """A gap not over yet; the session fills in what it did about it."""

    cause: str
    close_code: int | None
    recovery: Recovery
    started_at: float
    media_interrupted: bool
    playback_interrupted: bool = False
    speakers_cut: tuple[str, ...] = ()
    attempts: int = 1
    cuts_pending: int = 0
    back_at: float | None = None  # media flows again; the gap closes once its cuts are in


class GapLog:
    """Opens, escalates and closes a session's gaps and publishes them.

    Attributes:
        voice: the open gap of the voice connection, if any.
        closed: every gap that ended, oldest first.
    """

    def __init__(self, *, bus: EventBus, clock: Clock, session_id: str, guild_id: str) -> None:
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._guild_id = guild_id
        self.voice: OpenGap | None = None
        self._gateway: OpenGap | None = None
        self.closed: list[VoiceGap] = []

    def open(self, cause: str, close_code: int | None, recovery: Recovery) -> OpenGap | None:
        """The voice connection broke; returns the new gap, or None when one was already open
        (its recovery becomes ``recovery``)."""
        if self.voice is not None:
            self.voice.recovery = recovery
            self.voice.back_at = None  # broke again before its cuts were in: not back after all
            return None
        gap = self.voice = OpenGap(cause, close_code, recovery, self._clock.monotonic(), True)
        self._started(gap)
        return gap

    def open_gateway(self) -> None:
        """The main gateway dropped (voice is not affected: nothing is cut)."""
        if self._gateway is None:
            self._gateway = OpenGap(CAUSE_GATEWAY, None, Recovery.NONE, self._clock.monotonic(), False)
            self._started(self._gateway)

    def expect_cut(self) -> None:
        """The open gap's receive streams are being cut: its speakers come with :meth:`add_cut`."""
        if self.voice is not None:
            self.voice.cuts_pending += 1

    def add_cut(self, speakers: tuple[str, ...]) -> None:
        """The speakers a cut ended; a gap already back closes with its last cut."""
        gap = self.voice
        if gap is None:
            return
        gap.speakers_cut = tuple(sorted(set(gap.speakers_cut) | set(speakers)))
        gap.cuts_pending = max(0, gap.cuts_pending - 1)
        if gap.back_at is not None and not gap.cuts_pending:
            self.close(recovered=True)

    def recovered(self) -> None:
        """Media flows again: close the open gap now, or with its last pending cut."""
        gap = self.voice
        if gap is None or gap.back_at is not None:
            return
        gap.back_at = self._clock.monotonic()
        if not gap.cuts_pending:
            self.close(recovered=True)

    def close(self, *, recovered: bool) -> None:
        gap, self.voice = self.voice, None
        if gap is not None:
            self._ended(gap, recovered=recovered)

    def close_gateway(self) -> None:
        gap, self._gateway = self._gateway, None
        if gap is not None:
            self._ended(gap, recovered=True)

    def on_voice_op(self, vc: ReceivingVoiceClient, op: int) -> None:
        """Close the open gap once media can flow again: after a RESUME at op 9 (key, SSRCs and
        DAVE group were kept); on a new session at op 4 with DAVE off, else once a DAVE transition
        executed with the group's keys (op 22)."""
        gap = self.voice
        if gap is None:
            return
        if gap.recovery is Recovery.RESUME:
            back = op == OP_RESUMED
        elif op == OP_SESSION_DESCRIPTION:
            back = vc._connection.dave_protocol_version == 0
        else:
            back = op == OP_DAVE_EXECUTE_TRANSITION and vc.dave_ready
        if back:
            self.recovered()

    def _started(self, gap: OpenGap) -> None:
        self._bus.publish(
            VoiceGapStarted(
                at=gap.started_at,
                session_id=self._session_id,
                guild_id=self._guild_id,
                cause=gap.cause,
                close_code=gap.close_code,
                recovery=gap.recovery.value,
                media_interrupted=gap.media_interrupted,
            )
        )

    def _ended(self, gap: OpenGap, *, recovered: bool) -> None:
        now = self._clock.monotonic() if gap.back_at is None else gap.back_at
        event = VoiceGap(
            at=now,
            session_id=self._session_id,
            guild_id=self._guild_id,
            cause=gap.cause,
            close_code=gap.close_code,
            recovery=gap.recovery.value,
            started_at=gap.started_at,
            duration_s=round(now - gap.started_at, 4),
            recovered=recovered,
            media_interrupted=gap.media_interrupted,
            speakers_cut=gap.speakers_cut,
            playback_interrupted=gap.playback_interrupted,
            attempts=gap.attempts,
        )
        self.closed.append(event)
        self._bus.publish(event)
