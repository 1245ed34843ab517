"""Smoke test of the many-talkers benchmark: two people at once through the emulator (DAVE on, 1 %
loss, real faster-whisper): both of each one's utterances transcribed whole; the report's shape."""

from __future__ import annotations

import json

import pytest

from openab_voice.bench import transcribe

pytestmark = pytest.mark.e2e


def test_two_talkers_at_once_are_transcribed_whole() -> None:
    report = transcribe.run(speakers=2, loss=0.01, seed=3)
    json.dumps(report)
    assert report["speakers"] == 2 and report["utterances"] == 4
    assert report["missing"] == 0 and report["fragments"] == 0
    assert report["finals"] == 4 and report["unattributed_finals"] == 0 and report["out_of_order"] == 0
    assert report["wer"] <= 0.25
    assert report["lag_ms"]["n"] == 4 and report["lag_ms"]["p95"] > 0
    assert report["targets"] == {"lag_p95_ms": 800.0}
    assert report["meets_targets"]["lag_p95_ms"] is (report["lag_ms"]["p95"] <= 800.0)
    assert {u["speaker"] for u in report["per_utterance"]} == {"2001", "2002"}


def test_ten_talkers_at_once_every_utterance_whole_and_in_order() -> None:
    """Overload: more talkers than partial decodes keep up with; finals must still be whole."""
    report = transcribe.run(speakers=10, loss=0.01, seed=0)
    # On failure, say which utterances and why: discarded finals, finals no utterance owns, the lag.
    why = {
        "not_one_final": [u for u in report["per_utterance"] if u["finals"] != 1],
        "discarded": report["discarded"],
        "unattributed_finals": report["unattributed_finals"],
        "lag_ms": report["lag_ms"],
        "backlog": report["backlog"],
        # A front end that fell a second behind a speaker lost that audio, and two of its
        # utterances became one (bench transcribe --load 1: 326 frames, 2 missing, once)
        "front_end_overruns": report["front_end_overruns"],
        "receive_drops": report["receive_drops"],
    }
    assert report["utterances"] == 20 and report["missing"] == 0, why
    assert report["fragments"] == 0, why
    # Whole but misheard: which utterances, as heard (CI saw 0.252 once, with none missing).
    misheard = [u for u in report["per_utterance"] if u.get("wer", 0.0) > 0.0]
    assert report["wer"] <= 0.15, {**why, "misheard": misheard}
    assert report["out_of_order"] == 0  # per speaker, finals come in speaking order
