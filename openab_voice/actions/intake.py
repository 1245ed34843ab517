"""The task phrase path: a final transcript starting with "start a task" proposes an action.

It works with any chat model, or with the dialogue off. The speaker is the transcript's speaker, which
the receiver attributed from the SSRC, exactly as for the semantic tools; the goal is the rest of
the utterance. The conversation manager is told (``claims``) to leave such finals alone, so the
same words never also become a dialogue turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.phrases import task_goal
from openab_voice.actions.requests import ActionRequest, Outcome
from openab_voice.actions.speech import ActionStatusView, while_status
from openab_voice.actions.tools import SessionFacts
from openab_voice.bus import EventBus, Subscription
from openab_voice.engine.events import TranscriptFinal
from openab_voice.engine.expiry import SpeechCause
from openab_voice.jobs import EffectCeiling

log = logging.getLogger(__name__)

ACK_PROPOSED = "The task is in the text channel, waiting for confirmation."  # short: it is spoken
ACK_REFUSED = {
    "ACTION_NOT_OPERATOR": "Only the operator can ask me for tasks.",
    "ACTION_DELIVERY_FAILED": "I could not post the task to the text channel, so it will not run.",
}


class Say(Protocol):
    """Speaks a short line after what is playing; ``cause`` says until when it is still true."""

    async def __call__(self, text: str, *, cause: SpeechCause | None = None) -> None: ...


class TaskPhraseIntake:
    """Watches one voice session's final transcripts for the task phrase.

    Args:
        broker: where proposals go.
        bus: the transcripts' source.
        facts: the session's trusted facts.
        session_id: only this session's transcripts count.
        wake_name: returns the current wake name (it may be said before the phrase).
        say: speaks a short acknowledgment (no-op when the bot cannot speak). The proposal's
            acknowledgment carries a cause: it is dropped, not said late, once the operator has
            decided (or the action otherwise moved on) before its turn came.
    """

    def __init__(
        self,
        *,
        broker: ActionBroker,
        bus: EventBus,
        facts: SessionFacts,
        session_id: str,
        wake_name: Callable[[], str | None],
        say: Say,
    ) -> None:
        self._broker = broker
        self._facts = facts
        self._session_id = session_id
        self._wake_name = wake_name
        self._say = say
        self._tasks: set[asyncio.Task[None]] = set()
        self._statuses = ActionStatusView(bus)
        self._sub: Subscription = bus.subscribe(TranscriptFinal, self._on_final)

    def claims(self, text: str) -> bool:
        """Whether ``text`` is a task request (the conversation then leaves it alone)."""
        return task_goal(text, wake_name=self._wake_name()) is not None

    def _on_final(self, event: TranscriptFinal) -> None:
        if event.session_id not in (None, self._session_id):
            return
        goal = task_goal(event.text, wake_name=self._wake_name())
        if goal is None:
            return
        request = ActionRequest(
            goal=goal,
            effect_hint=EffectCeiling.WORKSPACE_WRITE,
            call_id=event.utterance_id,
            source="phrase",
            guild_id=self._facts.guild_id,
            voice_channel_id=self._facts.voice_channel_id,
            text_channel_id=self._facts.text_channel_id,
            session_generation=self._facts.generation,
            voice_session_id=self._facts.session_id,
            speaker_id=int(event.speaker_id) if event.speaker_id.isdigit() else None,
        )
        task = asyncio.create_task(self._propose(request), name=f"task-phrase-{event.utterance_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propose(self, request: ActionRequest) -> None:
        try:
            outcome: Outcome = await self._broker.propose(request)
        except Exception:  # the store or Discord failed: logged; the request is not silently retried
            log.exception("task phrase proposal failed")
            return
        if outcome.ok and outcome.created and outcome.action is not None:
            # A repeated utterance (same id) is not acknowledged twice.
            record = outcome.action
            cause = while_status(self._statuses, record.id, now=record.status)
            await self._say(ACK_PROPOSED, cause=cause)
        elif outcome.code in ACK_REFUSED:
            await self._say(ACK_REFUSED[outcome.code])

    async def aclose(self) -> None:
        self._sub.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._statuses.close()
