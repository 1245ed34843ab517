"""Long-term memory: typed records in SQL, their vectors in a FAISS ``IndexIDMap`` over an inner-product
index of unit vectors (cosine similarity), and the consistency between the two.

:meth:`LongTermMemory.open` runs the consistency check before anything is read: the vector file's
embedder fingerprint against the embedder's, the set of row ids against the set of vector ids, each
row's content checksum and each vector's sha256 against what its row recorded, and a torn tail. Any
mismatch makes :attr:`health` an error: then :meth:`search` returns nothing and :meth:`save`
refuses, until :meth:`rebuild` (``openab-voice memory rebuild``) re-embeds every row that still
verifies and drops those that do not. A save passes the sensitivity filter first; a refusal says why.

Synchronous and thread-safe (one lock); the conversation and the tools call it through
``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, ProviderUnavailable, VectorFileError
from openab_voice.memory.embedder import Embedder
from openab_voice.memory.sensitivity import refusal
from openab_voice.memory.vectors import VectorLog, read_vectors, vector_sha, write_vectors
from openab_voice.settings.defaults import default_of
from openab_voice.settings.store import StoreSettings
from openab_voice.store.memory_rows import MemoryRecord, MemoryRows, NewMemory, content_checksum

__all__ = ["Health", "LongTermMemory", "MemoryHit", "MemoryKind", "SaveRefused"]

log = logging.getLogger(__name__)

MAX_TEXT: Final = 500
EXACT_UP_TO: Final = 20_000
UNAVAILABLE: Final = "memory failed its consistency check; run `openab-voice memory rebuild`"


class MemoryKind(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    PROJECT = "project"
    TASK_SUMMARY = "task_summary"


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """The consistency check's verdict.

    Attributes:
        code: None when consistent, else ``MEMORY_EMBEDDER_CHANGED``, ``MEMORY_INDEX_MISSING``,
            ``MEMORY_INDEX_CORRUPT``, ``MEMORY_INDEX_MISMATCH`` or ``MEMORY_ROW_CORRUPT``.
        records: rows checked.
        seconds: how long the check took.
    """

    code: str | None
    reason: str
    records: int
    seconds: float

    @property
    def ok(self) -> bool:
        return self.code is None


@dataclass(frozen=True, slots=True)
class SaveRefused:
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHit:
    record: MemoryRecord
    score: float


class LongTermMemory:
    """Records and vectors for every guild, one process.

    Args:
        path: the vector file (beside the SQLite store by default).
        min_score: hits less similar than this are not returned.
    """

    def __init__(
        self,
        rows: MemoryRows,
        embedder: Embedder,
        *,
        path: Path,
        clock: Clock,
        min_score: float = default_of(StoreSettings, "memory_min_score"),
    ) -> None:
        self._rows = rows
        self._embedder = embedder
        self._path = path
        self._clock = clock
        self._min_score = min_score
        self._lock = threading.Lock()
        self._index: Any = None
        self._log: VectorLog | None = None
        self._health = Health(
            code=ErrorCode.MEMORY_NOT_OPEN, reason="not checked yet", records=0, seconds=0.0
        )

    @property
    def health(self) -> Health:
        return self._health

    # --- lifecycle ------------------------------------------------------------------------------

    def open(self) -> Health:
        """Run the consistency check and load the index (nothing is returned before it passed)."""
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None
            self._health = self._check()
            if self._health.ok:
                self._log = VectorLog(self._path)
            return self._health

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def rebuild(self) -> Health:
        """Re-embed every row whose content checksum still verifies (drop the others) and rewrite
        the vector file; then check again."""
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None
            kept: list[tuple[int, Any]] = []
            dropped = 0
            for record in list(self._rows.all()):
                if record.checksum != _checksum(record):
                    self._rows.delete(record.id)
                    dropped += 1
                    continue
                vector = self._embedder.embed([record.text])[0]
                self._rows.set_vector_sha(record.id, vector_sha(vector))
                kept.append((record.id, vector))
            write_vectors(
                self._path, fingerprint=self._embedder.fingerprint, dim=self._embedder.dimension, items=kept
            )
            if dropped:
                log.warning("memory rebuild: %d record(s) failed their checksum and were dropped", dropped)
            self._health = self._check()
            if self._health.ok:
                self._log = VectorLog(self._path)
            return self._health

    # --- use ------------------------------------------------------------------------------------

    def save(
        self, *, guild_id: int, kind: MemoryKind, text: str, speaker_id: str, source: str
    ) -> MemoryRecord | SaveRefused:
        """Save one record under ``speaker_id``, or say why not (sensitive, empty, memory unhealthy)."""
        text = " ".join(text.split())[:MAX_TEXT]
        if not text:
            return SaveRefused("there is nothing to remember")
        why = refusal(text)
        if why is not None:
            return SaveRefused(f"not saved: {why}")
        vector = self._embedder.embed([text])[0]
        with self._lock:
            if not self._health.ok or self._log is None:
                return SaveRefused(UNAVAILABLE)
            record = self._rows.insert(
                NewMemory(
                    guild_id=guild_id,
                    kind=kind.value,
                    text=text,
                    speaker_id=speaker_id,
                    source=source,
                    sensitivity="none",
                    created_at=self._clock.wall(),
                    vector_sha=vector_sha(vector),
                )
            )
            # Row first, then vector: a crash in between leaves a row without a vector, which the next
            # check reports (MEMORY_INDEX_MISMATCH) instead of a vector pointing at nothing.
            self._log.add(record.id, vector)
            self._index.add_with_ids(vector.reshape(1, -1), np.asarray([record.id], dtype=np.int64))
            return record

    def search(self, *, guild_id: int, query: str, k: int = 3) -> list[MemoryHit]:
        """The ``k`` records of ``guild_id`` most similar to ``query`` (none while unhealthy)."""
        if not query.strip() or k <= 0:
            return []
        vector = self._embedder.embed([query])[0]
        with self._lock:
            if not self._health.ok or self._index is None or self._index.ntotal == 0:
                return []
            # Records of every guild share the index: ask for more than k, keep this guild's.
            wanted = min(int(self._index.ntotal), max(k * 8, 32))
            scores, ids = self._index.search(vector.reshape(1, -1), wanted)
        pairs = [
            (int(i), float(s))
            for i, s in zip(ids[0], scores[0], strict=True)
            if i >= 0 and s >= self._min_score
        ]
        records = self._rows.get_many([i for i, _ in pairs])
        hits: list[MemoryHit] = []
        for record_id, score in pairs:
            record = records.get(record_id)
            # Checked again on the way out: a row edited since the start is not returned.
            if record is None or record.guild_id != guild_id or record.checksum != _checksum(record):
                continue
            hits.append(MemoryHit(record=record, score=score))
            if len(hits) == k:
                break
        return hits

    def recent(self, *, guild_id: int, speaker_id: str | None = None, limit: int = 20) -> list[MemoryRecord]:
        if not self._health.ok:
            return []
        return [
            r
            for r in self._rows.recent(guild_id, speaker_id=speaker_id, limit=limit)
            if r.checksum == _checksum(r)
        ]

    def forget(self, record_id: int, *, guild_id: int, user_id: int, operator_id: int | None) -> str | None:
        """Delete a record; None when done, else why not. Only its speaker or the operator may."""
        with self._lock:
            if not self._health.ok or self._log is None:
                return UNAVAILABLE
            record = self._rows.get_many([record_id]).get(record_id)
            if record is None or record.guild_id != guild_id:
                return f"no memory {record_id} here"
            if str(user_id) != record.speaker_id and user_id != operator_id:
                return "only the person it is about, or the operator, can forget it"
            self._rows.delete(record_id)
            self._log.delete(record_id)
            self._index.remove_ids(np.asarray([record_id], dtype=np.int64))
            return None

    # --- the consistency check ------------------------------------------------------------------

    def _check(self) -> Health:
        started = self._clock.monotonic()
        faiss = _faiss()
        embedder = self._embedder
        self._index = faiss.IndexIDMap(faiss.IndexFlatIP(embedder.dimension))
        rows = {record.id: record for record in self._rows.all()}

        def verdict(code: str | None, reason: str) -> Health:
            return Health(
                code=code, reason=reason, records=len(rows), seconds=self._clock.monotonic() - started
            )

        if not self._path.exists():
            if rows:
                return verdict(
                    ErrorCode.MEMORY_INDEX_MISSING, f"{len(rows)} records but no vector file at {self._path}"
                )
            write_vectors(self._path, fingerprint=embedder.fingerprint, dim=embedder.dimension, items=())
            return verdict(None, "empty")
        try:
            vectors = read_vectors(self._path)
        except VectorFileError as exc:
            return verdict(ErrorCode.MEMORY_INDEX_CORRUPT, exc.message)
        except OSError as exc:
            return verdict(ErrorCode.MEMORY_INDEX_CORRUPT, str(exc))
        if vectors.fingerprint != embedder.fingerprint or vectors.dim != embedder.dimension:
            return verdict(
                ErrorCode.MEMORY_EMBEDDER_CHANGED,
                f"vectors were made by {vectors.fingerprint}, the embedder is {embedder.fingerprint}",
            )
        if vectors.torn_bytes:
            return verdict(
                ErrorCode.MEMORY_INDEX_CORRUPT, f"the vector file ends in {vectors.torn_bytes} torn bytes"
            )
        if set(vectors.by_id) != set(rows):
            missing, orphans = len(set(rows) - set(vectors.by_id)), len(set(vectors.by_id) - set(rows))
            return verdict(
                ErrorCode.MEMORY_INDEX_MISMATCH,
                f"{missing} rows without a vector, {orphans} vectors without a row",
            )
        for record_id, record in rows.items():
            if record.checksum != _checksum(record):
                return verdict(
                    ErrorCode.MEMORY_ROW_CORRUPT, f"record {record_id} does not match its checksum"
                )
            if record.vector_sha != vector_sha(vectors.by_id[record_id]):
                return verdict(
                    ErrorCode.MEMORY_INDEX_CORRUPT, f"the vector of record {record_id} does not match its row"
                )
        if rows:
            ids = np.fromiter(rows, dtype=np.int64, count=len(rows))
            matrix = np.stack([vectors.by_id[i] for i in rows])
            self._index = _index_for(faiss, embedder.dimension, matrix)
            self._index.add_with_ids(matrix, ids)
        return verdict(None, f"{len(rows)} records verified")


def _index_for(faiss: Any, dim: int, matrix: npt.NDArray[np.float32]) -> Any:
    """An exact ``IndexIDMap`` over an inner-product index up to :data:`EXACT_UP_TO` vectors; above,
    an inverted-file index (``IndexIVFFlat``, inner product, ``2·√n`` lists, k-means trained on a
    sample of the stored vectors; faiss keeps the quantizer alive with the index; ``nprobe`` a 32nd
    of the lists), so a top-5 search at 100,000 records scans a few thousand vectors instead of all
    of them. Ids are the rows' ids either way."""
    n = len(matrix)
    if n <= EXACT_UP_TO:
        return faiss.IndexIDMap(faiss.IndexFlatIP(dim))
    lists = int(2 * np.sqrt(n))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, lists, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    sample = np.random.default_rng(0).choice(n, size=min(n, lists * 40), replace=False)
    index.train(matrix[np.sort(sample)])
    index.nprobe = max(8, lists // 32)
    return index


def _checksum(record: MemoryRecord) -> str:
    return content_checksum(
        guild_id=record.guild_id,
        kind=record.kind,
        speaker_id=record.speaker_id,
        text=record.text,
        created_at=record.created_at,
    )


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise ProviderUnavailable(
            "long-term memory needs faiss-cpu: pip install 'openab-voice[memory]'",
            code=ErrorCode.PROVIDER_UNAVAILABLE,
        ) from None
    return faiss
