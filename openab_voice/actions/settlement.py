"""Settling an action: its final status written, its workspace freed or quarantined, its result handed on.

One rule for every ending: the agent's :class:`~openab_voice.acp.types.TurnCompletion` decides the
final status (``outcome_unknown`` quarantines the workspace, in the store and on disk, until an
operator reconciles it); a job a reaper decided meanwhile keeps the reaper's verdict; an action that
never spawned an agent ends ``failed`` or ``cancelled`` saying that nothing ran. Only once the status
is written is the result delivered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from openab_voice.acp.driver import AgentRun
from openab_voice.acp.types import ExecutionOutcome, TurnCompletion, Workspace
from openab_voice.acp.workspace import Workspaces
from openab_voice.actions.ports import ResultSink
from openab_voice.actions.writer import JobWriter
from openab_voice.errors import ActionError, ErrorCode, OpenabError, StaleTransition
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)

_EVENT_FOR = {
    ExecutionOutcome.SUCCEEDED: JobEvent.SUCCEED,
    ExecutionOutcome.FAILED: JobEvent.FAIL,
    ExecutionOutcome.CANCELLED: JobEvent.CANCEL,
    ExecutionOutcome.OUTCOME_UNKNOWN: JobEvent.LOSE,
}


@dataclass(slots=True)
class Launch:
    """One launched action of this process, from the confirmation until it settled.

    ``cancel_requested`` is read at each step before the spawn; ``run`` exists from the moment the
    job is ``running`` (set without an await in between, so a cancel sees one or the other).
    """

    cancel_requested: bool = False
    run: AgentRun | None = None
    turn_ended: bool = False  # the agent's outcome is known; a cancel can no longer change it
    workspace: Workspace | None = None  # held in the store from here on


class Settlement:
    """Writes how each action of an executor ended, then delivers it.

    Args:
        jobs: The executor's job writer.
        workspaces: The workspaces on disk.
        results: Where settled results go (the control channel and voice, or the store only).
        settled: Called with an action's id once its final status is written (a cancel then reads it).
    """

    def __init__(
        self, jobs: JobWriter, *, workspaces: Workspaces, results: ResultSink, settled: Callable[[str], None]
    ) -> None:
        self._jobs = jobs
        self._store = jobs.store
        self._workspaces = workspaces
        self._results = results
        self._settled = settled

    async def settle(self, record: ActionRecord, workspace: Workspace, completion: TurnCompletion) -> None:
        """The agent has stopped: write ``completion``'s status, free or quarantine, deliver."""
        # The agent has stopped: its throwaway HOME (and any key it wrote there) goes first, whatever
        # the outcome; a quarantine keeps only the working tree and our logs.
        try:
            await self._workspaces.discard_scratch(workspace)
        except OSError:
            log.exception("could not empty the agent's HOME of %s", record.id)
        event = _EVENT_FOR[completion.execution]
        try:
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
        except StaleTransition:
            await self._settle_reaped(record, workspace)
            return
        self._settled(record.id)  # settled: a cancel now reads the final status
        if completion.quarantined:
            await self._quarantine(record, workspace, completion.detail)
        else:
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)
            try:
                await self._workspaces.finished(workspace)
            except OpenabError as exc:
                log.warning("could not give back the workspace of %s: %s", record.id, exc.message)
        await self._results.deliver(final, completion)

    async def _settle_reaped(self, record: ActionRecord, workspace: Workspace) -> None:
        """The job changed under a running agent: only a reaper does that (our lease had expired).

        Its verdict stands (``outcome_unknown``, the workspace quarantined in the store); the agent's
        own outcome is not written over it, and the workspace is quarantined on disk too.
        """
        self._settled(record.id)
        current = await self._jobs.call(self._store.require, record.id)
        log.warning("action %s was decided elsewhere (%s) while its agent ran", record.id, current.status)
        if current.status is JobStatus.OUTCOME_UNKNOWN:
            await asyncio.to_thread(self._workspaces.quarantine, workspace, current.detail or "lease lost")
        else:
            await self._jobs.call(self._store.release_workspace, workspace.id, action_id=record.id)

    async def stopped(self, action_id: str, launch: Launch) -> None:
        """Settle an action whose task was cancelled, at whatever step it was (unbounded; see the executor)."""
        record = await self._jobs.call(self._store.require, action_id)
        run, workspace = launch.run, launch.workspace
        launch.turn_ended = True
        if record.status.terminal:
            if workspace is not None:  # stopped after the final write: the workspace may still be held
                if record.status is JobStatus.OUTCOME_UNKNOWN:
                    await self._quarantine(record, workspace, record.detail or "outcome unknown")
                else:
                    await self._jobs.call(self._store.release_workspace, workspace.id, action_id=action_id)
            return
        if record.status is JobStatus.CONFIRMED or workspace is None:
            if workspace is not None:
                await self._jobs.call(self._store.release_workspace, workspace.id, action_id=action_id)
                await self._workspaces.cleanup(workspace)
            why = "stopped before the agent was started; nothing ran"
            try:
                final = await self._jobs.apply(record, JobEvent.CANCEL, "system", why, detail=why)
            except (StaleTransition, ActionError):
                return  # decided meanwhile (or not cancellable any more): that stands
            self._settled(action_id)
            await self._results.deliver(final, _unstarted(action_id, ExecutionOutcome.CANCELLED, None, why))
            return
        # Running. Once the prompt may have been sent nobody knows what the agent did.
        sent = run is not None and run.prompt_sent
        why = (
            "stopped while the agent was working (the prompt had been sent); its process group was killed"
            if sent
            else "stopped before the prompt was sent; nothing was asked of the agent"
        )
        completion = TurnCompletion(
            action_id=action_id,
            execution=ExecutionOutcome.OUTCOME_UNKNOWN if sent else ExecutionOutcome.CANCELLED,
            stop_reason=None,
            output="",
            error_code=ErrorCode.ACTION_STOPPED if sent else None,
            detail=why,
            prompt_sent=sent,
            permission_decisions=(),
            quarantined=sent,
        )
        await self.settle(record, workspace, completion)

    async def _quarantine(self, record: ActionRecord, workspace: Workspace, reason: str) -> None:
        await self._jobs.call(
            self._store.quarantine_workspace, workspace.id, action_id=record.id, reason=reason
        )
        await asyncio.to_thread(self._workspaces.quarantine, workspace, reason)

    async def cancel_unstarted(self, record: ActionRecord) -> None:
        """A cancel accepted before the running write: ``confirmed → cancelled``, and say so in text."""
        why = "cancelled before the agent was started; nothing ran"
        try:
            final = await self._jobs.apply(record, JobEvent.CANCEL, "system", why, detail=why)
        except StaleTransition:
            return  # the broker cancelled it itself meanwhile: that stands, and nothing ran
        self._settled(record.id)
        await self._results.deliver(final, _unstarted(record.id, ExecutionOutcome.CANCELLED, None, why))

    async def finish_unstarted(self, record: ActionRecord, code: str, why: str) -> None:
        """Nothing was spawned: ``confirmed → failed`` with the reason, and say so in text."""
        try:
            final = await self._jobs.apply(record, JobEvent.FAIL, "system", why, error_code=code, detail=why)
        except StaleTransition:
            return  # cancelled meanwhile: that stands, and nothing ran
        self._settled(record.id)

        await self._results.deliver(final, _unstarted(record.id, ExecutionOutcome.FAILED, code, why))


def _unstarted(action_id: str, execution: ExecutionOutcome, code: str | None, why: str) -> TurnCompletion:
    """The completion of an action whose agent was never spawned (nothing was asked of it)."""
    return TurnCompletion(
        action_id=action_id,
        execution=execution,
        stop_reason=None,
        output="",
        error_code=code,
        detail=why,
        prompt_sent=False,
        permission_decisions=(),
        quarantined=False,
    )
