"""A pytest plugin (loaded by ``tests/conftest.py``): ``ast.parse`` with garbage collection held off, on
the CPython releases whose AST constructor shares its recursion depth (3.11 before 3.11.8).

Those releases keep the depth in interpreter state (python/cpython#106905). The constructor runs no
Python code of its own, except when one of its allocations starts a garbage collection: finalizers,
weakref and gc callbacks are Python code, a thread may hand the GIL on there, and 3.11's tracebacks
call ``ast.parse`` for their caret lines. Any nested or concurrent parse resets the shared depth and
the outer one raises ``SystemError: AST constructor recursion depth mismatch`` for a tree it built
correctly. In a test session that is pytest's own parse: of a failing test's source while it
reports it (CI saw an INTERNALERROR that ended the run and named no test), or of a module it
rewrites on import (a run whose tests had all passed crashed in its summary).

With collection held off until every parse in progress returns, no Python code runs inside the
constructor. Nothing is caught or retried: every error is raised as the interpreter raises it.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading
from typing import Any

FIXED_IN = (3, 11, 8)
"""The first 3.11 release whose AST constructor keeps its depth per call."""

MISMATCH = "AST constructor recursion depth mismatch"

interpreter_parse = ast.parse
"""``ast.parse`` as the interpreter defines it."""

_lock = threading.Lock()
_parsing = 0
_collect_after = False


def parse(*args: Any, **kwargs: Any) -> Any:
    """:func:`ast.parse`, with no garbage collection while it (or any other thread's parse) runs."""
    global _parsing, _collect_after
    with _lock:
        if _parsing == 0:
            _collect_after = gc.isenabled()
            gc.disable()
        _parsing += 1
    try:
        return interpreter_parse(*args, **kwargs)
    finally:
        with _lock:
            _parsing -= 1
            if _parsing == 0 and _collect_after:
                gc.enable()


def racy(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> bool:
    """Whether this interpreter's AST constructor has the shared depth."""
    return version[:2] == (3, 11) and version < FIXED_IN


if racy():
    ast.parse = parse
