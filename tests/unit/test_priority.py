"""Thread priorities: the audio plane above compute, with or without the privilege to raise it."""

from __future__ import annotations

import os
import threading

import pytest

from openab_voice import priority


def _on_thread(fn: object) -> tuple[object, int, int]:
    out: list[tuple[object, int, int]] = []

    def run() -> None:
        tid = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, tid)
        result = fn()  # type: ignore[operator]
        out.append((result, before, os.getpriority(os.PRIO_PROCESS, tid)))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return out[0]


def test_compute_threads_lower_only_themselves() -> None:
    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lowered, before, after = _on_thread(priority.lower_current_thread)
    assert lowered is True and after == min(19, before + priority.COMPUTE_NICE)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before


@pytest.mark.skipif(
    os.geteuid() != 0, reason="raising a thread's priority needs CAP_SYS_NICE (CI runs as root)"
)
def test_audio_threads_are_raised_where_permitted() -> None:
    raised, before, after = _on_thread(priority.boost_audio_thread)
    assert raised is True and after == max(-20, before - priority.AUDIO_BOOST)


def test_without_the_privilege_audio_stays_and_compute_must_yield(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(which: int, who: int, value: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(priority, "_boost", None)
    monkeypatch.setattr(priority.os, "setpriority", refuse)
    assert priority.boost_audio_thread() is False
    assert priority.audio_boost_available() is False  # so the transcriber lowers its decode threads


def test_spare_cpus_are_counted_from_the_affinity_mask() -> None:
    assert priority.available_cpus() == len(os.sched_getaffinity(0))


@pytest.mark.skipif(
    os.geteuid() != 0, reason="raising a thread's priority needs CAP_SYS_NICE (CI runs as root)"
)
def test_speech_synthesis_is_raised_under_the_audio_plane() -> None:
    raised, before, after = _on_thread(priority.boost_response_thread)
    assert raised is True and after == max(-20, before - priority.RESPONSE_BOOST)
    assert 0 < priority.RESPONSE_BOOST < priority.AUDIO_BOOST


def test_without_the_privilege_speech_synthesis_stays_at_normal_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(which: int, who: int, value: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(priority.os, "setpriority", refuse)
    result, before, after = _on_thread(priority.boost_response_thread)
    assert result is False and after == before
