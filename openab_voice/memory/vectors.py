"""The memory's vector file: an append-only log of (id, vector) beside the SQL rows.

Format: ``OABVEC01``, a little-endian u32 header length, a JSON header (``fingerprint``, ``dim``), then
records: ``A`` + i64 id + ``dim`` float32 (a vector added), or ``D`` + i64 id (removed). Appends are
flushed and fsynced before a save is reported done. A crash mid-append leaves a torn tail, which
:func:`read_vectors` reports (``torn_bytes``) instead of guessing; :func:`write_vectors` replaces
the whole file atomically (write a temporary file, fsync, rename) for a rebuild. The FAISS index is
built from this file at start: adding vectors to an ``IndexFlatIP`` is a copy, so at 100,000
records the log is the persisted form and the index the searchable one.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

import numpy as np
import numpy.typing as npt

from openab_voice.errors import VectorFileError

__all__ = ["VectorLog", "Vectors", "read_vectors", "vector_sha", "write_vectors"]

MAGIC: Final = b"OABVEC01"
_ADD: Final = b"A"
_DELETE: Final = b"D"
_ID = struct.Struct("<q")


@dataclass(slots=True, kw_only=True)
class Vectors:
    fingerprint: str
    dim: int
    by_id: dict[int, npt.NDArray[np.float32]]
    torn_bytes: int = 0


def vector_sha(vector: npt.NDArray[np.float32]) -> str:
    return hashlib.sha256(np.ascontiguousarray(vector, dtype="<f4").tobytes()).hexdigest()


def read_vectors(path: Path) -> Vectors:
    """The live vectors of the file (adds minus deletes).

    Raises:
        VectorFileError: not a vector file.
        OSError: it cannot be read.
    """
    raw = path.read_bytes()
    if raw[: len(MAGIC)] != MAGIC or len(raw) < len(MAGIC) + 4:
        raise VectorFileError(f"{path} is not a memory vector file")
    (length,) = struct.unpack_from("<I", raw, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(raw[start : start + length])
        fingerprint, dim = str(header["fingerprint"]), int(header["dim"])
    except (ValueError, KeyError, TypeError) as exc:
        raise VectorFileError(f"{path}: unreadable header ({exc})") from None
    by_id: dict[int, npt.NDArray[np.float32]] = {}
    offset, size = start + length, dim * 4
    while offset < len(raw):
        op = raw[offset : offset + 1]
        need = 1 + _ID.size + (size if op == _ADD else 0)
        if op not in (_ADD, _DELETE) or offset + need > len(raw):
            break  # a torn or garbled tail
        (record_id,) = _ID.unpack_from(raw, offset + 1)
        if op == _ADD:
            by_id[record_id] = np.frombuffer(
                raw, dtype="<f4", count=dim, offset=offset + 1 + _ID.size
            ).astype(np.float32)
        else:
            by_id.pop(record_id, None)
        offset += need
    return Vectors(fingerprint=fingerprint, dim=dim, by_id=by_id, torn_bytes=len(raw) - offset)


def _header(fingerprint: str, dim: int) -> bytes:
    body = json.dumps({"fingerprint": fingerprint, "dim": dim}).encode()
    return MAGIC + struct.pack("<I", len(body)) + body


def write_vectors(
    path: Path, *, fingerprint: str, dim: int, items: Iterable[tuple[int, npt.NDArray[np.float32]]]
) -> None:
    """Replace the file with exactly ``items``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as handle:
        handle.write(_header(fingerprint, dim))
        for record_id, vector in items:
            handle.write(_ADD + _ID.pack(record_id) + np.ascontiguousarray(vector, dtype="<f4").tobytes())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


class VectorLog:
    """Appends to an existing vector file (open for the memory's lifetime)."""

    def __init__(self, path: Path) -> None:
        self._handle: BinaryIO = path.open("ab")

    def add(self, record_id: int, vector: npt.NDArray[np.float32]) -> None:
        self._write(_ADD + _ID.pack(record_id) + np.ascontiguousarray(vector, dtype="<f4").tobytes())

    def delete(self, record_id: int) -> None:
        self._write(_DELETE + _ID.pack(record_id))

    def _write(self, data: bytes) -> None:
        self._handle.write(data)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()
