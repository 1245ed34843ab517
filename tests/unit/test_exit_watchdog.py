"""tests/exit_watchdog.py: a pytest run that a leftover thread holds at exit fails with the stacks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEFT_BEHIND = """
    import threading

    def blocked_for_ever(gate: threading.Event) -> None:
        gate.wait()

    def test_leaves_a_thread() -> None:
        threading.Thread(target=blocked_for_ever, args=(threading.Event(),), name="left-behind").start()
"""

CLEAN = """
    def test_nothing_left() -> None:
        assert True
"""


def run_pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.exit_watchdog"]\n')
    (tmp_path / "test_it.py").write_text(textwrap.dedent(body))
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
    return subprocess.run(
        [*pytest, str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "OPENAB_TEST_EXIT_GRACE_S": "2", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_thread_left_blocked_fails_the_run_and_shows_its_stack(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, LEFT_BEHIND)
    assert "1 passed" in done.stdout  # the test itself passed: the run fails at exit
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Timeout (0:00:02)!" in done.stderr and "blocked_for_ever" in done.stderr, done.stderr


def test_a_clean_run_exits_with_its_own_status(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, CLEAN)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Timeout" not in done.stderr
