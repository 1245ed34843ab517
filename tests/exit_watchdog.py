"""A test run always ends: a thread left running can fail it, never hold it open.

At exit CPython joins, without a bound, every ``concurrent.futures`` pool thread and every
non-daemon thread. So one thread a test left behind (a model run that never returns, a worker
blocked on a queue) holds the process after pytest has printed its summary, until whoever runs it
gives up: CI once waited an hour on such a run, and learnt nothing from it.

Once pytest is done this plugin arms :mod:`faulthandler`: a process still alive ``EXIT_GRACE_S``
later prints every thread's stack (the one that holds it is among them) and exits with status 1.
``OPENAB_TEST_EXIT_GRACE_S`` sets another grace (the plugin's own test uses a short one).
"""

from __future__ import annotations

import faulthandler
import os
import sys

import pytest

EXIT_GRACE_ENV = "OPENAB_TEST_EXIT_GRACE_S"
EXIT_GRACE_S = 120.0  # an exit that joins a finishing decode takes seconds; this is a stuck one


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    stream = sys.__stderr__
    if stream is None:  # no stderr to print the stacks to: nothing to arm
        return
    grace = float(os.environ.get(EXIT_GRACE_ENV) or EXIT_GRACE_S)
    print(
        f"exit watchdog: the process ends within {grace:g} s, or prints its threads and fails",
        file=stream,
        flush=True,
    )
    faulthandler.dump_traceback_later(grace, exit=True, file=stream)
