"""Long-term memory's rows: typed records with their source speaker, time, sensitivity and checksums.

:class:`MemoryRows` is synchronous and thread-safe like the other repositories (the memory calls it
from a worker thread). :func:`content_checksum` is the one definition of a row's checksum: written
here on insert, verified by the memory's consistency check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import sessionmaker

from openab_voice.store.database import translate_errors
from openab_voice.store.models import MemoryRecordRow

__all__ = ["MemoryRecord", "MemoryRows", "NewMemory", "content_checksum"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMemory:
    guild_id: int
    kind: str
    text: str
    speaker_id: str
    source: str
    sensitivity: str
    created_at: float
    vector_sha: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord(NewMemory):
    id: int
    checksum: str


def content_checksum(*, guild_id: int, kind: str, speaker_id: str, text: str, created_at: float) -> str:
    """sha256 over what a record says and who said it when."""
    parts = (str(guild_id), kind, speaker_id, repr(float(created_at)), text)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def _row(new: NewMemory) -> MemoryRecordRow:
    """The row for ``new``, with its content checksum."""
    return MemoryRecordRow(
        guild_id=new.guild_id,
        kind=new.kind,
        text=new.text,
        speaker_id=new.speaker_id,
        source=new.source,
        sensitivity=new.sensitivity,
        created_at=new.created_at,
        checksum=content_checksum(
            guild_id=new.guild_id,
            kind=new.kind,
            speaker_id=new.speaker_id,
            text=new.text,
            created_at=new.created_at,
        ),
        vector_sha=new.vector_sha,
    )


class MemoryRows:
    """The ``memory_records`` table.

    Args:
        engine: migrated to head; the caller owns it.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def insert(self, new: NewMemory) -> MemoryRecord:
        row = _row(new)
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            session.add(row)
            session.flush()
            return _record(row)

    def insert_many(self, news: Sequence[NewMemory]) -> list[int]:
        """Insert many records in one transaction (an import, the benchmark); their ids in order."""
        rows = [_row(new) for new in news]
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            session.add_all(rows)
            session.flush()
            return [row.id for row in rows]

    def get_many(self, ids: Collection[int]) -> dict[int, MemoryRecord]:
        if not ids:
            return {}
        query = select(MemoryRecordRow).where(MemoryRecordRow.id.in_(list(ids)))
        with translate_errors(self._engine.url), self._sessions() as session:
            return {row.id: _record(row) for row in session.scalars(query)}

    def all(self, *, batch: int = 5000) -> Iterator[MemoryRecord]:
        """Every record, by id, read in batches."""
        last = 0
        while True:
            query = (
                select(MemoryRecordRow)
                .where(MemoryRecordRow.id > last)
                .order_by(MemoryRecordRow.id)
                .limit(batch)
            )
            with translate_errors(self._engine.url), self._sessions() as session:
                rows = [_record(row) for row in session.scalars(query)]
            if not rows:
                return
            yield from rows
            last = rows[-1].id

    def recent(self, guild_id: int, *, speaker_id: str | None = None, limit: int = 20) -> list[MemoryRecord]:
        query = select(MemoryRecordRow).where(MemoryRecordRow.guild_id == guild_id)
        if speaker_id is not None:
            query = query.where(MemoryRecordRow.speaker_id == speaker_id)
        query = query.order_by(MemoryRecordRow.created_at.desc(), MemoryRecordRow.id.desc()).limit(limit)
        with translate_errors(self._engine.url), self._sessions() as session:
            return [_record(row) for row in session.scalars(query)]

    def delete(self, record_id: int) -> bool:
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            row = session.get(MemoryRecordRow, record_id)
            if row is None:
                return False
            session.delete(row)
            return True

    def set_vector_sha(self, record_id: int, vector_sha: str) -> None:
        with translate_errors(self._engine.url), self._sessions.begin() as session:
            row = session.get(MemoryRecordRow, record_id)
            if row is not None:
                row.vector_sha = vector_sha


def _record(row: MemoryRecordRow) -> MemoryRecord:
    return MemoryRecord(
        id=row.id,
        guild_id=row.guild_id,
        kind=row.kind,
        text=row.text,
        speaker_id=row.speaker_id,
        source=row.source,
        sensitivity=row.sensitivity,
        created_at=row.created_at,
        checksum=row.checksum,
        vector_sha=row.vector_sha,
    )
