"""``--load N``: busy-loop processes that exist exactly while the benchmark runs."""

from __future__ import annotations

import json

import pytest

from openab_voice import cli
from openab_voice.bench.load import BusyLoad


def test_busy_loops_run_inside_and_are_reaped_after() -> None:
    load = BusyLoad(2)
    with load:
        assert load.running == 2
    assert load.running == 0


def test_busy_loops_are_reaped_when_the_run_fails() -> None:
    load = BusyLoad(1)
    with pytest.raises(RuntimeError), load:
        assert load.running == 1
        raise RuntimeError("bench failed")
    assert load.running == 0


def test_negative_load_is_rejected() -> None:
    with pytest.raises(ValueError):
        BusyLoad(-1)


def test_bench_records_the_load_it_ran_under(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[int] = []  # busy loops alive when the benchmark body starts

    def fake_bench(args: object) -> dict[str, object]:
        return {"ok": True}

    real_enter = BusyLoad.__enter__

    def enter(self: BusyLoad) -> BusyLoad:
        out = real_enter(self)
        started.append(self.running)
        return out

    monkeypatch.setitem(cli.BENCHES, "receive", fake_bench)
    monkeypatch.setattr(BusyLoad, "__enter__", enter)
    assert cli.main(["bench", "receive", "--json", "--load", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"ok": True, "load": 1}
    assert started == [1]


def test_bench_rejects_a_negative_load(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "receive", "--load", "-1"])
