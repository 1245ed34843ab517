"""Job leases: who runs an action, renewed by a heartbeat; the reaper loses the jobs of the dead.

The heartbeat also carries cancels that reach a job through the store (the bot of remote executors
asks, the lease holder's next heartbeat reads the request and cancels the agent): the fallback of a
worker that hears the request's notification at once (:meth:`LeaseKeeper.forward_cancels`).

Leases decide, not restarts (docs/adr/0010-executor-leases.md). Every process that runs actions (the
bot's in-process executor, each ``openab-voice executor`` worker) has one owner id,
``<role>:<node>/<incarnation>``: ``role`` is ``local`` or ``executor``, ``node`` names the process's
place (the host or pod name, ``OPENAB_NODE_ID``) and the incarnation is random per start. A job is
leased when it is started (local) or claimed (worker), and :class:`LeaseKeeper` renews the leases its
process holds every ``heartbeat_s``. A lease that was not renewed within ``lease_s`` is dead: any
keeper's reaper turns its ``running`` job into ``outcome_unknown`` and quarantines the workspace. A
restarting bot also loses the jobs of its own previous incarnations at once (same role and node).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from openab_voice.actions.writer import JobWriter
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.defaults import default_of
from openab_voice.store.records import ActionRecord, WorkerState

log = logging.getLogger(__name__)

LOCAL_ROLE = "local"
EXECUTOR_ROLE = "executor"


def default_node() -> str:
    """The host name: a pod's name on Kubernetes."""
    return socket.gethostname() or "localhost"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseSettings:
    """How long a lease lives and how often its owner renews it.

    Attributes:
        role: ``local`` (the bot's in-process executor) or ``executor`` (a worker).
        node: Unique among the live processes of one role that share a store (the host or pod name).
        lease_s: A lease not renewed for this long is dead; its running job is lost.
        heartbeat_s: How often leases are renewed and expired ones reaped (well under ``lease_s``).
    """

    role: str = LOCAL_ROLE
    node: str = field(default_factory=default_node)
    lease_s: float = default_of(ActionSettings, "lease_s")
    heartbeat_s: float = default_of(ActionSettings, "heartbeat_s")

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_s * 2 <= self.lease_s:
            raise ValueError("heartbeat_s must be positive and at most half of lease_s")
        if "/" in self.role or "/" in self.node:
            raise ValueError("role and node may not contain '/'")

    @property
    def prefix(self) -> str:
        """The owner-id prefix of every incarnation of this process: what its restart reconciles."""
        return f"{self.role}:{self.node}/"


class LeaseKeeper:
    """Holds this process's leases: renews them, reports a lost one, and reaps dead ones of others.

    Args:
        jobs: the store writer (renewals and reaps run off the event loop; reaps are announced).
        settings: lease length, heartbeat, role and node.
        on_lost: called with an action id this process held whose lease is gone (reaped elsewhere):
            its agent must be stopped; the store already says ``outcome_unknown``.
        on_reaped: called with each job this keeper's reaper lost (e.g. to quarantine it on disk).
        on_cancel_requested: called once with each held action someone asked, through the store, to
            cancel (``JobStore.request_cancel``: the bot of a remote executor).
        incarnation: the random part of the owner id (a test may fix it).
    """

    def __init__(
        self,
        jobs: JobWriter,
        settings: LeaseSettings,
        *,
        on_lost: Callable[[str], None] | None = None,
        on_reaped: Callable[[ActionRecord], None] | None = None,
        on_cancel_requested: Callable[[str], None] | None = None,
        incarnation: str | None = None,
    ) -> None:
        self._jobs = jobs
        self.settings = settings
        self.owner = f"{settings.prefix}{incarnation or uuid.uuid4().hex[:12]}"
        self.on_lost = on_lost
        self._on_reaped = on_reaped
        self.on_cancel_requested = on_cancel_requested
        self._held: set[str] = set()
        self._cancels_forwarded: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self.state = WorkerState.RUNNING

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    def lease_fields(self) -> dict[str, object]:
        """The columns that lease a job to this process from now, for the write that starts it."""
        return {"lease_owner": self.owner, "lease_until": self._jobs.clock.wall() + self.settings.lease_s}

    def hold(self, action_id: str) -> None:
        """Renew ``action_id``'s lease from now on (its lease was just written by this process)."""
        self._held.add(action_id)

    def drop(self, action_id: str) -> None:
        """Stop renewing ``action_id`` (it settled). Idempotent."""
        self._held.discard(action_id)
        self._cancels_forwarded.discard(action_id)

    async def tick(self) -> list[ActionRecord]:
        """One heartbeat: renew what is held, report lost leases, reap dead ones, report this worker.

        Returns the jobs the reaper lost.
        """
        asked = set(self._held)
        renewed = await self._jobs.call(
            self._jobs.store.renew_leases, self.owner, asked, lease_s=self.settings.lease_s
        )
        # Settled while the renewal ran: not lost, just done.
        for action_id in sorted(asked - renewed):
            if action_id in self._held:
                self._held.discard(action_id)
                if self.on_lost is not None:
                    self.on_lost(action_id)
        await self.forward_cancels(renewed)
        reaped = await self._jobs.call(
            self._jobs.store.reap_expired_leases, actor=f"reaper:{self.owner}", exclude_owner=self.owner
        )
        for record in reaped:
            self._jobs.changed(
                record, previous=None, actor=f"reaper:{self.owner}", reason=record.detail or "lease expired"
            )
            if self._on_reaped is not None:
                self._on_reaped(record)
        await self._jobs.call(
            self._jobs.store.report_worker,
            self.owner,
            node=self.settings.node,
            state=self.state,
            running=len(self._held),
        )
        return reaped

    async def forward_cancels(self, action_ids: Collection[str]) -> None:
        """Read the cancel requests of those of ``action_ids`` this process holds, and hand each on to
        ``on_cancel_requested`` once (a heartbeat does it for every renewed lease; a notification of
        one request, for its job at once)."""
        asked = set(action_ids) & self._held
        if self.on_cancel_requested is None or not asked:
            return
        requested = await self._jobs.call(self._jobs.store.cancel_requests, asked)
        for action_id in sorted(requested - self._cancels_forwarded):
            if action_id in self._held:
                self._cancels_forwarded.add(action_id)
                self.on_cancel_requested(action_id)

    def start(self) -> None:
        """Run the heartbeat until :meth:`aclose`. Idempotent."""
        if self._task is None:
            self._task = asyncio.create_task(self._beat(), name=f"lease-heartbeat-{self.owner}")

    async def aclose(self) -> None:
        """Stop the heartbeat (the leases then expire by themselves). Idempotent."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _beat(self) -> None:
        while True:
            await self._jobs.clock.sleep(self.settings.heartbeat_s)
            try:
                await self.tick()
            except Exception:  # a database hiccup must not end the heartbeat; the next one retries
                log.exception("lease heartbeat of %s failed", self.owner)
