"""``tests/ast_race.py``: CPython 3.11's shared AST depth, reproduced, and held off by the guard."""

from __future__ import annotations

import ast
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.ast_race import MISMATCH, interpreter_parse, parse, racy

# Enough nodes that the constructor's allocations start collections (threshold 1, below).
_SOURCE = "\n".join(f"def f{n}(a, b):\n    return [x + {n} for x in (a, b) if x]" for n in range(300))


@contextmanager
def a_traceback_printed_at_each_collection() -> Iterator[None]:
    """What a finalizer that formats a traceback does: a parse of its own inside every collection."""

    def nested(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            interpreter_parse("x = (1 + 2) * 3")

    threshold = gc.get_threshold()
    gc.callbacks.append(nested)
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(nested)


def outcomes(parser: Callable[[str], Any], times: int = 5) -> list[str]:
    results = []
    with a_traceback_printed_at_each_collection():
        for _ in range(times):
            try:
                results.append(type(parser(_SOURCE)).__name__)
            except SystemError as error:
                results.append(str(error))
    return results


@pytest.mark.skipif(not racy(), reason="this interpreter's AST constructor keeps its depth per call")
def test_the_race_is_real_here_a_parse_inside_a_collection_breaks_the_outer_one() -> None:
    assert any(MISMATCH in outcome for outcome in outcomes(interpreter_parse))


def test_with_collection_held_off_every_parse_builds_its_tree() -> None:
    assert outcomes(parse) == ["Module"] * 5
    assert gc.isenabled()


def test_the_guard_is_installed_exactly_where_the_race_is() -> None:
    assert (ast.parse is parse) == racy()
    assert racy((3, 11, 7)) and racy((3, 11, 0))
    assert not racy((3, 11, 8)) and not racy((3, 12, 1)) and not racy((3, 13, 0))


def test_errors_pass_through_and_collection_comes_back() -> None:
    with pytest.raises(SyntaxError):
        parse("def broken(:\n")
    assert gc.isenabled()
    gc.disable()
    try:
        parse("x = 1")
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
