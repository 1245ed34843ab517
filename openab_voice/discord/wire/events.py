"""What the Discord side reports on the bus: the voice connection and its gaps, DAVE, speakers and
their receive stats, playback, and slash commands. (``AudienceChanged`` stays in
:mod:`openab_voice.bus.events`: the action plane, a layer below, reads it.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openab_voice.bus.events import Event


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceConnected(Event):
    guild_id: str
    channel_id: str
    channel_name: str
    dave_enabled: bool
    privacy_code: str | None
    transport_mode: str
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceDisconnected(Event):
    guild_id: str
    channel_id: str | None
    reason: str
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceGapStarted(Event):
    """The voice session was interrupted mid-call and the bot is recovering it
    (``docs/voice-session-life.md``).

    Attributes:
        cause: ``voice_server_crash`` (close 4015), ``network`` (the socket dropped, no Discord
            code), ``session_invalid`` (4006 and the like), ``server_move`` (a new
            VOICE_SERVER_UPDATE) or ``gateway`` (the main gateway, not the voice connection).
        close_code: the voice websocket's close code, when there was one.
        recovery: ``resume`` (op 7, same session), ``rejoin`` (a new session), ``reconnect``
            (identify at the new endpoint) or ``none`` (voice was not affected).
        media_interrupted: speech in progress was ended at the gap and playback stopped.
    """

    guild_id: str
    cause: str
    close_code: int | None
    recovery: str
    media_interrupted: bool
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class VoiceGap(Event):
    """A gap in the voice session, over (``at`` is when media could flow again, or when the bot
    gave up): its cause, its duration, and how it was recovered. Never merged into speech: each
    speaker's utterance in progress was ended where the gap began (``speakers_cut``).

    Attributes:
        cause / close_code / media_interrupted: as in :class:`VoiceGapStarted`.
        recovery: how it was recovered in the end (a failed resume becomes a ``rejoin``).
        started_at: when the gap began.
        duration_s: ``at - started_at``.
        recovered: False when the bot could not get back into the call.
        speakers_cut: speakers whose receive stream was cut at the gap (their speech in progress ended).
        playback_interrupted: the bot was speaking and was cut at the played position.
        attempts: connection attempts the recovery took.
    """

    guild_id: str
    cause: str
    close_code: int | None
    recovery: str
    started_at: float
    duration_s: float
    recovered: bool
    media_interrupted: bool
    speakers_cut: tuple[str, ...] = ()
    playback_interrupted: bool = False
    attempts: int = 1
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class DaveStateChanged(Event):
    enabled: bool
    privacy_code: str | None
    epoch: int | None
    stage: str = "discord"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeakerMapped(Event):
    """An SSRC was attributed to a user (voice gateway op 5); ``buffered`` early packets were flushed."""

    speaker_id: str
    ssrc: int
    buffered: int
    stage: str = "receive"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeakerLeft(Event):
    speaker_id: str
    ssrc: int | None
    stage: str = "receive"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiveStatsUpdated(Event):
    """Periodic snapshot of per-speaker receive counters (see ``discord.stats``)."""

    speakers: dict[str, dict[str, Any]] = field(default_factory=dict)
    unattributed: dict[str, int] = field(default_factory=dict)
    stage: str = "receive"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybackStarted(Event):
    utterance_id: str
    stage: str = "playback"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaybackFinished(Event):
    """An utterance stopped playing: ``played_ms`` of audio reached Discord."""

    utterance_id: str
    played_ms: float
    interrupted: bool
    stage: str = "playback"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandInvoked(Event):
    command: str
    user_id: str
    ok: bool
    detail: str = ""
    stage: str = "discord"
