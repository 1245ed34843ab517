"""Property-based fuzzing of everything the bot parses from the outside, bounded for CI.

Each target runs ``OPENAB_FUZZ_EXAMPLES`` examples (default 300; a few seconds each on a loaded
2-core machine). Hypothesis' per-example deadline is off: on a busy CI runner a slow example is not
a bug, a crash is. The examples are derandomized unless ``OPENAB_FUZZ_RANDOM=1``, so CI is
reproducible; run with ``OPENAB_FUZZ_RANDOM=1 OPENAB_FUZZ_EXAMPLES=20000`` to search further.

Every target counts each input's outcome: accepted, or rejected by reason; anything else that
escapes (an unexpected exception) fails the test. After its examples each target asserts its
tallies: every input counted once, only known buckets, and both an accepted and a rejected input
where its explicit ``@example`` inputs guarantee both. ``pytest -rA tests/fuzz`` (any run that
reaches the terminal summary) prints the tallies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.fuzz.tallies import Tally

EXAMPLES = int(os.environ.get("OPENAB_FUZZ_EXAMPLES", "300"))

settings.register_profile(
    "openab-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("OPENAB_FUZZ_RANDOM") != "1",
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
    print_blob=True,
)
settings.load_profile("openab-fuzz")


_TALLIES: dict[str, Tally] = {}


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """This target's outcomes, shown in the summary; the test asserts them with :meth:`Tally.check`."""
    counts = Tally()
    yield counts
    _TALLIES[request.node.name] = counts


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _TALLIES:
        return
    terminalreporter.section("fuzz outcomes (accepted / rejected by reason)")
    for name, tally in sorted(_TALLIES.items()):
        detail = ", ".join(f"{reason} {n}" for reason, n in tally.counts.most_common())
        terminalreporter.write_line(f"{name}: {tally.inputs} inputs: {detail}")
