"""ActionBroker: the only route from voice output to executable work.

A request (a semantic tool call or the deterministic task phrase) is untrusted text plus trusted
context the bot itself knows: guild, voice-session generation, the speaker from SSRC attribution,
control channel. The broker mints the action id, stores the proposal, delivers it (posted and pinned
with Confirm / Reject buttons) and only then lets anything happen. Only the configured operator's
click confirms; anyone else is refused and audited; a spoken "yes" is just a transcript. The plain
Confirm grants at most ``workspace_write``; ``workspace_exec`` and ``external`` each need their own
button, and a click on a button the proposal did not offer is refused, as are stale voice-session
generations, expired proposals and replayed clicks. The same provider call id twice is the same
action (idempotency key), so a retrying model cannot loop confirmations. Every status change is a
compare-and-set row update, written before its effect. Offers: :mod:`~openab_voice.actions.offers`;
judging a click (and expiry): :mod:`~openab_voice.actions.decisions`; execution:
:class:`~openab_voice.actions.execution.ActionExecutor`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable

from openab_voice.actions.decisions import SYSTEM, Decisions
from openab_voice.actions.events import ActionRequestRefused
from openab_voice.actions.offers import offered, proposal_view
from openab_voice.actions.ports import CancelReply, ControlChannel, VoiceSide
from openab_voice.actions.requests import ActionRequest, BrokerSettings, Outcome, repeat_outcome
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.errors import ActionError, DeliveryFailed, ErrorCode, StaleTransition
from openab_voice.jobs import AWAITING_CONFIRMATION, JobEvent, JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction

log = logging.getLogger(__name__)


# More than the job graph's longest path (proposed, delivered, confirmed, running, terminal).
_CANCEL_ATTEMPTS = 8


class ActionBroker:
    """Proposals, confirmations, cancels; the store is the source of truth.

    Args:
        store: the job store (synchronous; called from a worker thread).
        channel: the control text channel.
        voice: voice-session generations, listeners and the status voice.
        settings: operator and policy.
        bus: action events.
        clock: expiry and timestamps.
        on_confirmed: called with each confirmed action (the executor starts it).
        on_cancel: asks the executor to cancel an action it holds (from confirmation to settlement).
        on_reconcile: lifts the on-disk quarantine marker of an action's workspace.
        on_remote_cancel: asks whoever holds a running action's lease elsewhere (an executor worker)
            to cancel it; True when the request was recorded. None: such a cancel is refused.
    """

    def __init__(
        self,
        *,
        store: JobStore,
        channel: ControlChannel,
        voice: VoiceSide,
        settings: BrokerSettings,
        bus: EventBus,
        clock: Clock,
        on_confirmed: Callable[[ActionRecord, float], None],
        on_cancel: Callable[[str], CancelReply],
        on_reconcile: Callable[[str], None],
        on_remote_cancel: Callable[[ActionRecord, int], Awaitable[bool]] | None = None,
    ) -> None:
        self._store = store
        self._jobs = JobWriter(store, bus=bus, clock=clock)
        self._channel = channel
        self._voice = voice
        self._settings = settings
        self._bus = bus
        self._clock = clock
        self._decisions = Decisions(
            jobs=self._jobs,
            channel=channel,
            voice=voice,
            settings=settings,
            bus=bus,
            clock=clock,
            on_confirmed=on_confirmed,
        )
        self._on_cancel = on_cancel
        self._on_reconcile = on_reconcile
        self._on_remote_cancel = on_remote_cancel
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def settings(self) -> BrokerSettings:
        return self._settings

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(
        self, *, own_lease_prefix: str | None = None, fail_unleased_confirmed: bool = True
    ) -> list[ActionRecord]:
        """Reconcile what a previous process left (dead running jobs → outcome_unknown, stale proposals
        expire; see ``JobStore.reconcile_after_restart``), then sweep expiries periodically. Returns
        the reconciled actions."""
        changed = await self._jobs.call(
            self._store.reconcile_after_restart,
            actor="startup",
            own_lease_prefix=own_lease_prefix,
            fail_unleased_confirmed=fail_unleased_confirmed,
            shards=self._settings.shards,
        )
        for record in changed:
            self._jobs.changed(record, previous=None, actor="startup", reason="reconciled after restart")
        self._sweeper = asyncio.create_task(self._sweep(), name="action-expiry-sweep")
        return changed

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None

    async def _sweep(self) -> None:
        while True:
            await self._clock.sleep(self._settings.sweep_interval_s)
            try:
                await self.expire_due()
            except Exception:  # a database hiccup must not end the sweeper
                log.exception("expiry sweep failed")

    async def expire_due(self) -> int:
        """Expire every proposal (of this pod's guilds) past its deadline; returns how many."""
        now = self._clock.wall()
        waiting = await self._jobs.call(
            self._store.in_status, *AWAITING_CONFIRMATION, shards=self._settings.shards
        )
        count = 0
        for record in waiting:
            if (
                record.expires_at <= now
                and await self._decisions.expire(record, "not confirmed in time") is not None
            ):
                count += 1
        return count

    # --- proposals -----------------------------------------------------------------------------------

    async def propose(self, request: ActionRequest) -> Outcome:
        """Store and deliver a proposal; nothing runs until the operator confirms it in text."""
        refusal = await self._refuse_request(request)
        if refusal is not None:
            return refusal
        now = self._clock.wall()
        new = NewAction(
            id=f"a-{secrets.token_hex(4)}",
            idempotency_key=request.idempotency_key,
            goal=request.goal.strip(),
            effect_hint=min(request.effect_hint, self._settings.max_effect, key=lambda c: c.rank),
            guild_id=request.guild_id,
            voice_channel_id=request.voice_channel_id,
            text_channel_id=request.text_channel_id,
            session_generation=request.session_generation,
            voice_session_id=request.voice_session_id,
            proposed_by=request.speaker_id or 0,
            expires_at=now + self._settings.expiry_s,
        )
        record, created = await self._jobs.call(self._store.create, new)
        if not created:
            return repeat_outcome(record)
        self._jobs.changed(record, previous=None, actor=str(request.speaker_id), reason=request.source)
        buttons = offered(self._settings, record)
        await self._jobs.call(
            self._store.audit,
            "proposed",
            actor=str(request.speaker_id),
            action_id=record.id,
            detail={
                "source": request.source,
                "call_id": request.call_id[:100],
                "offered": list(buttons),
            },
        )
        view = proposal_view(self._settings, record, request, buttons)
        try:
            message_id = await self._channel.post_proposal(view)
        except DeliveryFailed as exc:
            try:
                failed = await self._jobs.apply(
                    record, JobEvent.DELIVER_FAIL, SYSTEM, exc.message, error_code=exc.code
                )
            except StaleTransition:  # cancelled while it was being posted: that stands
                failed = await self._jobs.call(self._store.require, record.id)
            return Outcome(ok=False, message="the proposal could not be posted", action=failed, code=exc.code)
        try:
            delivered = await self._jobs.apply(
                record, JobEvent.DELIVER, SYSTEM, "posted and pinned", proposal_message_id=message_id
            )
        except StaleTransition:
            # Cancelled while it was being posted: the message stays, without its buttons.
            current = await self._jobs.call(self._store.require, record.id)
            await self._decisions.close_message(
                record.text_channel_id, message_id, f"Already {current.status}."
            )
            return repeat_outcome(current)
        return Outcome(
            ok=True, message="awaiting the operator's confirmation", action=delivered, created=True
        )

    async def _refuse_request(self, request: ActionRequest) -> Outcome | None:
        code = None
        if request.speaker_id is None:
            code, why = ErrorCode.ACTION_UNATTRIBUTED, "no single attributed speaker"
        elif request.speaker_id != self._settings.operator_user_id:
            # Ambient / non-operator speech is audit data, never an instruction.
            code, why = ErrorCode.ACTION_NOT_OPERATOR, "only the operator can request actions"
        elif self._decisions.stale(request.guild_id, request.session_generation, request.voice_session_id):
            code, why = ErrorCode.ACTION_STALE_SESSION, "the voice session that heard it has ended"
        elif not request.goal.strip():
            code, why = ErrorCode.ACTION_EMPTY_GOAL, "the goal is empty"
        elif self._settings.refusal is not None:
            code, why = ErrorCode.ACTION_CONTAINMENT_UNAVAILABLE, self._settings.refusal
        if code is None:
            return None
        self._bus.publish(
            ActionRequestRefused(
                at=self._clock.monotonic(),
                code=code,
                speaker_id=None if request.speaker_id is None else str(request.speaker_id),
                source=request.source,
                goal=request.goal,
            )
        )
        await self._jobs.call(
            self._store.audit,
            "request_refused",
            actor="unattributed" if request.speaker_id is None else str(request.speaker_id),
            detail={"code": code, "source": request.source, "goal": request.goal[:500]},
        )
        return Outcome(ok=False, message=why, code=code)

    # --- confirmation -----------------------------------------------------------------------------

    async def click(self, *, decision: str, action_id: str, user_id: int, message_id: int | None) -> Outcome:
        """A Confirm / Reject button click in the control channel (judged by :class:`Decisions`)."""
        return await self._decisions.click(
            decision=decision, action_id=action_id, user_id=user_id, message_id=message_id
        )

    # --- queries and cancel -----------------------------------------------------------------------

    async def get(self, action_id: str) -> ActionRecord | None:
        return await self._jobs.call(self._store.get, action_id)

    async def recent(self, guild_id: int, limit: int = 10) -> list[ActionRecord]:
        return await self._jobs.call(self._store.recent, guild_id=guild_id, limit=limit)

    async def cancel(self, action_id: str, *, user_id: int | None) -> Outcome:
        """Cancel an action: by the operator or whoever proposed it (a voice cancel is attributed too).

        A cancel never loses a race: the executor is asked first (it holds an action from the moment
        of its confirmation, so one it launched ends ``cancelled`` before the spawn, or goes through
        the ACP cancel path); an action nobody runs here is cancelled by compare-and-set, and a
        conflict is answered by reading the action again and deciding anew, never "try again". The
        job graph has no cycles, so this ends after at most one retry per remaining transition.
        """
        record = await self._jobs.call(self._store.get, action_id)
        if record is None:
            return Outcome(ok=False, message="no such action", code=ErrorCode.ACTION_UNKNOWN)
        if user_id is None or user_id not in (self._settings.operator_user_id, record.proposed_by):
            return await self._decisions.refuse(
                action_id,
                user_id or 0,
                ErrorCode.ACTION_NOT_OPERATOR,
                "only the operator or the proposer can cancel",
            )
        for _ in range(_CANCEL_ATTEMPTS):
            if record.status.terminal:
                return Outcome(
                    ok=False,
                    message=f"it already {record.status}",
                    code=ErrorCode.ACTION_ALREADY_DECIDED,
                    action=record,
                )
            reply = self._on_cancel(action_id)
            if reply is CancelReply.ACCEPTED:
                return Outcome(ok=True, message=f"Cancelling `{action_id}`.", action=record)
            if reply is CancelReply.FINISHING:
                return Outcome(
                    ok=False,
                    message="the agent had already finished; its result follows",
                    code=ErrorCode.ACTION_FINISHING,
                    action=record,
                )
            if record.status is JobStatus.RUNNING:
                current = await self._jobs.call(self._store.require, action_id)
                if current.version == record.version:
                    if self._on_remote_cancel is not None:
                        if await self._on_remote_cancel(current, user_id):
                            return Outcome(
                                ok=True, message=f"Cancelling `{action_id}` on its worker.", action=current
                            )
                        record = await self._jobs.call(self._store.require, action_id)
                        continue  # no longer running (it settled meanwhile): decide again
                    return Outcome(
                        ok=False,
                        message="it is running in another worker",
                        code=ErrorCode.ACTION_NOT_HERE,
                        action=record,
                    )
                record = current  # it moved on meanwhile (finished, or settled here): decide again
                continue
            try:
                cancelled = await self._jobs.apply(
                    record, JobEvent.CANCEL, str(user_id), "cancelled before it ran"
                )
            except StaleTransition:
                # Confirmed, started or decided meanwhile: read what it is now and decide again.
                record = await self._jobs.call(self._store.require, action_id)
                continue
            await self._decisions.close(cancelled, f"Cancelled by <@{user_id}>.")
            return Outcome(ok=True, message=f"Cancelled `{action_id}`.", action=cancelled)
        raise ActionError(
            f"action {action_id} kept changing while it was cancelled", code=ErrorCode.ACTION_CANCEL_RACE
        )

    async def reconcile(self, action_id: str, *, user_id: int) -> Outcome:
        """The operator has checked a quarantined workspace: free it for new actions (audited). The
        action's own outcome stays what it was (``outcome_unknown`` is history, not a state to fix)."""
        if user_id != self._settings.operator_user_id:
            return await self._decisions.refuse(
                action_id,
                user_id,
                ErrorCode.ACTION_NOT_OPERATOR,
                "only the operator can reconcile a workspace",
            )
        record = await self._jobs.call(self._store.get, action_id)
        if record is None or record.workspace_id is None:
            return Outcome(ok=False, message="no workspace for that action", code=ErrorCode.ACTION_UNKNOWN)
        freed = await self._jobs.call(
            self._store.reconcile_workspace, record.workspace_id, actor=str(user_id)
        )
        if not freed:
            return Outcome(
                ok=False, message="its workspace is not quarantined", code=ErrorCode.ACTION_NOT_QUARANTINED
            )
        self._on_reconcile(action_id)
        return Outcome(
            ok=True, message=f"Workspace of `{action_id}` reconciled and free again.", action=record
        )
