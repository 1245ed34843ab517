"""``bench tts``: its report compares the first chunk's P95 with the target for its load."""

from __future__ import annotations

from openab_voice.bench.tts import TARGET_IDLE_MS, TARGET_LOADED_MS, Timings, report


def _timings(first_chunk_ms: list[float]) -> Timings:
    return Timings(first_chunk_ms=first_chunk_ms, whole_ms=[x + 100 for x in first_chunk_ms], split=2)


def test_the_target_is_the_p95_for_the_load_it_ran_under() -> None:
    # 19 quick first chunks and one slow one: P50 60, P95 between them, above 150 and under 250.
    samples = _timings([60.0] * 18 + [200.0, 200.0])
    whole = _timings([180.0] * 20)
    idle = report(samples, whole, rounds=1, load=0, first_chunk_words=4)
    loaded = report(samples, whole, rounds=1, load=1, first_chunk_words=4)
    assert idle["tts_first_chunk_ms"]["p50"] == 60.0 and 150.0 < idle["tts_first_chunk_ms"]["p95"] < 250.0
    assert idle["targets"] == {"tts_first_chunk_ms": TARGET_IDLE_MS}
    assert idle["meets_targets"] == {"tts_first_chunk_ms": False}
    assert loaded["targets"] == {"tts_first_chunk_ms": TARGET_LOADED_MS}
    assert loaded["meets_targets"] == {"tts_first_chunk_ms": True}
    assert idle["diagnostics"]["whole_sentence_first_chunk_ms"]["p95"] == 180.0


def test_no_samples_meets_no_target() -> None:
    empty = report(Timings(), Timings(), rounds=1, load=0, first_chunk_words=4)
    assert empty["meets_targets"] == {"tts_first_chunk_ms": False}
