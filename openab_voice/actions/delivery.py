"""Delivering an action's result: the full text first, its delivery outcome stored, then the status spoken.

The voice says only the status (never the agent's text) unless every listener is trusted and nobody
else comes to listen while it speaks (:mod:`openab_voice.actions.audience`), and says nothing at
all about a result that could not be posted: nobody could read what it refers to.
"""

from __future__ import annotations

from openab_voice.acp.types import DeliveryOutcome, ExecutionOutcome, TurnCompletion
from openab_voice.actions.audience import AudienceGuard
from openab_voice.actions.events import ActionResultPosted
from openab_voice.actions.ports import ControlChannel, VoiceSide
from openab_voice.actions.results import refusals, result_text, spoken_status
from openab_voice.actions.speech import language_of
from openab_voice.actions.writer import JobWriter
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.errors import DeliveryFailed
from openab_voice.store.records import ActionRecord


class ResultDelivery:
    """Posts results to the control channel and speaks their status.

    Args:
        jobs: the store writer (the delivery outcome is recorded beside the execution outcome).
        channel: the control text channel.
        voice: who listens, and the status voice.
        bus: ``ActionResultPosted``.
        clock: event times.
        trusted: listeners before whom the voice may read the start of the result aloud, while they
            can view the control channel and nobody else listens (:mod:`openab_voice.actions.audience`).
    """

    def __init__(
        self,
        jobs: JobWriter,
        *,
        channel: ControlChannel,
        voice: VoiceSide,
        bus: EventBus,
        clock: Clock,
        trusted: frozenset[int],
    ) -> None:
        self._jobs = jobs
        self._channel = channel
        self._voice = voice
        self._bus = bus
        self._clock = clock
        self._audience = AudienceGuard(voice=voice, bus=bus, trusted=trusted)

    async def deliver(self, record: ActionRecord, completion: TurnCompletion) -> None:
        """Post ``completion`` as ``record``'s result, store the delivery outcome, then speak the status."""
        refused = refusals(completion.permission_decisions, record.effect_ceiling or record.effect_hint)
        text = result_text(
            action_id=record.id,
            goal=record.goal,
            execution=completion.execution.value,
            output=completion.output,
            detail=completion.detail if completion.execution is not ExecutionOutcome.SUCCEEDED else "",
            refused=refused,
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
            self._jobs.store.update,
            record.id,
            expected_version=record.version,
            delivery_outcome=delivery.value,
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
        execution, output = completion.execution.value, completion.output
        language = language_of(record.goal)  # announced in the language the task was asked in
        status = spoken_status(
            execution=execution, output=output, all_trusted=False, refused=refused, language=language
        )
        detailed = spoken_status(
            execution=execution, output=output, all_trusted=True, refused=refused, language=language
        )
        # The detailed line only before a cleared audience, withdrawn (and the status line said
        # instead) when someone else comes to listen while it is spoken.
        await self._audience.speak(
            guild_id=record.guild_id,
            control_channel_id=record.text_channel_id,
            action_id=record.id,
            detailed=detailed,
            status=status,
        )
