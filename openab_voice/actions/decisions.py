"""Deciding a proposal: the operator's click, judged and written before its message changes, or the clock.

Only the configured operator's click confirms; anyone else is refused and audited. The plain Confirm
grants at most ``workspace_write``; ``workspace_exec`` and ``external`` each need their own button,
and a click on a button the proposal did not offer is refused. Clicks on expired proposals, on those
of a voice session that has ended, and replayed clicks are refused. Expiry is the clock's decision,
and every decision closes the proposal message (its buttons removed, the decision said).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from openab_voice.actions.events import ConfirmationRefused
from openab_voice.actions.offers import not_offered, offered
from openab_voice.actions.ports import CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL, ControlChannel, VoiceSide
from openab_voice.actions.requests import BrokerSettings, Outcome, granted_ceiling
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.errors import ActionError, DeliveryFailed, ErrorCode, StaleTransition
from openab_voice.jobs import AWAITING_CONFIRMATION, JobEvent, JobStatus
from openab_voice.store.records import ActionRecord

log = logging.getLogger(__name__)

SYSTEM = "system"


class Decisions:
    """Confirm / Reject clicks, expiry, audited refusals and the proposal message they close.

    Args:
        jobs: The broker's job writer.
        channel: The control text channel (the proposal messages).
        voice: Voice-session generations (a decision is only honoured in the session that heard it).
        settings: Operator and policy.
        bus: Refusal events.
        clock: Expiry and timestamps.
        on_confirmed: Called with each confirmed action (the executor starts it).
    """

    def __init__(
        self,
        *,
        jobs: JobWriter,
        channel: ControlChannel,
        voice: VoiceSide,
        settings: BrokerSettings,
        bus: EventBus,
        clock: Clock,
        on_confirmed: Callable[[ActionRecord, float], None],
    ) -> None:
        self._jobs = jobs
        self._store = jobs.store
        self._channel = channel
        self._voice = voice
        self._settings = settings
        self._bus = bus
        self._clock = clock
        self._on_confirmed = on_confirmed

    async def click(self, *, decision: str, action_id: str, user_id: int, message_id: int | None) -> Outcome:
        """A Confirm / Reject button click in the control channel."""
        record = await self._jobs.call(self._store.get, action_id)
        if record is None:
            return await self.refuse(action_id, user_id, ErrorCode.ACTION_UNKNOWN, "no such action")
        if user_id != self._settings.operator_user_id:
            return await self.refuse(
                action_id,
                user_id,
                ErrorCode.ACTION_NOT_OPERATOR,
                "only the operator can confirm or reject actions",
            )
        if message_id is not None and record.proposal_message_id not in (None, message_id):
            return await self.refuse(
                action_id, user_id, ErrorCode.ACTION_WRONG_MESSAGE, "not this action's proposal"
            )
        if record.status is JobStatus.PROPOSED:
            # Clicked between the post and the pin: delivery (posted AND pinned) is not settled yet,
            # and a proposal whose pin fails is withdrawn, so nothing may be decided on it now.
            return await self.refuse(
                action_id,
                user_id,
                ErrorCode.ACTION_NOT_DELIVERED,
                "the proposal is still being posted; click again",
            )
        if record.status not in AWAITING_CONFIRMATION:
            return await self.refuse(
                action_id,
                user_id,
                ErrorCode.ACTION_ALREADY_DECIDED,
                f"this action is already {record.status}",
            )
        if self._clock.wall() >= record.expires_at:
            await self.expire(record, "confirmation arrived after expiry")
            return await self.refuse(
                action_id, user_id, ErrorCode.ACTION_EXPIRED, "this proposal has expired"
            )
        if self.stale(record.guild_id, record.session_generation, record.voice_session_id):
            await self.expire(record, "the voice session that proposed it has ended")
            return await self.refuse(
                action_id,
                user_id,
                ErrorCode.ACTION_STALE_SESSION,
                "the voice session that proposed it has ended",
            )
        if decision not in offered(self._settings, record):
            # The ceiling is what the proposal offered: a click on any other button (crafted, or on
            # a message that no longer matches its proposal) grants nothing.
            code, why = not_offered(self._settings, decision)
            return await self.refuse(action_id, user_id, code, why, decision=decision)
        if decision in (CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL):
            return await self._confirm(record, user_id, decision)
        return await self._reject(record, user_id)

    async def _confirm(self, record: ActionRecord, user_id: int, decision: str) -> Outcome:
        clicked_at = self._clock.monotonic()
        if decision == CONFIRM_EXEC:
            # Only the operator's own button grants commands, and only inside an active sandbox.
            refusal = self._settings.exec_refusal()
            if refusal is not None:
                return await self.refuse(record.id, user_id, ErrorCode.ACTION_EXEC_UNAVAILABLE, refusal)
        ceiling = granted_ceiling(decision, record.effect_hint)
        try:
            confirmed = await self._jobs.apply(
                record,
                JobEvent.CONFIRM,
                str(user_id),
                "operator confirmed",
                confirmed_by=user_id,
                effect_ceiling=ceiling.value,
            )
        except StaleTransition:
            return await self.refuse(
                record.id, user_id, ErrorCode.ACTION_ALREADY_DECIDED, "decided concurrently"
            )
        # Launched before the message edit awaits: from the stored confirmation on, the executor holds
        # the action, so a cancel arriving during the edit reaches it.
        self._on_confirmed(confirmed, clicked_at)
        await self.close(confirmed, f"Confirmed by <@{user_id}> (ceiling {ceiling.value}); running.")
        return Outcome(ok=True, message=f"Confirmed `{record.id}`.", action=confirmed)

    async def _reject(self, record: ActionRecord, user_id: int) -> Outcome:
        try:
            rejected = await self._jobs.apply(record, JobEvent.REJECT, str(user_id), "operator rejected")
        except StaleTransition:
            return await self.refuse(
                record.id, user_id, ErrorCode.ACTION_ALREADY_DECIDED, "decided concurrently"
            )
        await self.close(rejected, f"Rejected by <@{user_id}>.")
        return Outcome(ok=True, message=f"Rejected `{record.id}`.", action=rejected)

    async def refuse(
        self, action_id: str, user_id: int, code: str, why: str, *, decision: str | None = None
    ) -> Outcome:
        """Refuse a click (or a cancel, a reconcile) by ``user_id``: published, audited, answered."""
        self._bus.publish(
            ConfirmationRefused(
                at=self._clock.monotonic(), action_id=action_id, user_id=str(user_id), code=code
            )
        )
        detail = {"code": code, "reason": why} | ({} if decision is None else {"decision": decision})
        await self._jobs.call(
            self._store.audit,
            "confirmation_refused",
            actor=str(user_id),
            action_id=action_id if await self._jobs.call(self._store.get, action_id) else None,
            detail=detail,
        )
        return Outcome(ok=False, message=f"Refused: {why}.", code=code)

    def stale(self, guild_id: int, generation: int, voice_session_id: str | None) -> bool:
        """Whether the voice session that heard it is gone. The generation alone is not enough: it
        starts again at 1 after a restart, so a proposal from before it would pass; the random
        session id does not repeat."""
        if self._voice.generation(guild_id) != generation:
            return True
        return voice_session_id is not None and self._voice.session_id(guild_id) != voice_session_id

    async def expire(self, record: ActionRecord, reason: str) -> ActionRecord | None:
        """Expire ``record`` and close its message; None when it was decided meanwhile."""
        try:
            expired = await self._jobs.apply(record, JobEvent.EXPIRE, SYSTEM, reason)
        except (StaleTransition, ActionError):
            return None  # decided meanwhile
        await self.close(expired, f"Expired: {reason}.")
        return expired

    async def close(self, record: ActionRecord, note: str) -> None:
        """Remove the buttons of ``record``'s proposal message (if it was posted), saying ``note``."""
        if record.proposal_message_id is not None:
            await self.close_message(record.text_channel_id, record.proposal_message_id, note)

    async def close_message(self, channel_id: int, message_id: int, note: str) -> None:
        """Remove a proposal message's buttons, saying ``note``; a failure is only logged."""
        try:
            await self._channel.close_proposal(channel_id=channel_id, message_id=message_id, note=note)
        except DeliveryFailed:
            log.warning("could not update proposal message %s", message_id)
