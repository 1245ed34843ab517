"""The meeting record's rows: recorded voice sessions and their transcript lines.

:class:`TranscriptStore` holds, per voice session (``OPENAB_TRANSCRIPT_STORE``), each speaker's finals
and what the bot was heard saying, with speaker and wall times, in the job store's database.
Retention (``OPENAB_TRANSCRIPT_RETENTION_DAYS``) is :meth:`TranscriptStore.purge`. Synchronous and
thread-safe like :class:`~openab_voice.store.jobs.JobStore`: async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import sessionmaker

from openab_voice.store.database import translate_errors
from openab_voice.store.models import NAME_LENGTH, TranscriptLine, VoiceSessionRow

__all__ = ["LineKind", "NewLine", "RecordedSession", "StoredLine", "TranscriptStore"]


class LineKind(StrEnum):
    SPEECH = "speech"
    """A speaker's final."""
    BOT = "bot"
    """What the bot was heard saying (interrupted speech only up to where it was cut)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewLine:
    kind: LineKind
    speaker_id: str
    speaker_name: str
    text: str
    started_at: float
    ended_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredLine(NewLine):
    id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedSession:
    id: str
    guild_id: int
    channel_id: int
    channel_name: str
    started_at: float
    ended_at: float | None
    audience: frozenset[int]


class TranscriptStore:
    """Recorded voice sessions and their lines.

    Args:
        engine: from :func:`openab_voice.store.database.open_engine`, migrated to head. The caller
            owns it.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def open_session(
        self, session_id: str, *, guild_id: int, channel_id: int, channel_name: str, started_at: float
    ) -> None:
        """Record that a voice session began (idempotent for the same id)."""
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            if session.get(VoiceSessionRow, session_id) is None:
                session.add(
                    VoiceSessionRow(
                        id=session_id,
                        guild_id=guild_id,
                        channel_id=channel_id,
                        channel_name=channel_name[:NAME_LENGTH],
                        started_at=started_at,
                        ended_at=None,
                        audience=[],
                    )
                )

    def add(self, session_id: str, lines: Sequence[NewLine], *, audience: Collection[int] = ()) -> None:
        """Append lines to a session and widen its audience by ``audience``, in one transaction."""
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            row = session.get(VoiceSessionRow, session_id)
            if row is None:
                raise KeyError(session_id)
            known = set(row.audience)
            fresh = {str(uid) for uid in audience} - known
            if fresh:
                row.audience = sorted(known | fresh)
            session.add_all(
                TranscriptLine(
                    session_id=session_id,
                    kind=line.kind.value,
                    speaker_id=line.speaker_id,
                    speaker_name=line.speaker_name[:NAME_LENGTH],
                    text=line.text,
                    started_at=line.started_at,
                    ended_at=line.ended_at,
                )
                for line in lines
            )

    def close_session(self, session_id: str, *, ended_at: float) -> None:
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            row = session.get(VoiceSessionRow, session_id)
            if row is not None and row.ended_at is None:
                row.ended_at = ended_at

    def session(self, session_id: str) -> RecordedSession | None:
        with translate_errors(self._engine.url), self._sessions() as session:
            row = session.get(VoiceSessionRow, session_id)
            return None if row is None else _session(row)

    def latest(self, guild_id: int) -> RecordedSession | None:
        """The guild's most recently started recorded session."""
        query = (
            select(VoiceSessionRow)
            .where(VoiceSessionRow.guild_id == guild_id)
            .order_by(VoiceSessionRow.started_at.desc())
            .limit(1)
        )
        with translate_errors(self._engine.url), self._sessions() as session:
            row = session.scalars(query).first()
            return None if row is None else _session(row)

    def lines(self, session_id: str, *, limit: int | None = None) -> list[StoredLine]:
        """The session's lines in spoken order (by start time); the first ``limit`` when given."""
        query = (
            select(TranscriptLine)
            .where(TranscriptLine.session_id == session_id)
            .order_by(TranscriptLine.started_at, TranscriptLine.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with translate_errors(self._engine.url), self._sessions() as session:
            return [
                StoredLine(
                    id=row.id,
                    kind=LineKind(row.kind),
                    speaker_id=row.speaker_id,
                    speaker_name=row.speaker_name,
                    text=row.text,
                    started_at=row.started_at,
                    ended_at=row.ended_at,
                )
                for row in session.scalars(query)
            ]

    def purge(self, *, started_before: float) -> int:
        """Delete the sessions that started before ``started_before`` with their lines; how many."""
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            old = select(VoiceSessionRow.id).where(VoiceSessionRow.started_at < started_before)
            ids = list(session.scalars(old))
            if ids:
                session.execute(delete(TranscriptLine).where(TranscriptLine.session_id.in_(ids)))
                session.execute(delete(VoiceSessionRow).where(VoiceSessionRow.id.in_(ids)))
            return len(ids)


def _session(row: VoiceSessionRow) -> RecordedSession:
    return RecordedSession(
        id=row.id,
        guild_id=row.guild_id,
        channel_id=row.channel_id,
        channel_name=row.channel_name,
        started_at=row.started_at,
        ended_at=row.ended_at,
        audience=frozenset(int(uid) for uid in row.audience if str(uid).isdigit()),
    )
