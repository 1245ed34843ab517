"""Decision inputs and evaluations of a loopback Live session (``decision.*``).

``decision.item.create`` / ``delete`` store and remove Decision inputs (``decision.item.created``
with the stored item and its id, ``decision.item.deleted``) on any session: they neither evaluate
nor change the voice's context. ``decision.create`` and a delegation to ``decisions`` evaluate the
configured questions; the loopback cannot judge, so every question gets a ``refusal`` answer
(named after the question) in an otherwise well-formed ``decision.event``. Triggers are stored and
echoed in the session, never fired. Refused (codes assumed where the SDK is silent): deleting an
unknown item (``invalid_value``), ``decision.create`` without Decisions delegation
(``decisions_delegation_required``) or with an ``event_id`` used before (``duplicate_event_id``:
"Reusing an event_id is rejected for the lifetime of the session").
"""

from __future__ import annotations

from typing import Any

from openai.types import Decision
from openai.types.decision import (
    AnswerAnswerResourceRefusal,
    Usage,
    UsageInputTokensDetails,
    UsageOutputTokensDetails,
)
from openai.types.live import (
    DecisionCreateEvent,
    DecisionEvent,
    DecisionItemCreatedEvent,
    DecisionItemCreateEvent,
    DecisionItemDeletedEvent,
    DecisionItemDeleteEvent,
    SessionResource,
)
from openai.types.live.decision_event import Event

from openab_voice.testing.live.wire import Refusal, echo, new_id

__all__ = ["DecisionDesk"]


class DecisionDesk:
    """Decision inputs (by id) and the evaluations sent."""

    def __init__(self) -> None:
        self.items: dict[str, DecisionItemCreatedEvent] = {}
        self.evaluations: list[DecisionEvent] = []
        self._create_ids: set[str] = set()

    def create_item(self, event: DecisionItemCreateEvent) -> DecisionItemCreatedEvent:
        stored: dict[str, Any] = event.item.model_dump(mode="json", exclude_none=True)
        stored.setdefault("id", new_id("item"))
        created = DecisionItemCreatedEvent.model_validate(
            {
                "type": "decision.item.created",
                "event_id": new_id("event"),
                "item": stored,
                **echo(event.event_id),
            }
        )
        self.items[stored["id"]] = created
        return created

    def delete_item(self, event: DecisionItemDeleteEvent) -> DecisionItemDeletedEvent | Refusal:
        if self.items.pop(event.item_id, None) is None:
            message = f"Decision item with id '{event.item_id}' not found."
            return Refusal(code="invalid_value", message=message, param="item_id")
        return DecisionItemDeletedEvent(
            type="decision.item.deleted",
            event_id=new_id("event"),
            item_id=event.item_id,
            **echo(event.event_id),
        )

    def create(self, event: DecisionCreateEvent, resource: SessionResource) -> DecisionEvent | Refusal:
        """A ``decision.create``: evaluate now."""
        if event.event_id in self._create_ids:
            message = f"The event_id '{event.event_id}' was already used for a decision.create."
            return Refusal(code="duplicate_event_id", message=message, param="event_id")
        self._create_ids.add(event.event_id)
        return self.evaluate(resource, delegation_id=None)

    def evaluate(self, resource: SessionResource, *, delegation_id: str | None) -> DecisionEvent | Refusal:
        """A ``decision.event`` answering every configured question with a refusal."""
        delegation = resource.delegation
        if delegation is None or delegation.type != "decisions":
            return Refusal(
                code="decisions_delegation_required",
                message="decision.create requires Decisions delegation.",
                param="type",
            )
        answers: list[Any] = [
            AnswerAnswerResourceRefusal(type="refusal", name=question.name)
            for question in delegation.decisions.questions
        ]
        usage = Usage(
            input_tokens=0,
            input_tokens_details=UsageInputTokensDetails(cache_write_tokens=0, cached_tokens=0),
            output_tokens=0,
            output_tokens_details=UsageOutputTokensDetails(reasoning_tokens=0),
            total_tokens=0,
        )
        decision = Decision(answers=answers, model=delegation.decisions.model, usage=usage)
        event = DecisionEvent(
            type="decision.event",
            event_id=new_id("event"),
            event=Event(type="decision.completed", decision=decision),
            delegation_id=delegation_id,
        )
        self.evaluations.append(event)
        return event
