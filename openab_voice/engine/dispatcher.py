"""The conversation's one effect dispatcher, and the responses it is asked to start.

Every decision of a conversation goes through the pure state machine
(:mod:`openab_voice.engine.state`); :class:`EffectDispatcher` runs it and is the one place its
effects apply, the response ones through the voice engine
(:class:`~openab_voice.engine.duplex.DuplexVoiceEngine`): start a response, interrupt it (false-
interruption recovery armed after a barge-in), commit a finished one, or discard a failed one and
recover to listening. It publishes ``DialogueStateChanged`` on every change of state, and an
``ErrorRaised`` for an input the machine refuses.

A response starts only once the machine says so (``StartResponse``), so what to start waits here,
prepared, under its response id: a user turn's answer, a resume after a false interruption, a queued
status line when the channel is quiet, and a turn answered again, without memory, after a failed
recall (``MEMORY_RECALL_FAILED``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import assert_never

from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.engine.duplex import DuplexVoiceEngine
from openab_voice.engine.events import DialogueStateChanged
from openab_voice.engine.expiry import AnnouncementQueue
from openab_voice.engine.interruption import InterruptionController, ResumePlan, resume_plan
from openab_voice.engine.state import (
    BUSY,
    CommitResponse,
    DialogueInput,
    DialogueState,
    DiscardResponse,
    Effect,
    InterruptResponse,
    Recover,
    Recovered,
    ResponseCancelled,
    ResumeRequested,
    Snapshot,
    StartResponse,
    UserTurn,
    cause_of,
    transition,
)
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.engine.turns import FloorLog
from openab_voice.errors import ErrorCode, IllegalTransition

__all__ = ["EffectDispatcher"]

log = logging.getLogger(__name__)


class EffectDispatcher:
    """Runs a conversation's state machine and applies its effects (see the module docstring).

    Args:
        bus: where state changes and refused inputs are published.
        clock: the injected clock.
        session_id: stamped on every event published.
        responses: the voice engine the response effects go to.
        controller: the interruption controller (cleared on a new turn, armed after a barge-in).
        announcements: the queued status lines (one starts whenever the bot is listening).
        arm_window: starts the false-interruption window with the controller's token.
        cancel_window: stops that window.
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        session_id: str | None,
        responses: DuplexVoiceEngine,
        controller: InterruptionController,
        announcements: AnnouncementQueue,
        arm_window: Callable[[int], None],
        cancel_window: Callable[[], None],
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._responses = responses
        self._controller = controller
        self._announcements = announcements
        self._arm_window = arm_window
        self._cancel_window = cancel_window
        self._snap = Snapshot()
        self._floor = FloorLog()
        self._prepared: dict[str, PreparedResponse] = {}
        self._running: tuple[str, PreparedResponse] | None = None  # the started response's
        self._retry: tuple[str, PreparedResponse] | None = None  # a turn to answer again (no memory)
        self._resume_ids = itertools.count(1)

    @property
    def snapshot(self) -> Snapshot:
        return self._snap

    def bot_spoke_during(self, start: float, end: float) -> bool:
        """Whether the bot held the floor (a response running) at any time in ``[start, end]``."""
        return self._floor.overlaps(start, end)

    # --- the responses it is asked to start ------------------------------------------------------

    async def answer(self, turn_id: str, prepared: PreparedResponse) -> None:
        """A user turn: answer it with ``prepared``."""
        self._prepared[turn_id] = prepared
        await self.dispatch(UserTurn(turn_id=turn_id, response_id=turn_id))

    async def answer_again(self) -> None:
        """After a failed memory recall, once listening again: the same turn, without memory."""
        if self._retry is None or self._snap.state is not DialogueState.LISTENING:
            return
        (turn_id, prepared), self._retry = self._retry, None
        response_id = f"{turn_id}-without-memory"
        self._prepared[response_id] = replace(prepared, recall=False)
        await self.dispatch(UserTurn(turn_id=turn_id, response_id=response_id))

    async def next_announcement(self) -> None:
        """Once listening: the next queued status line that still holds."""
        if not self._announcements or self._snap.state is not DialogueState.LISTENING:
            return
        item = self._announcements.pop()  # expired lines are dropped here, before anything starts
        if item is None:
            return
        rid = item.response_id
        self._prepared[rid] = PreparedResponse(user=None, replay=(item.text,), cause=item.cause, exact=True)
        await self.dispatch(ResumeRequested(turn_id=rid, response_id=rid, cause="announcement"))

    async def resume(self, plan: ResumePlan | None) -> None:
        """After a false interruption (or a backchannel): say the cut sentence (and the rest) again, if
        still listening."""
        if plan is None:
            return
        self._cancel_window()
        if self._snap.state is not DialogueState.LISTENING:
            return
        response_id = f"{plan.turn_id}-resume-{next(self._resume_ids)}"
        # A cut status line stays one: said again exactly, and only while its cause holds.
        self._prepared[response_id] = PreparedResponse(
            user=None, replay=plan.replay, cause=plan.cause, exact=plan.exact
        )
        await self.dispatch(ResumeRequested(turn_id=plan.turn_id, response_id=response_id, cause=plan.reason))

    # --- the state machine and its effects -------------------------------------------------------

    async def dispatch(self, event: DialogueInput) -> None:
        try:
            snap, effects = transition(self._snap, event)
        except IllegalTransition as exc:
            log.error("dropped %s: %s", type(event).__name__, exc)
            self.error(exc.code, exc.message, retryable=False)
            return
        previous, self._snap = self._snap, snap
        if snap.state is not previous.state:
            self._floor.update(snap.state in BUSY, self._clock.monotonic())
            self._bus.publish(
                DialogueStateChanged(
                    at=self._clock.monotonic(),
                    session_id=self._session_id,
                    previous=previous.state.value,
                    state=snap.state.value,
                    cause=cause_of(event),
                    turn_id=snap.turn_id or previous.turn_id,
                )
            )
        for effect in effects:
            follow_up = await self._apply(effect)
            if follow_up is not None:
                await self.dispatch(follow_up)

    async def _apply(self, effect: Effect) -> DialogueInput | None:
        match effect:
            case StartResponse():
                prepared = self._prepared.pop(effect.response_id)
                self._prepared.clear()  # anything else prepared was never started
                self._running = (effect.turn_id, prepared)
                if not effect.resume:
                    self._controller.clear()
                self._responses.start(effect, prepared)
                return None
            case InterruptResponse():
                handle = await self._responses.interrupt(effect)
                if handle is not None and effect.barge_in is not None:
                    plan = resume_plan(handle, self._running[1] if self._running is not None else None)
                    token = self._controller.arm(speaker_id=effect.barge_in.speaker_id, plan=plan)
                    if token is not None:
                        self._arm_window(token)
                return ResponseCancelled(response_id=effect.response_id)
            case CommitResponse():
                self._responses.commit(effect.response_id)
                return None
            case DiscardResponse():
                await self._responses.discard(effect)
                running, self._running = self._running, None
                if (
                    effect.code == ErrorCode.MEMORY_RECALL_FAILED
                    and running is not None
                    and running[1].recall
                ):
                    self._retry = running  # answered again once recovered (see answer_again)
                # An engine still reconnecting reports Recovered itself once its new session is up.
                return Recovered() if self._responses.ready else None
            case Recover():
                # Speech-to-text: the transcriber reported the error and discarded the utterance;
                # the next one decodes afresh, so listening may resume at once.
                return Recovered()
            case _:
                assert_never(effect)

    def error(self, code: str, message: str, *, retryable: bool) -> None:
        """Publish an ``ErrorRaised`` for this conversation."""
        self._bus.publish(
            ErrorRaised(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                code=code,
                message=message,
                retryable=retryable,
            )
        )
