"""ActionExecutor: runs a confirmed action in a fresh ACP agent and delivers its result, text first.

Order, each step written to the store before its effect: (1) prepare and take the workspace (one
running action per workspace; busy → ``failed``); (2) ``confirmed → running``, then spawn a fresh
agent for this action only (a cancel accepted before the spawn ends it ``cancelled`` with nothing
run; the launch is registered before the first await, so a cancel always finds it); (3) the turn
driver's :class:`~openab_voice.acp.types.TurnCompletion` decides the final status
(``outcome_unknown`` quarantines the workspace until an operator reconciles it); (4) the full result
is posted to the control channel and the delivery recorded; (5) only then the voice says the status.
This module owns the order and the cancels; steps 3 to 5 are :mod:`~openab_voice.actions.settlement`'s,
and how an agent is started and heard :mod:`~openab_voice.actions.agents`'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from openab_voice.acp.driver import AgentRun
from openab_voice.acp.types import ExecutionOutcome, TurnCompletion, Workspace
from openab_voice.acp.workspace import Workspaces
from openab_voice.actions.agents import AgentHooks, AgentSettings, turn_request
from openab_voice.actions.delivery import ResultDelivery
from openab_voice.actions.leases import LeaseKeeper
from openab_voice.actions.ports import CancelReply, ControlChannel, ResultSink, VoiceSide
from openab_voice.actions.settlement import Launch, Settlement
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, bounded
from openab_voice.errors import ErrorCode, OpenabError, StaleTransition
from openab_voice.jobs import EffectCeiling, JobEvent
from openab_voice.lifecycle import Lifecycle
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)


# How long a stopped action may take to settle (store writes, quarantine, result post).
STOP_SETTLE_S = 10.0


class ActionExecutor:
    """Owns the running actions of this process (one task each) and their fresh agents."""

    def __init__(
        self,
        *,
        store: JobStore,
        workspaces: Workspaces,
        channel: ControlChannel | None = None,
        voice: VoiceSide | None = None,
        agent: AgentSettings,
        bus: EventBus,
        clock: Clock,
        leases: LeaseKeeper | None = None,
        results: ResultSink | None = None,
    ) -> None:
        """Args beyond the obvious: ``channel`` and ``voice`` deliver results (the bot), or
        ``results`` replaces them (an executor worker keeps results in the store only)."""
        self._store = store
        self._jobs = JobWriter(store, bus=bus, clock=clock)
        # Leases the jobs it starts and stops an agent whose lease was lost (None: no lease written).
        self._leases = leases
        if leases is not None:
            leases.on_lost = self._lease_lost
            leases.on_cancel_requested = self._cancel_requested
        self._workspaces = workspaces
        self._agent = agent
        self._bus = bus
        self._clock = clock
        if results is None:
            if channel is None or voice is None:
                raise TypeError("ActionExecutor needs a channel and a voice side, or a result sink")
            results = ResultDelivery(
                self._jobs,
                channel=channel,
                voice=voice,
                bus=bus,
                clock=clock,
                trusted=agent.trusted_listener_ids,
            )
        self._settlement = Settlement(
            self._jobs, workspaces=workspaces, results=results, settled=self._settled
        )
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._launches: dict[str, Launch] = {}
        self._life = Lifecycle("action runner", started=True)

    @property
    def running(self) -> list[str]:
        return list(self._tasks)

    @property
    def active(self) -> int:
        """How many actions this process launched and has not settled yet."""
        return len(self._launches)

    @property
    def closed(self) -> bool:
        return self._life.closed

    def launch(self, record: ActionRecord, confirmed_at: float) -> None:
        """Start a confirmed action (called by the broker right after the confirm was stored)."""
        if self._life.closed or record.id in self._launches:
            return
        launch = Launch()
        # Registered before the task runs at all: from here on a cancel finds this action.
        self._launches[record.id] = launch
        task = asyncio.create_task(self._execute(record, confirmed_at, launch), name=f"action-{record.id}")
        self._tasks[record.id] = task
        task.add_done_callback(self._forget(record.id))

    def owns(self, action_id: str) -> bool:
        """Whether this process launched ``action_id`` and has not settled it yet."""
        return action_id in self._launches

    def cancel(self, action_id: str) -> CancelReply:
        """Cancel an action this process launched, at whatever step it is.

        Before the spawn the action ends ``cancelled`` and nothing runs; once the agent runs, ACP
        ``session/cancel``, then the bounded wait, then a kill (``ACCEPTED``). ``FINISHING`` when the
        agent's turn already ended here, ``NOT_HERE`` when this process does not hold the action.
        """
        launch = self._launches.get(action_id)
        if launch is None:
            return CancelReply.NOT_HERE
        if launch.turn_ended:
            return CancelReply.FINISHING
        launch.cancel_requested = True
        if launch.run is not None:
            # Synchronously: a permission request the agent sends from now on is answered cancelled.
            launch.run.request_cancel()
            key = f"cancel-{action_id}"
            task = asyncio.create_task(launch.run.cancel(), name=key)
            self._tasks.setdefault(key, task)
            task.add_done_callback(self._forget(key))
        return CancelReply.ACCEPTED

    def _forget(self, key: str) -> Callable[[asyncio.Task[None]], None]:
        def done(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(key, None)
            self._launches.pop(key, None)
            if self._leases is not None:
                self._leases.drop(key)

        return done

    def _settled(self, action_id: str) -> None:
        self._launches.pop(action_id, None)

    def _cancel_requested(self, action_id: str) -> None:
        """A cancel that reached this process through the store (the bot of a remote executor)."""
        log.info("cancel of %s requested through the store: %s", action_id, self.cancel(action_id).value)

    def _lease_lost(self, action_id: str) -> None:
        """Another process reaped this action (our heartbeat failed for a whole lease): stop its agent.

        The store already says ``outcome_unknown``; the settle that follows finds that and only
        quarantines the workspace on disk. A job that settled here while the renewal ran was not
        lost, only finished: nothing to stop.
        """
        launch = self._launches.get(action_id)
        if launch is None or launch.turn_ended:
            return
        log.warning("lease of %s was lost while its agent ran; stopping the agent", action_id)
        self.cancel(action_id)

    def lift_quarantine(self, action_id: str) -> None:
        """Remove the quarantine marker of ``action_id``'s workspace (the store was reconciled first)."""
        self._workspaces.release(self._workspaces.locate(action_id))

    async def wait_idle(self) -> None:
        """Wait until every launched action has finished (tests, demo, bench)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop every running agent. Their jobs stay ``running`` only if the store write fails; the next
        start-up reconciles those to ``outcome_unknown``."""
        first = self._life.begin_close()  # a second call still waits for every action to settle
        for launch in list(self._launches.values()):
            launch.cancel_requested = True
            if launch.run is not None:
                await launch.run.cancel()
        await self.wait_idle()
        if first:
            self._life.finish_close()

    # --- one action --------------------------------------------------------------------------------

    async def _execute(self, record: ActionRecord, confirmed_at: float, launch: Launch) -> None:
        try:
            await self._steps(record, confirmed_at, launch)
        except asyncio.CancelledError:
            # Shutdown, the demo's end or a closing loop cancelled this task: settle the action (the
            # same rule as any TurnCompletion), then let the cancellation go on.
            await self._settle_stopped(record.id, launch)
            raise

    async def _steps(self, record: ActionRecord, confirmed_at: float, launch: Launch) -> None:
        ceiling = EffectCeiling(record.effect_ceiling or record.effect_hint)
        refusal = self._agent.containment.refusal
        if refusal is not None:
            await self._settlement.finish_unstarted(record, ErrorCode.ACP_CONTAINMENT_UNAVAILABLE, refusal)
            return
        if ceiling is EffectCeiling.WORKSPACE_EXEC and not self._agent.containment.contained:
            # Never silently widened or narrowed: the operator granted commands inside a sandbox.
            why = "workspace_exec needs the agent sandbox (bubblewrap or an action pod), which is not active here"
            await self._settlement.finish_unstarted(record, ErrorCode.ACP_SANDBOX_UNAVAILABLE, why)
            return
        try:
            workspace = await self._workspaces.prepare(record.id)
        except OpenabError as exc:
            await self._settlement.finish_unstarted(record, exc.code, exc.message)
            return
        taken = await self._jobs.call(
            self._store.acquire_workspace, workspace.id, path=str(workspace.path), action_id=record.id
        )
        if not taken:
            await self._workspaces.cleanup(workspace)  # this action's fresh tree, never used
            await self._settlement.finish_unstarted(
                record, ErrorCode.ACP_WORKSPACE_BUSY, "another action holds this workspace"
            )
            return
        launch.workspace = workspace
        if self._life.closed or launch.cancel_requested:
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
            await self._workspaces.cleanup(workspace)
            if launch.cancel_requested:
                await self._settlement.cancel_unstarted(record)
            else:
                await self._settlement.finish_unstarted(
                    record, ErrorCode.ACTION_SHUTDOWN, "the bot shut down before it started"
                )
            return
        try:
            lease = self._leases.lease_fields() if self._leases is not None else {}
            running = await self._jobs.apply(
                record, JobEvent.START, "system", "agent starting", workspace_id=workspace.id, **lease
            )
            if self._leases is not None:
                self._leases.hold(record.id)
        except StaleTransition:
            # Cancelled between the confirmation and now: nothing ran; give the workspace back.
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
            await self._workspaces.cleanup(workspace)
            return
        completion = await self._run_agent(running, workspace, confirmed_at, launch)
        await self._settlement.settle(running, workspace, completion)

    async def _run_agent(
        self, record: ActionRecord, workspace: Workspace, confirmed_at: float, launch: Launch
    ) -> TurnCompletion:
        request = turn_request(record, workspace, self._agent)
        hooks = AgentHooks(
            record.id, confirmed_at=confirmed_at, store=self._store, bus=self._bus, clock=self._clock
        )
        run = AgentRun(request, clock=self._clock, on_event=hooks.on_event, on_decision=hooks.on_decision)
        # No await between the check and the assignment: a cancel sees the flag or the run.
        launch.run = run
        if launch.cancel_requested:
            run.request_cancel()  # accepted between the running write and now: nothing is spawned
        try:
            return await run.run()
        except Exception as exc:  # a driver bug after the job was marked running: nobody knows what ran
            log.exception("agent run of %s failed", record.id)
            return TurnCompletion(
                action_id=record.id,
                execution=ExecutionOutcome.OUTCOME_UNKNOWN,
                stop_reason=None,
                output="",
                error_code=ErrorCode.ACP_DRIVER_ERROR,
                detail=f"{type(exc).__name__}: {exc}"[:300],
                prompt_sent=True,
                permission_decisions=(),
                quarantined=True,
            )
        finally:
            launch.turn_ended = True

    async def _settle_stopped(self, action_id: str, launch: Launch) -> None:
        """Settle an action whose task was cancelled, shielded and bounded; never raises.

        Shielded: the settlement is its own task, so a second cancel of the caller cannot interrupt
        it halfway (a job left ``running``, a workspace left ``busy``). Bounded: a store or Discord
        that does not answer cannot hold shutdown up; what is left then is reconciled at start-up.
        """
        settle = asyncio.ensure_future(self._settlement.stopped(action_id, launch))
        key = f"settle-{action_id}"
        self._tasks[key] = settle
        settle.add_done_callback(self._forget(key))
        try:
            finished, _ = await bounded(self._clock, STOP_SETTLE_S, asyncio.shield(settle))
        except asyncio.CancelledError:
            return  # cancelled again: the shielded settlement goes on by itself
        except Exception:
            log.exception("settling stopped action %s failed", action_id)
            return
        if not finished:
            log.warning("settling stopped action %s took over %.0f s", action_id, STOP_SETTLE_S)


def workspace_root(data_dir: Path) -> Path:
    """Where per-action workspaces live."""
    return data_dir / "workspaces"
