"""Delegations of a loopback Live session: ``session.delegation.created`` and what answers it.

A delegating reply (:class:`~.responder.Delegate`, or
:class:`~openab_voice.testing.realtime.responder.CallFunction`) goes to the session's target:

* ``client`` (the default): ``session.delegation.created{delegation: {id, target: "client", type:
  "delegation"}, offset_ms}``; the client answers with appends naming that ``delegation_id``, and a
  ``session.commentary.append`` for it is said by the voice, word for word. A ``CallFunction`` on
  such a session delegates the same way (the Live model has no tools of its own; its name and
  arguments are not sent).
* ``responses``: the delegation carries the backend response's id (``response_id``) and the
  :class:`~.backend.Backend` streams it (a ``CallFunction`` is its first output).
* ``decisions``: a ``decision.event`` with the delegation's id (:class:`~.decisions.DecisionDesk`).

A ``Delegate`` with an ``acknowledgement`` has it said after the delegation's
``acknowledgement_delay_ms`` on the injected clock, unless thinking or commentary is appended first
("Any commentary or thinking appended to the session cancels all pending acknowledgements").

``delegation_id`` on an append: null is general context; otherwise it must name a client
delegation of this session (``invalid_value`` otherwise, an assumption), and with Responses
delegation a non-null id is refused, as the SDK says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from openai.types.live import DelegationCreatedEvent, SessionResource
from openai.types.live.delegation_created_event import Delegation

from openab_voice.clock import Clock
from openab_voice.tasks import TaskOwner
from openab_voice.testing.live.backend import Backend
from openab_voice.testing.live.decisions import DecisionDesk
from openab_voice.testing.live.responder import Appended, CallFunction, Delegate
from openab_voice.testing.live.session_config import DelegationTarget, delegation_target
from openab_voice.testing.live.speaking import SendEvent, SpokenSource
from openab_voice.testing.live.wire import Refusal, new_id

__all__ = ["DelegationRecord", "Delegations"]


@dataclass(slots=True, kw_only=True)
class DelegationRecord:
    """One delegation, for tests: where it went, when, and the commentary that answered it."""

    id: str
    target: DelegationTarget
    offset_ms: int
    response_id: str | None = None
    commentary: list[str] = field(default_factory=list)


class Delegations:
    """The delegations of one session.

    Args:
        send: the session's sender.
        resource: the session now.
        backend: the Responses backend.
        decisions: the Decision desk.
        say: has the voice say a line.
        clock: times acknowledgements.
        tasks: the session's task owner.
    """

    def __init__(
        self,
        *,
        send: SendEvent,
        resource: Callable[[], SessionResource],
        backend: Backend,
        decisions: DecisionDesk,
        say: Callable[[str, SpokenSource], None],
        clock: Clock,
        tasks: TaskOwner,
    ) -> None:
        self._send = send
        self._resource = resource
        self._backend = backend
        self._decisions = decisions
        self._say = say
        self._clock = clock
        self._tasks = tasks
        self._acknowledgements: set[asyncio.Task[None]] = set()
        self.records: dict[str, DelegationRecord] = {}

    async def delegate(self, reply: CallFunction | Delegate, offset_ms: int) -> None:
        """The voice delegates: announce it, then hand it to the session's target."""
        resource = self._resource()
        record = DelegationRecord(id=new_id("deleg"), target=delegation_target(resource), offset_ms=offset_ms)
        self.records[record.id] = record
        run = self._backend.open(record.id) if record.target == "responses" else None
        record.response_id = run.id if run is not None else None
        backend_response = {"response_id": run.id} if run is not None else {}  # omitted for the client
        delegation = Delegation(id=record.id, target=record.target, type="delegation", **backend_response)
        await self._send(
            DelegationCreatedEvent(
                type="session.delegation.created",
                event_id=new_id("event"),
                delegation=delegation,
                offset_ms=offset_ms,
            )
        )
        if isinstance(reply, Delegate) and reply.acknowledgement:
            self._acknowledge(reply.acknowledgement, resource)
        if run is not None:
            await self._backend.start(run, reply if isinstance(reply, CallFunction) else None)
        elif record.target == "decisions":
            evaluation = self._decisions.evaluate(resource, delegation_id=record.id)
            assert not isinstance(evaluation, Refusal)  # the target is decisions
            await self._send(evaluation)

    def check(self, delegation_id: str | None) -> Refusal | None:
        """Why an append's ``delegation_id`` is refused (None: accepted)."""
        if delegation_id is None:
            return None
        if delegation_target(self._resource()) == "responses":
            message = "delegation_id must be null with Responses delegation."
            return Refusal(code="invalid_value", message=message, param="delegation_id")
        record = self.records.get(delegation_id)
        if record is None or record.target != "client":
            message = f"No client delegation with id '{delegation_id}'."
            return Refusal(code="invalid_value", message=message, param="delegation_id")
        return None

    def appended(self, appended: Appended) -> None:
        """An accepted append: it may cancel acknowledgements, and commentary for a delegation is said."""
        if appended.kind in ("thinking", "commentary"):
            for task in self._acknowledgements:
                task.cancel()
        if appended.kind == "commentary" and appended.delegation_id is not None:
            self.records[appended.delegation_id].commentary.append(appended.content)
            self._say(appended.content, "commentary")

    def _acknowledge(self, text: str, resource: SessionResource) -> None:
        delegation = resource.delegation
        delay_ms = delegation.acknowledgement_delay_ms if delegation is not None else None
        deadline = self._clock.monotonic() + (delay_ms or 0) / 1000

        async def acknowledge() -> None:
            await self._clock.sleep(deadline - self._clock.monotonic())
            self._say(text, "acknowledgement")

        task = self._tasks.spawn(
            acknowledge(), name="live-acknowledgement", on_done=self._acknowledgements.discard
        )
        self._acknowledgements.add(task)
