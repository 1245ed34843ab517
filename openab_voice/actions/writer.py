"""The action plane's one way to change a job: a compare-and-set write in the store, then its event.

The store is synchronous (SQLAlchemy); every call runs in a worker thread so the event loop that also
carries the voice never waits on the database. The write comes first (write-ahead): the
``ActionChanged`` event, and whatever effect follows, only after the row says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from openab_voice.actions.events import ActionChanged
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord

P = ParamSpec("P")
R = TypeVar("R")


class JobWriter:
    """Store calls off the event loop, and transitions that announce themselves on the bus."""

    def __init__(self, store: JobStore, *, bus: EventBus, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._bus = bus
        self._clock = clock

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one store method in a worker thread."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def apply(
        self, record: ActionRecord, event: JobEvent, actor: str, reason: str, **fields: Any
    ) -> ActionRecord:
        """``event`` on ``record`` as it was read (compare-and-set on its version), then the event.

        Raises:
            StaleTransition: the row changed since ``record`` was read; nothing was written.
            ActionError: ``event`` is not allowed in the record's status.
        """
        updated = await self.call(
            self.store.apply,
            record.id,
            event,
            actor=actor,
            reason=reason,
            expected_version=record.version,
            **fields,
        )
        self.changed(updated, previous=record.status, actor=actor, reason=reason)
        return updated

    def changed(self, record: ActionRecord, *, previous: JobStatus | None, actor: str, reason: str) -> None:
        """Publish ``ActionChanged`` for a write already made."""
        self._bus.publish(
            ActionChanged(
                at=self._clock.monotonic(),
                session_id=record.voice_session_id,
                action_id=record.id,
                status=record.status.value,
                previous=None if previous is None else previous.value,
                actor=actor,
                reason=reason[:200],
                goal=record.goal,
                proposed_by=str(record.proposed_by),
                effect_ceiling=record.effect_ceiling,
            )
        )
