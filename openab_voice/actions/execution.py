"""ActionExecutor: runs a confirmed action in a fresh ACP agent and delivers its result, text first.

Order, each step written to the store before its effect:

1. prepare the workspace and take it (one running action per workspace; busy → ``failed``);
2. ``confirmed → running`` (write-ahead), then spawn a fresh agent process for this action only;
3. the turn driver's :class:`~openab_voice.acp.types.TurnCompletion` decides the final status
   (``outcome_unknown`` quarantines the workspace until an operator reconciles it);
4. the full result is posted to the control text channel, and the delivery outcome recorded;
5. only when the text was delivered, the voice says the status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openab_voice.acp.driver import AgentRun
from openab_voice.acp.types import (
    DeliveryOutcome,
    ExecutionOutcome,
    PermissionDecision,
    TurnCompletion,
    TurnRequest,
    Workspace,
)
from openab_voice.acp.workspace import WorkspaceManager
from openab_voice.actions.events import (
    ActionResultPosted,
    AgentProcessStarted,
    AgentPromptSent,
    PermissionDecided,
)
from openab_voice.actions.jobs import EffectCeiling, JobEvent
from openab_voice.actions.ports import ControlChannel, DeliveryFailed, VoiceSide
from openab_voice.actions.results import result_text, spoken_status
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.errors import OpenabError, StaleTransition
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)


_EVENT_FOR = {
    ExecutionOutcome.SUCCEEDED: JobEvent.SUCCEED,
    ExecutionOutcome.FAILED: JobEvent.FAIL,
    ExecutionOutcome.CANCELLED: JobEvent.CANCEL,
    ExecutionOutcome.OUTCOME_UNKNOWN: JobEvent.LOSE,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSettings:
    """How agents are started: the command, what they may see, how long they may take."""

    command: tuple[str, ...]
    env_allowlist: tuple[str, ...]
    environ: Mapping[str, str]
    turn_timeout_s: float
    cancel_grace_s: float
    trusted_listener_ids: frozenset[int] = frozenset()


class ActionExecutor:
    """Owns the running actions of this process (one task each) and their fresh agents."""

    def __init__(
        self,
        *,
        store: JobStore,
        workspaces: WorkspaceManager,
        channel: ControlChannel,
        voice: VoiceSide,
        agent: AgentSettings,
        bus: EventBus,
        clock: Clock,
    ) -> None:
        self._store = store
        self._jobs = JobWriter(store, bus=bus, clock=clock)
        self._workspaces = workspaces
        self._channel = channel
        self._voice = voice
        self._agent = agent
        self._bus = bus
        self._clock = clock
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._runs: dict[str, AgentRun] = {}
        self._closed = False

    @property
    def running(self) -> list[str]:
        return list(self._tasks)

    def launch(self, record: ActionRecord, confirmed_at: float) -> None:
        """Start a confirmed action (called by the broker right after the confirm was stored)."""
        if self._closed or record.id in self._tasks:
            return
        task = asyncio.create_task(self._execute(record, confirmed_at), name=f"action-{record.id}")
        self._tasks[record.id] = task
        task.add_done_callback(self._forget(record.id))

    def cancel(self, action_id: str) -> bool:
        """Ask a running agent to stop (ACP session/cancel, then the bounded wait, then a kill)."""
        run = self._runs.get(action_id)
        if run is None:
            return False
        key = f"cancel-{action_id}"
        task = asyncio.create_task(run.cancel(), name=key)
        self._tasks.setdefault(key, task)
        task.add_done_callback(self._forget(key))
        return True

    def _forget(self, key: str) -> Callable[[asyncio.Task[None]], None]:
        def done(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(key, None)

        return done

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
        self._closed = True
        for run in list(self._runs.values()):
            await run.cancel()
        await self.wait_idle()

    # --- one action --------------------------------------------------------------------------------

    async def _execute(self, record: ActionRecord, confirmed_at: float) -> None:
        try:
            workspace = await self._workspaces.prepare(record.id)
        except OpenabError as exc:
            await self._finish_unstarted(record, exc.code, exc.message)
            return
        taken = await self._jobs.call(
            self._store.acquire_workspace, workspace.id, path=str(workspace.path), action_id=record.id
        )
        if not taken:
            await self._workspaces.cleanup(workspace)  # this action's fresh tree, never used
            await self._finish_unstarted(record, "ACP_WORKSPACE_BUSY", "another action holds this workspace")
            return
        if self._closed:
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
            await self._workspaces.cleanup(workspace)
            await self._finish_unstarted(record, "ACTION_SHUTDOWN", "the bot shut down before it started")
            return
        try:
            running = await self._jobs.apply(
                record, JobEvent.START, "system", "agent starting", workspace_id=workspace.id
            )
        except StaleTransition:
            # Cancelled between the confirmation and now: nothing ran; give the workspace back.
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
            await self._workspaces.cleanup(workspace)
            return
        completion = await self._run_agent(running, workspace, confirmed_at)
        await self._settle(running, workspace, completion)

    async def _run_agent(
        self, record: ActionRecord, workspace: Workspace, confirmed_at: float
    ) -> TurnCompletion:
        request = TurnRequest(
            action_id=record.id,
            goal=record.goal,
            effect_ceiling=EffectCeiling(record.effect_ceiling or record.effect_hint),
            workspace=workspace,
            command=self._agent.command,
            env_allowlist=self._agent.env_allowlist,
            environ=self._agent.environ,
            turn_timeout_s=self._agent.turn_timeout_s,
            cancel_grace_s=self._agent.cancel_grace_s,
        )

        def on_event(kind: str, data: dict[str, object]) -> None:
            if kind == "prompt_sent":
                self._bus.publish(AgentPromptSent(at=self._clock.monotonic(), action_id=record.id))
            if kind == "process_started":
                self._bus.publish(
                    AgentProcessStarted(
                        at=self._clock.monotonic(),
                        action_id=record.id,
                        pid=int(str(data.get("pid", 0))),
                        confirm_to_spawn_ms=(self._clock.monotonic() - confirmed_at) * 1000.0,
                    )
                )

        def on_decision(decision: PermissionDecision) -> None:
            detail = _decision_dict(decision)
            self._bus.publish(
                PermissionDecided(at=self._clock.monotonic(), action_id=record.id, decision=detail)
            )
            # Audited synchronously from the agent's callback: a decision is never lost to a crash later.
            self._store.audit("permission", actor="resolver", action_id=record.id, detail=detail)

        run = AgentRun(request, clock=self._clock, on_event=on_event, on_decision=on_decision)
        self._runs[record.id] = run
        try:
            return await run.run()
        except Exception as exc:  # a driver bug after the job was marked running: nobody knows what ran
            log.exception("agent run of %s failed", record.id)
            return TurnCompletion(
                action_id=record.id,
                execution=ExecutionOutcome.OUTCOME_UNKNOWN,
                stop_reason=None,
                output="",
                error_code="ACP_DRIVER_ERROR",
                detail=f"{type(exc).__name__}: {exc}"[:300],
                prompt_sent=True,
                permission_decisions=(),
                quarantined=True,
            )
        finally:
            self._runs.pop(record.id, None)

    async def _settle(self, record: ActionRecord, workspace: Workspace, completion: TurnCompletion) -> None:
        event = _EVENT_FOR[completion.execution]
        final = await self._jobs.apply(
            record,
            event,
            "agent",
            completion.detail or completion.execution.value,
            result_text=completion.output,
            stop_reason=completion.stop_reason,
            error_code=completion.error_code,
            detail=completion.detail,
        )
        if completion.quarantined:
            await self._jobs.call(
                self._store.quarantine_workspace, workspace.id, action_id=record.id, reason=completion.detail
            )
            await asyncio.to_thread(self._workspaces.quarantine, workspace, completion.detail)
        else:
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
        await self._deliver(final, completion)

    async def _finish_unstarted(self, record: ActionRecord, code: str, why: str) -> None:
        """Nothing was spawned: ``confirmed → failed`` with the reason, and say so in text."""
        try:
            final = await self._jobs.apply(record, JobEvent.FAIL, "system", why, error_code=code, detail=why)
        except StaleTransition:
            return  # cancelled meanwhile: that stands, and nothing ran

        completion = TurnCompletion(
            action_id=record.id,
            execution=ExecutionOutcome.FAILED,
            stop_reason=None,
            output="",
            error_code=code,
            detail=why,
            prompt_sent=False,
            permission_decisions=(),
            quarantined=False,
        )
        await self._deliver(final, completion)

    async def _deliver(self, record: ActionRecord, completion: TurnCompletion) -> None:
        text = result_text(
            action_id=record.id,
            goal=record.goal,
            execution=completion.execution.value,
            output=completion.output,
            detail=completion.detail if completion.execution is not ExecutionOutcome.SUCCEEDED else "",
        )
        try:
            count = await self._channel.post_result(
                channel_id=record.text_channel_id, parts=text.parts, attachment=text.attachment
            )
            delivery = DeliveryOutcome.DELIVERED
        except DeliveryFailed:
            count, delivery = 0, DeliveryOutcome.FAILED
        # The delivery outcome is recorded beside the execution outcome, never instead of it.
        await self._jobs.call(
            self._store.update, record.id, expected_version=record.version, delivery_outcome=delivery.value
        )
        self._bus.publish(
            ActionResultPosted(
                at=self._clock.monotonic(),
                action_id=record.id,
                execution=completion.execution.value,
                delivered=delivery is DeliveryOutcome.DELIVERED,
                messages=count,
            )
        )
        if delivery is not DeliveryOutcome.DELIVERED:
            return  # no speech about a result nobody can read
        listeners = self._voice.listeners(record.guild_id) or frozenset()
        trusted = bool(listeners) and listeners <= self._agent.trusted_listener_ids
        speech = spoken_status(
            execution=completion.execution.value, output=completion.output, all_trusted=trusted
        )
        await self._voice.say(record.guild_id, speech)


def _decision_dict(decision: PermissionDecision) -> dict[str, Any]:
    return {
        "tool_call_id": decision.tool_call_id,
        "title": decision.title,
        "kind": decision.kind,
        "needed": decision.needed.value,
        "offered": list(decision.offered),
        "outcome": decision.outcome,
        "option_kind": decision.option_kind,
        "reason": decision.reason,
    }


def workspace_root(data_dir: Path) -> Path:
    """Where per-action workspaces live."""
    return data_dir / "workspaces"
