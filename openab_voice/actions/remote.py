"""The bot's side of remote execution (``OPENAB_EXECUTOR=remote``): confirm into the queue, never spawn,
deliver what the workers settled.

A confirmed job stays ``confirmed`` in the store until an ``openab-voice executor`` claims it
(:mod:`openab_voice.actions.worker`); this process starts no agent. :class:`RemoteResults` reads the
store for jobs the workers settled (woken by PostgreSQL ``NOTIFY``, polling as the fallback) and
delivers each exactly as the in-process executor does
(:class:`~openab_voice.actions.delivery.ResultDelivery`: the full text first, the delivery outcome
stored beside the execution outcome, then the spoken status). The delivery outcome's compare-and-set
on the settled version makes a result delivered once. A cancel of a job still waiting in the queue is
the broker's compare-and-set (the worker's ``confirmed → running`` then fails and nothing runs); a
job already running on a worker answers ``ACTION_NOT_HERE``: carrying that cancel through the store
to the lease holder is not built yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Literal, cast

from openab_voice.acp.types import ExecutionOutcome, PermissionDecision, TurnCompletion
from openab_voice.actions.delivery import ResultDelivery
from openab_voice.actions.leases import EXECUTOR_ROLE
from openab_voice.actions.ports import CancelReply
from openab_voice.actions.writer import JobWriter
from openab_voice.clock import bounded
from openab_voice.errors import StaleTransition
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.shards import ShardRange
from openab_voice.store.notify import SettledListener
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)

_EXECUTION = {
    JobStatus.SUCCEEDED: ExecutionOutcome.SUCCEEDED,
    JobStatus.FAILED: ExecutionOutcome.FAILED,
    JobStatus.CANCELLED: ExecutionOutcome.CANCELLED,
    JobStatus.OUTCOME_UNKNOWN: ExecutionOutcome.OUTCOME_UNKNOWN,
}


def queued(record: ActionRecord, confirmed_at: float) -> None:
    """The broker's ``on_confirmed`` here: nothing to launch, the confirmed row is the queue entry."""
    log.info("action %s confirmed into the executor queue", record.id)


def not_here(action_id: str) -> CancelReply:
    """The broker's ``on_cancel`` here: this process runs nothing."""
    return CancelReply.NOT_HERE


class CancelForwarder:
    """The broker's ``on_remote_cancel`` here: a durable cancel request for the lease holder.

    The worker's heartbeat reads it and cancels the agent the ACP way; the job's final status (and
    the result the bot then delivers) is the worker's to write.
    """

    def __init__(self, jobs: JobWriter) -> None:
        self._jobs = jobs

    async def __call__(self, record: ActionRecord, user_id: int) -> bool:
        return await self._jobs.call(self._jobs.store.request_cancel, record.id, actor=str(user_id))


def no_local_workspace(action_id: str) -> None:
    """The broker's ``on_reconcile`` here: the quarantined workspace lives in the worker, not here."""


class RemoteResults:
    """Polls the store for results the executor workers settled, and delivers them.

    Args:
        jobs: the store writer.
        delivery: posts the text and speaks the status (the in-process executor's own).
        poll_s: how often the store is read.
        shards: a bot pod's shards: only its own guilds' results are its to deliver (None: all).
    """

    def __init__(
        self, jobs: JobWriter, delivery: ResultDelivery, *, poll_s: float, shards: ShardRange | None = None
    ) -> None:
        self._jobs = jobs
        self._shards = shards
        self._delivery = delivery
        self._poll_s = poll_s
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._listener: SettledListener | None = None

    @property
    def listener(self) -> SettledListener | None:
        """The PostgreSQL listener that wakes the delivery (None on SQLite or before :meth:`start`)."""
        return self._listener

    async def deliver_pending(self) -> list[str]:
        """Deliver every settled, undelivered result once; the ids delivered (posted or failed)."""
        pending = await self._jobs.call(
            self._jobs.store.undelivered_results, owner_prefix=f"{EXECUTOR_ROLE}:", shards=self._shards
        )
        delivered = []
        for record in pending:
            entries = await self._jobs.call(
                self._jobs.store.audit_entries, action_id=record.id, kind="permission"
            )
            completion = completion_of(record, [decision_of(entry.detail) for entry in entries])
            try:
                await self._delivery.deliver(record, completion)
            except StaleTransition:
                continue  # delivered (or changed) by someone else since it was read
            delivered.append(record.id)
        return delivered

    def start(self) -> None:
        """Deliver until :meth:`aclose`: at each PostgreSQL notification of a settled job, and every
        ``poll_s`` whatever happens (notifications can be missed across a reconnect). Idempotent."""
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()

        def settled(_action_id: str) -> None:  # from the listener's thread
            loop.call_soon_threadsafe(self._wake.set)

        self._listener = self._jobs.store.listen_settled(settled)
        if self._listener is not None:
            self._listener.start()
        self._task = asyncio.create_task(self._poll(), name="remote-results")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._listener is not None:
            await asyncio.to_thread(self._listener.close)
            self._listener = None

    async def _poll(self) -> None:
        while True:
            # Cleared before the read: a notification during it wakes the next wait at once.
            self._wake.clear()
            try:
                await self.deliver_pending()
            except Exception:  # a database or Discord hiccup must not end the delivery
                log.exception("delivering remote results failed")
            await bounded(self._jobs.clock, self._poll_s, self._wake.wait())


def completion_of(record: ActionRecord, decisions: list[PermissionDecision]) -> TurnCompletion:
    """The TurnCompletion a worker's settled row stands for (what the bot's own executor would hand on)."""
    execution = _EXECUTION[record.status]
    return TurnCompletion(
        action_id=record.id,
        execution=execution,
        stop_reason=record.stop_reason,
        output=record.result_text or "",
        error_code=record.error_code,
        detail=record.detail or "",
        # Not stored: known sent when the agent ended a turn, asked permissions, or may have worked.
        prompt_sent=execution in (ExecutionOutcome.SUCCEEDED, ExecutionOutcome.OUTCOME_UNKNOWN)
        or bool(decisions),
        permission_decisions=tuple(decisions),
        quarantined=execution is ExecutionOutcome.OUTCOME_UNKNOWN,
    )


def decision_of(detail: Mapping[str, object]) -> PermissionDecision:
    """A permission decision back from its audit entry (``agents.decision_dict``)."""
    option_kind = detail.get("option_kind")
    return PermissionDecision(
        tool_call_id=str(detail.get("tool_call_id", "")),
        title=str(detail.get("title", "")),
        kind=None if detail.get("kind") is None else str(detail.get("kind")),
        needed=EffectCeiling(str(detail.get("needed", EffectCeiling.EXTERNAL.value))),
        offered=tuple(str(o) for o in cast(list[object], detail.get("offered") or [])),
        outcome="selected" if detail.get("outcome") == "selected" else "cancelled",
        option_id=None,
        option_kind=cast(Literal["allow_once", "reject_once"] | None, option_kind)
        if option_kind in ("allow_once", "reject_once")
        else None,
        reason=str(detail.get("reason", "")),
    )
