"""Synthetic CPU contention for benchmarks: ``N`` busy-loop processes for the length of a run.

A real deployment is never idle: the embedded LLM generates on the same cores while the bot speaks.
``openab-voice bench NAME --load N`` runs the benchmark inside :class:`BusyLoad`, which starts ``N``
child interpreters that spin until the run ends, so anyone can reproduce the loaded figures. The
children are plain subprocesses (nothing is pickled or imported into them), started before the
benchmark's own set-up and killed however it ends.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from types import TracebackType
from typing import Final

__all__ = ["BusyLoad"]

_SPIN: Final = "while True:\n    pass\n"
_STOP_TIMEOUT_S: Final = 5.0


class BusyLoad:
    """Context manager: ``processes`` busy loops, each taking one core, for as long as it is open.

    Args:
        processes: how many busy loops (0: none, the idle baseline).

    Raises:
        ValueError: a negative count.
    """

    def __init__(self, processes: int) -> None:
        if processes < 0:
            raise ValueError("load must be >= 0 busy processes")
        self.processes = processes
        self._children: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoad:
        try:
            for _ in range(self.processes):
                self._children.append(
                    subprocess.Popen(
                        [sys.executable, "-c", _SPIN],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> int:
        """Children still alive."""
        return sum(1 for child in self._children if child.poll() is None)

    def stop(self) -> None:
        """Kill every child and reap it (idempotent)."""
        children, self._children = self._children, []
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=_STOP_TIMEOUT_S)
