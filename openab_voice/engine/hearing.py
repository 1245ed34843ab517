"""What a conversation does with what it heard: turns taken or ignored, early names, barge-ins.

A final the turn policy (:class:`~openab_voice.engine.turns.TurnPolicy`) accepts becomes a user
turn (``TurnAccepted``), answered through the effect dispatcher; one it does not is published as
``TurnIgnored`` (kept as a channel note when it may matter later) and may show that an interruption
was false. A final an intake took is no turn, but a real interruption. Partials feed the early-name
tracking (:class:`~openab_voice.engine.turns.EarlyNames`: the wake name the stable partials agreed
on, put back where the whole utterance's decode misheard it) and the interruption controller. A
speculative final (preemptive generation) prepares the answer the final would get, held until it
comes. A human starting to speak while a response runs is a barge-in (``InterruptionDetected``); a
backchannel said over the bot ("yeah", "mm-hmm") is no turn (``TurnIgnored(reason="backchannel")``)
and what it cut resumes (docs/adr/0019-backchannels.md).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.answers import answer_to
from openab_voice.engine.context import ChannelNote, ShortTermContext
from openab_voice.engine.dispatcher import EffectDispatcher
from openab_voice.engine.duplex import DuplexVoiceEngine
from openab_voice.engine.events import InterruptionDetected, TurnAccepted, TurnIgnored
from openab_voice.engine.expiry import AnnouncementQueue
from openab_voice.engine.interruption import InterruptionController
from openab_voice.engine.settings import DialogueMode, DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.engine.turns import EarlyNames, Roster, TurnPolicy
from openab_voice.stt.events import (
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptSpeculative,
)

__all__ = ["Hearing"]

log = logging.getLogger(__name__)
_Decoded = TypeVar("_Decoded", TranscriptFinal, TranscriptSpeculative)


class Hearing:
    """Turns and barge-ins from one conversation's transcripts and speech starts.

    Args:
        bus: where turn and interruption events go.
        clock: the injected clock.
        session_id: stamped on every event published.
        roster: who is in the channel.
        settings: dialogue settings (wake name, mode, preemptive generation).
        context: the short-term context (notes of what was said to others).
        controller: the interruption controller.
        responses: the voice engine (answers prepared ahead, and dropped).
        announcements: the queued status lines (nothing is prepared ahead while one waits).
        dialogue: the effect dispatcher that answers a turn.
        cancel_window: stops the false-interruption window (a turn was taken).
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        session_id: str | None,
        roster: Roster,
        settings: DialogueSettings,
        context: ShortTermContext,
        controller: InterruptionController,
        responses: DuplexVoiceEngine,
        announcements: AnnouncementQueue,
        dialogue: EffectDispatcher,
        cancel_window: Callable[[], None],
    ) -> None:
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._roster = roster
        self._settings = settings
        self._context = context
        self._controller = controller
        self._responses = responses
        self._announcements = announcements
        self._dialogue = dialogue
        self._cancel_window = cancel_window
        self._policy = TurnPolicy(
            roster=roster, wake_name=settings.wake_name, bot_user_id=settings.bot_user_id
        )
        self._early_names = EarlyNames()
        self._turn_ids = itertools.count(1)

    @property
    def wake_name(self) -> str:
        """The name that addresses the bot now."""
        return self._policy.wake_name

    async def final(self, event: TranscriptFinal) -> None:
        await self._on_final(self._as_heard(event))
        self._responses.drop_prepared(event.utterance_id)  # its final did not take it

    def claimed(self, final: TranscriptFinal) -> None:
        """A request for an intake: not a dialogue turn, and not a false interruption."""
        self._early_names.forget(final.utterance_id)
        self._ignored(final, "action_request")
        self._controller.on_final(final.speaker_id, accepted=True)
        self._responses.drop_prepared(final.utterance_id)

    def speculative(self, event: TranscriptSpeculative) -> None:
        self._on_speculative(self._as_heard(event))

    async def partial(self, event: TranscriptPartial) -> None:
        self._early_names.note(event.utterance_id, event.text, self._policy.wake_name, stable=event.stable)
        # A stable backchannel whose speech already ended resumes what it cut, before its final.
        await self._dialogue.resume(self._controller.on_partial(event, wake_name=self._policy.wake_name))

    async def discarded(self, event: TranscriptDiscarded) -> None:
        self._early_names.forget(event.utterance_id)
        self._responses.drop_prepared(event.utterance_id)
        await self._dialogue.resume(self._controller.on_discarded(event.speaker_id))

    async def speech_started(self, event: SpeechStarted) -> None:
        if event.speaker_id not in self._roster.humans():
            return  # another bot talking (a music bot) never interrupts
        snap = self._dialogue.snapshot
        barge_in = self._controller.on_speech_started(snap.state, event)
        if barge_in is None:
            return
        self._bus.publish(
            InterruptionDetected(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                turn_id=snap.turn_id,
                state=snap.state.value,
                confidence=event.confidence,
            )
        )
        await self._dialogue.dispatch(barge_in)

    async def _on_final(self, event: TranscriptFinal) -> None:
        decision = self._policy.decide(speaker_id=event.speaker_id, text=event.text)
        name = self._roster.display_name(event.speaker_id)
        if not decision.accepted:
            if decision.context:
                note = ChannelNote(
                    speaker_id=event.speaker_id, speaker_name=name, text=event.text, at=event.at
                )
                self._context.add_note(note)
            self._ignored(event, decision.reason)
            await self._dialogue.resume(self._controller.on_final(event.speaker_id, accepted=False))
            return
        if self._half_duplex_ignores(event.audio_start, event.audio_end):
            self._ignored(event, "bot_speaking")  # half duplex: capture is ignored while the bot speaks
            return
        if self._dialogue.snapshot.state is DialogueState.RECOVERING:
            self._ignored(event, "recovering")  # the engine's provider session is being re-established
            return
        if await self._backchannel(event):
            return
        turn_id = f"turn-{next(self._turn_ids)}"
        self._bus.publish(
            TurnAccepted(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                turn_id=turn_id,
                text=event.text,
            )
        )
        self._controller.on_final(event.speaker_id, accepted=True)
        self._cancel_window()
        prepared = answer_to(
            self._roster,
            wake_name=self._policy.wake_name,
            turn_id=turn_id,
            speaker_id=event.speaker_id,
            text=event.text,
            at=event.at,
            eou_at=event.audio_end,
            audio_start=event.audio_start,
        )
        await self._dialogue.answer(turn_id, prepared)

    async def _backchannel(self, event: TranscriptFinal) -> bool:
        """A backchannel said over the bot ("yeah", "mm-hmm"): no turn, and what it cut resumes."""
        state = self._dialogue.snapshot.state
        taken = self._controller.take_backchannel(state, event, wake_name=self._policy.wake_name)
        if taken is None:
            return False
        self._ignored(event, "backchannel")
        await self._dialogue.resume(taken.plan)
        return True

    def _as_heard(self, event: _Decoded) -> _Decoded:
        """``event`` with the wake name its stable partials agreed on, where the decode of the whole
        utterance misheard it (tiny.en: "Jervous, tell me ..." after "Jarvis, tell me" twice, or after
        a stable "Jarvis" and a partial "Jarvis, tell me" that went on from it)."""
        text = self._early_names.heard(
            event.utterance_id,
            event.text,
            self._policy.wake_name,
            final=isinstance(event, TranscriptFinal),
        )
        if text == event.text:
            return event
        log.info("%s: the final misheard the wake name its stable partials agreed on", event.utterance_id)
        return replace(event, text=text)

    def _half_duplex_ignores(self, start: float, end: float) -> bool:
        return self._settings.mode is DialogueMode.TURN_BASED and self._dialogue.bot_spoke_during(start, end)

    def _on_speculative(self, event: TranscriptSpeculative) -> None:
        """Preemptive generation: if this would be a turn now, prepare its answer, held until the final.

        Only while listening with nothing queued to say (otherwise the final's turn would not start
        at once anyway); the desk never passes on one an intake would claim.
        """
        if (
            not self._settings.preemptive_generation
            or self._dialogue.snapshot.state is not DialogueState.LISTENING
            or self._announcements
            or not self._policy.decide(speaker_id=event.speaker_id, text=event.text).accepted
            or self._half_duplex_ignores(event.audio_start, event.audio_end)
            or self._controller.is_backchannel(
                self._dialogue.snapshot.state,
                speaker_id=event.speaker_id,
                text=event.text,
                duration_s=event.audio_end - event.audio_start,
                wake_name=self._policy.wake_name,
            )
        ):
            return
        # The same answer as the final's would get (see engine/answers.py), held until it comes.
        ahead = answer_to(
            self._roster,
            wake_name=self._policy.wake_name,
            turn_id=f"ahead-{event.utterance_id}",
            speaker_id=event.speaker_id,
            text=event.text,
            at=event.at,
            eou_at=None,
        )
        self._responses.prepare(event.utterance_id, ahead)

    def _ignored(self, event: TranscriptFinal, reason: str) -> None:
        self._bus.publish(
            TurnIgnored(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                text=event.text,
                reason=reason,
            )
        )
