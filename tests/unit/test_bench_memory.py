"""``bench memory`` and ``bench transcript`` at small sizes: the figures are there and the exact and
the inverted-file index both find the true nearest records."""

from __future__ import annotations

import pytest

from openab_voice.bench import memory as memory_bench
from openab_voice.bench import transcript as transcript_bench
from openab_voice.memory import long_term


def test_bench_memory_exact_index() -> None:
    result = memory_bench.run(records=300, sentences_n=5, queries=5, bases=20)
    assert result["ok"] and result["check_ok"] and result["records"] == 300
    assert result["search_ms"]["index"] == "IndexIDMap" and result["recall_at_5"] == 1.0
    assert result["embed_ms"]["n"] == 5 and result["embed_cpu_ms"]["p95"] is not None


def test_bench_memory_inverted_file_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_term, "EXACT_UP_TO", 100)
    result = memory_bench.run(records=2000, sentences_n=3, queries=10, bases=20)
    assert result["search_ms"]["index"] == "IndexIVFFlat"
    assert result["recall_at_5"] >= 0.9 and result["check_ok"]


def test_bench_transcript_small() -> None:
    result = transcript_bench.run(speakers=3, hours=0.05, trials=1)
    assert result["lines"] == 90 and result["ok"]
    assert result["txt_bytes"] > 90 * 60 and result["json_bytes"] > result["txt_bytes"]
    assert result["command_ms"]["n"] == 1
