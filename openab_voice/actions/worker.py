"""An executor worker: claims confirmed jobs from the store, runs them, keeps results in the store.

The run of each job is exactly the bot's in-process one (:class:`~openab_voice.actions.execution.
ActionExecutor`: fresh ACP process, fail-closed permissions, sandbox, TurnCompletion, quarantine);
only where jobs come from and where results go differ. Jobs come from ``JobStore.claim_next``
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL), which leases the job to this worker before anything is
done; the executor's ``confirmed → running`` write is a compare-and-set on the claimed version, so a
job cancelled meanwhile is not started. Results stay in the store (status, result text, error,
detail): the bot delivers them. A cancel the bot asks for through the store reaches the worker at
once on PostgreSQL (it listens on the store's cancel channel and reads the request of a job it holds);
its lease heartbeat reads the requests too, so a missed notification costs at most one heartbeat.
:meth:`ExecutorWorker.drain` (SIGTERM) stops claiming, stops every agent the ACP way (cancel, grace,
kill), settles, and returns within ``drain_s``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from openab_voice.acp.types import TurnCompletion
from openab_voice.actions.execution import ActionExecutor
from openab_voice.actions.leases import LeaseKeeper
from openab_voice.clock import Clock, bounded
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.defaults import default_of
from openab_voice.store.jobs import JobStore
from openab_voice.store.notify import SettledListener
from openab_voice.store.records import ActionRecord, WorkerState
from openab_voice.tasks import OwnerPhase, TaskOwner

log = logging.getLogger(__name__)

# How long a starting worker waits for its cancel LISTEN before it claims anyway (the heartbeat then
# carries the cancels until the listener is up).
_LISTEN_WAIT_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """How a worker takes jobs.

    Attributes:
        concurrency: Most actions it runs at once (1: one agent per worker process or pod).
        poll_s: How long it waits between claims when no job is waiting or it is full.
        drain_s: The bound on a drain: past it the worker returns anyway, and what it still held is
            reaped once its leases expire.
    """

    concurrency: int = default_of(ActionSettings, "executor_concurrency")
    poll_s: float = default_of(ActionSettings, "executor_poll_s")
    drain_s: float = default_of(ActionSettings, "executor_drain_s")


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
        self._cancel_listener: SettledListener | None = None
        self._cancel_reads = TaskOwner("executor worker cancel reads")
        self.claimed = 0

    @property
    def owner(self) -> str:
        return self._leases.owner

    def drain(self) -> None:
        """Stop claiming and settle what runs (a signal handler may call it). Idempotent."""
        self._draining.set()

    @property
    def cancel_listener(self) -> SettledListener | None:
        """The PostgreSQL listener for cancel requests (None on SQLite, or outside :meth:`run`)."""
        return self._cancel_listener

    async def run(self) -> None:
        """Claim and run jobs until drained, then stop the agents, settle and report ``stopped``."""
        await self._leases.tick()  # reported (and a first reap) before the first claim: --health is green
        self._leases.start()
        try:
            await self._listen_for_cancels()
            while not self._draining.is_set():
                if self._executor.active < self._settings.concurrency and await self._claim():
                    continue  # maybe another job is waiting
                await bounded(self._clock, self._settings.poll_s, self._draining.wait())
        finally:
            await self._stop()

    async def _listen_for_cancels(self) -> None:
        loop = asyncio.get_running_loop()

        def requested(action_id: str) -> None:  # from the listener's thread
            loop.call_soon_threadsafe(self._cancel_notified, action_id)

        self._cancel_listener = self._store.listen_cancels(requested)
        if self._cancel_listener is None:
            return
        self._cancel_listener.start()
        # A thread's wait in real time: the listener connects to PostgreSQL on its own thread.
        if not await asyncio.to_thread(self._cancel_listener.wait_listening, _LISTEN_WAIT_S):
            log.warning("not listening for cancels yet; the heartbeat carries them meanwhile")

    def _cancel_notified(self, action_id: str) -> None:
        """Someone asked, through the store, to cancel ``action_id``: if it is ours, read the request
        now (the notification is only a wake-up; the store's request row is what counts)."""
        if action_id not in self._leases.held:
            return  # another worker's job, or one settled already
        if self._cancel_reads.phase is not OwnerPhase.OPEN:
            return  # a notice queued from the listener's thread as it closed: the worker has stopped
        self._cancel_reads.spawn(self._read_cancel(action_id), name=f"cancel-read-{action_id}")

    async def _read_cancel(self, action_id: str) -> None:
        try:
            await self._leases.forward_cancels({action_id})
        except Exception:  # the store is away for a moment: the next heartbeat reads the request
            log.exception("reading the cancel request of %s failed", action_id)

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
        await self._stop_listening()
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

    async def _stop_listening(self) -> None:
        await self._cancel_reads.aclose()
        if self._cancel_listener is not None:
            await asyncio.to_thread(self._cancel_listener.close)
            self._cancel_listener = None
