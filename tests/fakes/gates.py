"""A deterministic race harness for the action plane: gates inside the job store's writes.

The broker and the executor call the synchronous :class:`~openab_voice.store.jobs.JobStore` from
worker threads, so a race between them is decided by which store write commits first. A
:class:`GatedStore` holds chosen writes at a :class:`Gate` (just before the write, or just after its
commit) until the test opens it; the test thereby puts a cancel at an exact point between the
confirmation, the ``running`` write and the spawn, with no sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from openab_voice.jobs import JobEvent
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord

_WAIT_S = 20.0


class Gate:
    """One point in one store write: a writer thread stops there until the test opens it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._reached = threading.Event()
        self._opened = threading.Event()
        self._finished = threading.Event()

    def pass_through(self) -> None:
        """Called by the writer thread: announce arrival, then wait to be let through."""
        self._reached.set()
        if not self._opened.wait(_WAIT_S):
            raise TimeoutError(f"gate {self.name} was never opened")

    async def reached(self) -> None:
        """Wait (off the loop) until a writer stands at the gate."""
        if not await asyncio.to_thread(self._reached.wait, _WAIT_S):
            raise AssertionError(f"nothing reached gate {self.name}")

    async def finished(self) -> None:
        """Wait until the held write has returned or raised (its connection is back in the pool).

        A write whose caller was cancelled goes on in its thread; wait for it before the store closes.
        """
        if not await asyncio.to_thread(self._finished.wait, _WAIT_S):
            raise AssertionError(f"the write held at gate {self.name} never finished")

    def mark_finished(self) -> None:
        """Called by the writer thread when its write returned or raised."""
        self._finished.set()

    def open(self) -> None:
        """Let the writer through (and any later one: a gate is used once)."""
        self._opened.set()


class GatedStore(JobStore):
    """A :class:`JobStore` whose ``apply`` of chosen events waits at gates.

    ``before(event)`` holds the first ``apply(event)`` before it reads or writes anything;
    ``after(event)`` holds it after its transaction committed, before it returns to the caller.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._before: dict[JobEvent, Gate] = {}
        self._after: dict[JobEvent, Gate] = {}

    def before(self, event: JobEvent) -> Gate:
        gate = self._before[event] = Gate(f"before {event.value}")
        return gate

    def after(self, event: JobEvent) -> Gate:
        gate = self._after[event] = Gate(f"after {event.value}")
        return gate

    def apply(self, action_id: str, event: JobEvent, **kwargs: Any) -> ActionRecord:  # type: ignore[override]
        held = [gate for gate in (self._before.pop(event, None),) if gate is not None]
        try:
            for gate in held:
                gate.pass_through()
            record = super().apply(action_id, event, **kwargs)
            if (after := self._after.pop(event, None)) is not None:
                held.append(after)
                after.pass_through()
            return record
        finally:
            for gate in held:
                gate.mark_finished()
