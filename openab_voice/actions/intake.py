"""The task phrase path: a final transcript starting with "start a task" proposes an action.

It works with any chat model, or with the dialogue off. The speaker is the transcript's speaker, which
the receiver attributed from the SSRC, exactly as for the semantic tools; the goal is the rest of
the utterance. The session's transcript desk (:class:`~openab_voice.engine.desk.TranscriptDesk`)
offers it every final before the conversation (:meth:`TaskPhraseIntake.offer`: the phrase is parsed
once); a final it takes never reaches the conversation as a turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.phrases import task_goal
from openab_voice.actions.requests import ActionRequest, Outcome
from openab_voice.actions.speech import ActionStatusView, Language, language_of, status_line, while_status
from openab_voice.actions.tools import SessionFacts
from openab_voice.bus import EventBus
from openab_voice.engine.expiry import SpeechCause
from openab_voice.errors import ErrorCode
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.stt.events import TranscriptFinal
from openab_voice.tasks import TaskOwner

log = logging.getLogger(__name__)

ACK_PROPOSED = status_line(JobStatus.PROPOSED)
ACK_REFUSED: dict[str, str] = {
    ErrorCode.ACTION_NOT_OPERATOR: "Only the operator can ask me for tasks.",
    ErrorCode.ACTION_DELIVERY_FAILED: status_line(JobStatus.DELIVERY_FAILED),
}
ACK_REFUSED_ZH: dict[str, str] = {
    ErrorCode.ACTION_NOT_OPERATOR: "只有操作员可以让我执行任务。",
    ErrorCode.ACTION_DELIVERY_FAILED: status_line(JobStatus.DELIVERY_FAILED, "zh"),
}


class Say(Protocol):
    """Speaks a short line after what is playing; ``cause`` says until when it is still true."""

    async def __call__(self, text: str, *, cause: SpeechCause | None = None) -> None: ...


class TaskPhraseIntake:
    """Takes one voice session's final transcripts that say the task phrase.

    Args:
        broker: where proposals go.
        bus: where the proposed actions' status changes are observed (the acknowledgment's cause).
        facts: the session's trusted facts.
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
        wake_name: Callable[[], str | None],
        say: Say,
    ) -> None:
        self._broker = broker
        self._facts = facts
        self._wake_name = wake_name
        self._say = say
        self._tasks = TaskOwner("task phrase intake")  # the proposals in flight
        self._statuses = ActionStatusView(bus)

    def claims(self, text: str) -> bool:
        """Whether ``text`` is a task request (asked for speculative finals; nothing is proposed)."""
        return task_goal(text, wake_name=self._wake_name()) is not None

    def offer(self, event: TranscriptFinal) -> bool:
        """Propose the task when ``event`` says the phrase (parsed once); whether it did."""
        goal = task_goal(event.text, wake_name=self._wake_name())
        if goal is None:
            return False
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
        language = language_of(event.text)  # acknowledged in the phrase's language
        self._tasks.spawn(self._propose(request, language), name=f"task-phrase-{event.utterance_id}")
        return True

    async def _propose(self, request: ActionRequest, language: Language) -> None:
        try:
            outcome: Outcome = await self._broker.propose(request)
        except Exception:  # the store or Discord failed: logged; the request is not silently retried
            log.exception("task phrase proposal failed")
            return
        if outcome.ok and outcome.created and outcome.action is not None:
            # A repeated utterance (same id) is not acknowledged twice.
            record = outcome.action
            cause = while_status(self._statuses, record.id, now=record.status)
            await self._say(status_line(JobStatus.PROPOSED, language), cause=cause)
        elif outcome.code in ACK_REFUSED:
            await self._say((ACK_REFUSED_ZH if language == "zh" else ACK_REFUSED)[outcome.code])

    async def aclose(self) -> None:
        """Wait for the proposals in flight (the desk offers nothing more once the session closes)."""
        if self._tasks:
            await asyncio.wait(self._tasks.tasks)  # they finish: none is cancelled
        await self._tasks.aclose()
        self._statuses.close()
