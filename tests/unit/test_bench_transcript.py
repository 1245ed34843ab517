"""``bench transcript``'s ``ok``: computed from its checks of each reply, false when one failed."""

from __future__ import annotations

import json

import pytest

from openab_voice.bench.transcript import reply_failures, report, run

TEXT = "alice: hello\nbob: hi\n"
JSON = json.dumps({"session": {}, "lines": [{"text": "hello"}, {"text": "hi"}]}).encode()


def _report(failed_checks: list[str]) -> dict[str, object]:
    return report(
        hours=0.1,
        speakers=2,
        lines=2,
        commands=[12.0, 30.0],
        exports=[3.0, 4.0],
        txt_bytes=len(TEXT),
        json_bytes=len(JSON),
        failed_checks=failed_checks,
    )


def test_a_right_reply_passes_every_check() -> None:
    failed = reply_failures([("t.txt", TEXT.encode()), ("t.json", JSON)], text=TEXT, lines=2)
    assert failed == []
    result = _report(failed)
    assert result["ok"] is True and result["failed_checks"] == []


@pytest.mark.parametrize(
    ("files", "lines", "failure"),
    [
        ([("t.txt", TEXT.encode())], 2, "the reply's files are ['txt'], not ['txt', 'json']"),
        ([("t.json", JSON), ("t.txt", TEXT.encode())], 2, "the reply's files are ['json', 'txt']"),
        (
            [("t.txt", TEXT.encode()[:-1]), ("t.json", JSON)],
            2,
            "the .txt file (20 bytes) is not the transcript",
        ),
        ([("t.txt", TEXT.encode()), ("t.json", b"{")], 2, "the .json file is not JSON"),
        ([("t.txt", TEXT.encode()), ("t.json", JSON)], 3, "the .json file holds 2 lines, not the 3 written"),
        ([("t.txt", TEXT.encode()), ("t.json", b"[]")], 2, "the .json file holds no lines"),
    ],
)
def test_a_failed_check_makes_ok_false(files: list[tuple[str, bytes]], lines: int, failure: str) -> None:
    failed = reply_failures(files, text=TEXT, lines=lines)
    assert len(failed) == 1 and failed[0].startswith(failure), failed
    result = _report(failed)
    assert result["ok"] is False and result["failed_checks"] == failed
    json.dumps(result)  # as `openab-voice bench transcript --json` prints it


@pytest.mark.e2e
def test_the_bench_checks_real_replies() -> None:
    """A short session through the emulator: every check holds, one command and one export per trial."""
    result = run(speakers=3, hours=0.05, trials=2)
    assert result["failed_checks"] == [] and result["ok"] is True
    assert result["lines"] == 90  # one line every 2 s for 3 minutes
    assert result["command_ms"]["n"] == 2 and result["export_ms"]["n"] == 2
    assert 0 < result["command_ms"]["p50"] <= result["command_ms"]["max"] < 120_000  # the reply's timeout
    assert result["txt_bytes"] > 0 and result["json_bytes"] > result["txt_bytes"]
