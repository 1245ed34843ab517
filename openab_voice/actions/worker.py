"""An executor worker: claims confirmed jobs from the store, runs them, keeps results in the store.

The run of each job is exactly the bot's in-process one (:class:`~openab_voice.actions.execution.
ActionExecutor`: fresh ACP process, fail-closed permissions, sandbox, TurnCompletion, quarantine);
only where jobs come from and where results go differ. Jobs come from ``JobStore.claim_next``
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL), which leases the job to this worker before anything is
done; the executor's ``confirmed → running`` write is a compare-and-set on the claimed version, so a
job cancelled meanwhile is not started. Results stay in the store (status, result text, error,
detail): the bot delivers them. :meth:`ExecutorWorker.drain` (SIGTERM) stops claiming, stops every
agent the ACP way (cancel, grace, kill), settles, and returns within ``drain_s``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from openab_voice.acp.deadline import bounded
from openab_voice.acp.types import TurnCompletion
from openab_voice.actions.execution import ActionExecutor
from openab_voice.actions.leases import LeaseKeeper
from openab_voice.clock import Clock
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, WorkerState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """How a worker takes jobs.

    Attributes:
        concurrency: Most actions it runs at once (1: one agent per worker process or pod).
        poll_s: How long it waits between claims when no job is waiting or it is full.
        drain_s: The bound on a drain: past it the worker returns anyway, and what it still held is
            reaped once its leases expire.
    """

    concurrency: int = 1
    poll_s: float = 1.0
    drain_s: float = 20.0


class StoredResults:
    """The worker's result sink: the outcome and result text are in the store already; log them."""

    async def deliver(self, record: ActionRecord, completion: TurnCompletion) -> None:
        log.info("action %s settled %s (%s)", record.id, record.status.value, completion.error_code or "ok")


class ExecutorWorker:
    """Claims and runs jobs until :meth:`drain`; :meth:`run` returns once drained."""

    def __init__(
        self,
        *,
        store: JobStore,
        executor: ActionExecutor,
        leases: LeaseKeeper,
        settings: WorkerSettings,
        clock: Clock,
    ) -> None:
        self._store = store
        self._executor = executor
        self._leases = leases
        self._settings = settings
        self._clock = clock
        self._draining = asyncio.Event()
        self.claimed = 0

    @property
    def owner(self) -> str:
        return self._leases.owner

    def drain(self) -> None:
        """Stop claiming and settle what runs (a signal handler may call it). Idempotent."""
        self._draining.set()

    async def run(self) -> None:
        """Claim and run jobs until drained, then stop the agents, settle and report ``stopped``."""
        await self._leases.tick()  # reported (and a first reap) before the first claim: --health is green
        self._leases.start()
        try:
            while not self._draining.is_set():
                if self._executor.active < self._settings.concurrency and await self._claim():
                    continue  # maybe another job is waiting
                await bounded(self._clock, self._settings.poll_s, self._draining.wait())
        finally:
            await self._stop()

    async def _claim(self) -> bool:
        try:
            record = await asyncio.to_thread(
                self._store.claim_next, worker_id=self.owner, lease_s=self._leases.settings.lease_s
            )
        except Exception:  # the store is away for a moment: wait a poll and claim again
            log.exception("claiming a job failed")
            return False
        if record is None:
            return False
        if self._draining.is_set():
            return False  # claimed as SIGTERM came: its lease expires and another worker takes it
        self.claimed += 1
        self._leases.hold(record.id)  # renewed from now on, before the executor starts it
        self._executor.launch(record, self._clock.monotonic())
        return True

    async def _stop(self) -> None:
        self._leases.state = WorkerState.DRAINING
        try:
            await asyncio.to_thread(
                self._store.report_worker,
                self.owner,
                node=self._leases.settings.node,
                state=WorkerState.DRAINING,
                running=self._executor.active,
            )
        except Exception:
            log.exception("reporting the drain failed")
        # The heartbeat goes on while agents settle: their leases stay live until they are settled.
        finished, _ = await bounded(self._clock, self._settings.drain_s, self._executor.aclose())
        if not finished:
            log.warning(
                "drain took over %.0f s; what is left is reaped once its leases expire",
                self._settings.drain_s,
            )
        await self._leases.aclose()
        self._leases.state = WorkerState.STOPPED
        try:
            await asyncio.to_thread(
                self._store.report_worker,
                self.owner,
                node=self._leases.settings.node,
                state=WorkerState.STOPPED,
                running=self._executor.active,
            )
        except Exception:
            log.exception("reporting the stop failed")
