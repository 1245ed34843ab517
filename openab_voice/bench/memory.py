"""Memory benchmark: the offline embedder per sentence on one core, top-5 search and the consistency
check at ``records`` records (default 100,000).

Figures: ``embed_cpu_ms`` / ``embed_ms``, ``search_ms``, ``recall_ms``, ``recall_at_5`` and
``check_s``; each target is reported beside its figure (``target_p95``).
Method and targets: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from openab_voice.bench.stats import summary
from openab_voice.clock import SystemClock, perf_ns, thread_cpu_ns
from openab_voice.memory.embedder import load_minilm
from openab_voice.memory.long_term import LongTermMemory
from openab_voice.memory.vectors import vector_sha, write_vectors
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.memory_rows import MemoryRows, NewMemory

__all__ = ["run"]

GUILD = 1
_SUBJECTS = ("Alice", "Bob", "the team", "Carol", "the build", "the release", "our client", "Dave")
_VERBS = ("prefers", "needs", "asked for", "is working on", "finished", "dislikes", "scheduled", "reviewed")
_OBJECTS = (
    "green tea in the morning",
    "the database migration",
    "a demo on Friday afternoon",
    "shorter meetings",
    "the login page redesign",
    "dark mode in the dashboard",
    "the quarterly report",
    "a new laptop with more memory",
)


def sentences(n: int) -> list[str]:
    """``n`` distinct, ordinary sentences."""
    out = []
    for i in range(n):
        s, v, o = _SUBJECTS[i % 8], _VERBS[(i // 8) % 8], _OBJECTS[(i // 64) % 8]
        out.append(f"{s} {v} {o} (note {i}).")
    return out


def _ms(start: int) -> float:
    return (perf_ns() - start) / 1e6


def run(
    *, records: int = 100_000, sentences_n: int = 50, queries: int = 50, bases: int = 400
) -> dict[str, Any]:
    embedder = load_minilm()
    texts = sentences(sentences_n)
    embedder.embed(texts[:3])  # warm up
    embed, embed_cpu = [], []
    for text in texts:
        start, cpu_start = perf_ns(), thread_cpu_ns()
        embedder.embed([text])
        embed.append(_ms(start))
        embed_cpu.append((thread_cpu_ns() - cpu_start) / 1e6)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="openab-bench-memory-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'store.db'}"
        upgrade(url)
        engine = open_engine(url)
        try:
            # Topics, as real memories have: each record is one of ``bases`` real sentence embeddings
            # plus noise (cosine ~0.86 to its base), so an approximate index meets the structure it is
            # built for; the queries are real embeddings of those sentences.
            base = embedder.embed(sentences(bases))
            noise = rng.standard_normal((records, embedder.dimension), dtype=np.float32) * np.float32(0.03)
            vectors = base[np.arange(records) % bases] + noise
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            bulk = sentences(records)
            rows = MemoryRows(engine)
            ids: list[int] = []
            for first in range(0, records, 10_000):
                batch = [
                    NewMemory(
                        guild_id=GUILD,
                        kind="fact",
                        text=bulk[i],
                        speaker_id=str(1000 + i % 10),
                        source="bench",
                        sensitivity="none",
                        created_at=1_700_000_000.0 + i,
                        vector_sha=vector_sha(vectors[i]),
                    )
                    for i in range(first, min(records, first + 10_000))
                ]
                ids.extend(rows.insert_many(batch))
            path = Path(tmp) / "vectors.bin"
            write_vectors(
                path,
                fingerprint=embedder.fingerprint,
                dim=embedder.dimension,
                items=((record_id, vectors[i]) for i, record_id in enumerate(ids)),
            )
            memory = LongTermMemory(rows, embedder, path=path, clock=SystemClock(), min_score=-1.0)
            start = perf_ns()
            health = memory.open()
            check_s = _ms(start) / 1000.0
            asked = sentences(queries)
            query_vectors = embedder.embed(asked)
            index = memory._index  # the FAISS index itself, for the search-only figure
            search, recall = [], []
            found = 0
            for i, text in enumerate(asked):
                start = perf_ns()
                _, top = index.search(query_vectors[i : i + 1], 5)
                search.append(_ms(start))
                exact = {ids[j] for j in np.argsort(-(vectors @ query_vectors[i]))[:5]}
                found += len(exact & {int(t) for t in top[0]})
                start = perf_ns()
                hits = memory.search(guild_id=GUILD, query=text, k=5)
                recall.append(_ms(start))
                assert len(hits) == 5
            memory.close()
        finally:
            engine.dispose()
    return {
        "bench": "memory",
        "embedder": embedder.fingerprint,
        "records": records,
        "embed_ms": summary(embed),
        "embed_cpu_ms": summary(embed_cpu) | {"target_p95": 60.0},
        "search_ms": summary(search) | {"k": 5, "target_p95": 10.0, "index": type(index).__name__},
        "recall_at_5": round(found / (5 * queries), 3),
        "recall_ms": summary(recall),
        "check_s": round(check_s, 2),
        "check_ok": health.ok,
        "ok": health.ok,
    }
