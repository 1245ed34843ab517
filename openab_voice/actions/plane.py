"""The action plane as one unit: broker and executor, built together on the bot's ports.

The composition root (:mod:`openab_voice.app`) builds it with the control channel (posting through
the Discord client) and the voice side (the joined sessions); it is never half-built.
"""

from __future__ import annotations

from openab_voice.acp.workspace import Workspaces
from openab_voice.actions.agents import AgentSettings
from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.delivery import ResultDelivery
from openab_voice.actions.execution import ActionExecutor
from openab_voice.actions.leases import LeaseKeeper, LeaseSettings
from openab_voice.actions.ports import ControlChannel, VoiceSide
from openab_voice.actions.remote import (
    CancelForwarder,
    RemoteResults,
    no_local_workspace,
    not_here,
    queued,
)
from openab_voice.actions.requests import BrokerSettings
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.jobs import JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord


class ActionPlane:
    """Owns the broker and the executor of this process (and closes them; the store is the caller's).

    With ``remote_poll_s`` set (``OPENAB_EXECUTOR=remote``) the executor here starts nothing: a
    confirmed job waits in the store for an ``openab-voice executor``, and :class:`RemoteResults`
    delivers what the workers settled, polling every ``remote_poll_s``.
    """

    def __init__(
        self,
        *,
        store: JobStore,
        workspaces: Workspaces,
        broker: BrokerSettings,
        agent: AgentSettings,
        channel: ControlChannel,
        voice: VoiceSide,
        bus: EventBus,
        clock: Clock,
        leases: LeaseSettings | None = None,
        remote_poll_s: float | None = None,
    ) -> None:
        self._store = store
        self._workspaces = workspaces
        self._leases = LeaseKeeper(
            JobWriter(store, bus=bus, clock=clock),
            leases or LeaseSettings(),
            on_reaped=self._quarantine_on_disk,
        )
        self._executor = ActionExecutor(
            store=store,
            workspaces=workspaces,
            channel=channel,
            voice=voice,
            agent=agent,
            bus=bus,
            clock=clock,
            leases=self._leases,
        )
        self._broker = ActionBroker(
            store=store,
            channel=channel,
            voice=voice,
            settings=broker,
            bus=bus,
            clock=clock,
            on_confirmed=self._executor.launch if remote_poll_s is None else queued,
            on_cancel=self._executor.cancel if remote_poll_s is None else not_here,
            on_reconcile=self._executor.lift_quarantine if remote_poll_s is None else no_local_workspace,
            on_remote_cancel=None
            if remote_poll_s is None
            else CancelForwarder(JobWriter(store, bus=bus, clock=clock)),
        )
        self._remote: RemoteResults | None = None
        if remote_poll_s is not None:
            jobs = JobWriter(store, bus=bus, clock=clock)
            delivery = ResultDelivery(
                jobs, channel=channel, voice=voice, bus=bus, clock=clock, trusted=agent.trusted_listener_ids
            )
            self._remote = RemoteResults(jobs, delivery, poll_s=remote_poll_s, shards=broker.shards)

    @property
    def store(self) -> JobStore:
        return self._store

    @property
    def broker(self) -> ActionBroker:
        return self._broker

    @property
    def executor(self) -> ActionExecutor:
        return self._executor

    @property
    def leases(self) -> LeaseKeeper:
        return self._leases

    @property
    def remote(self) -> RemoteResults | None:
        """The delivery of remote workers' results, when executors are remote."""
        return self._remote

    async def start(self) -> None:
        """Restart reconciliation (dead running jobs → outcome_unknown, their workspaces quarantined in
        the store and on disk, never re-run; jobs with a live lease of another process are left
        alone), then the expiry sweeper and the lease heartbeat (renewal and reaper)."""
        reconciled = await self.broker.start(
            own_lease_prefix=self._leases.settings.prefix,
            # Remote: a confirmed job waits in the queue for a worker, restart or not.
            fail_unleased_confirmed=self._remote is None,
        )
        for record in reconciled:
            if record.status is JobStatus.OUTCOME_UNKNOWN:
                self._quarantine_on_disk(record)
        self._leases.start()
        if self._remote is not None:
            self._remote.start()

    def _quarantine_on_disk(self, record: ActionRecord) -> None:
        """Mark a lost job's workspace on disk too, where it lives on this machine."""
        workspace = self._workspaces.locate(record.id)
        if workspace.private.is_dir():
            self._workspaces.quarantine(
                workspace, record.detail or "its process stopped while it was running"
            )

    async def aclose(self) -> None:
        if self._remote is not None:
            await self._remote.aclose()
        await self._broker.aclose()
        await self._executor.aclose()
        await self._leases.aclose()  # last: the executor's settling agents keep their leases
