"""The conversation manager for one voice channel.

It hears its session directly, never through the bus: transcripts from the session's
:class:`~openab_voice.engine.desk.TranscriptDesk` (``TranscriptFinal`` / ``TranscriptPartial`` /
``TranscriptDiscarded``, ``TranscriptSpeculative`` / ``SpeculationWithdrawn`` for preemptive
generation: an answer prepared while the end of speech is still being confirmed, said only if the
final asks the same; and, by :meth:`~ConversationManager.hear_claimed`, the finals an intake took)
and speech events (``SpeechStarted`` / ``SpeechEnded``) from the front end's speech sink, in the
callback that delivers their frames. :meth:`~ConversationManager.hear` feeds them through one inbox
to one loop task, together with the progress reports of the running response.
Every decision goes through the pure state machine (:mod:`openab_voice.engine.state`); the loop is
the one place that applies its effects (the response ones through
:class:`~openab_voice.engine.supervisor.ResponseSupervisor`): start a response, interrupt it (output
stopped first, tasks cancelled, heard sentences committed, false-interruption recovery armed after a
barge-in), commit a finished one, or discard a failed one and recover to listening.

Recoverable errors (see :mod:`openab_voice.engine.state`) all pass through ``recovering``: a failed
response is discarded first; a failed speech-to-text decode (the desk hands on the transcriber's
``ErrorRaised`` with ``stage="stt"``) needs no cleanup, its utterance already discarded; after a
failed memory recall (``MEMORY_RECALL_FAILED``) the turn is answered again, without memory.

Published: ``DialogueStateChanged`` (every transition), ``TurnAccepted`` / ``TurnIgnored``,
``InterruptionDetected``, ``BotUtteranceFinished``, ``ErrorRaised``, ``LatencyMeasured``
(``barge_in_ms`` here; ``eou_to_first_audio_ms`` and ``tts_first_chunk_ms`` from the runner),
``ToolCallHandled`` (runner) and ``SpeechDropped`` (an announcement whose cause expired: here while
queued, in the runner once started; see :mod:`openab_voice.engine.expiry`).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
from dataclasses import dataclass, replace
from typing import TypeVar, assert_never

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.engine.answers import answer_to
from openab_voice.engine.cascade import cascade_engine
from openab_voice.engine.context import ChannelNote, MemoryRecall, ShortTermContext
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineFactory
from openab_voice.engine.events import (
    DialogueStateChanged,
    InterruptionDetected,
    SpeculationWithdrawn,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptSpeculative,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.expiry import AnnouncementQueue, SpeechCause
from openab_voice.engine.handle import SpeechOutput
from openab_voice.engine.interruption import InterruptionController, ResumePlan, resume_plan
from openab_voice.engine.response import MEMORY_RECALL_FAILED, ToolPath
from openab_voice.engine.settings import DialogueMode, DialogueSettings
from openab_voice.engine.state import (
    BUSY,
    CommitResponse,
    DialogueInput,
    DialogueState,
    DiscardResponse,
    Effect,
    IllegalTransition,
    InterruptResponse,
    ProviderFailed,
    Recover,
    Recovered,
    ResponseCancelled,
    ResumeRequested,
    Snapshot,
    Start,
    StartResponse,
    Stop,
    UserTurn,
    cause_of,
    transition,
)
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.engine.turns import EarlyNames, FloorLog, Roster, TurnPolicy
from openab_voice.errors import ConfigError
from openab_voice.providers.speech import ChatModel, TextToSpeech
from openab_voice.tasks import TaskOwner

__all__ = ["ConversationManager"]

log = logging.getLogger(__name__)
_Decoded = TypeVar("_Decoded", TranscriptFinal, TranscriptSpeculative)


class _Phase(enum.Enum):
    """Where the manager is in its life (it only moves forward)."""

    NEW = "new"
    STARTING = "starting"  # the engine opens: reports and announcements queue, nothing is heard yet
    LISTENING = "listening"  # the loop runs
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class _WindowExpired:
    token: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Claimed:
    final: TranscriptFinal


@dataclass(frozen=True, slots=True, kw_only=True)
class _Announce:
    text: str
    cause: SpeechCause | None


_Heard = (
    TranscriptFinal
    | TranscriptPartial
    | TranscriptDiscarded
    | TranscriptSpeculative
    | SpeculationWithdrawn
    | SpeechStarted
    | SpeechEnded
    | ErrorRaised
)
_Item = _Heard | _Claimed | _WindowExpired | _Announce | DialogueInput


class ConversationManager:
    """Turns, context, responses and interruptions for one voice channel.

    Args:
        bus: where dialogue events go (what it hears comes by :meth:`hear`).
        clock: the injected clock (timers and latency figures).
        chat: the chat model (the cascade; unused with ``engine``).
        tts: the text-to-speech provider (48 kHz stereo s16le; the cascade).
        output: the playback path (:class:`~openab_voice.discord.playback.Playback`; the cascade).
        tools: the tool path (:class:`~openab_voice.tools.ToolRouter`; the cascade).
        roster: who is in the channel.
        settings: dialogue settings (already negotiated: see :func:`~openab_voice.engine.settings.negotiate`).
        session_id: the voice session; stamped on every event published.
        memory: long-term memory, recalled once per response to a user turn (None: none).
        engine: builds the voice engine (:mod:`~openab_voice.engine.duplex`); None: the cascade on
            ``chat``, ``tts``, ``output`` and ``tools``.

    Raises:
        ConfigError: no wake name and no bot user id to derive it from.
        TypeError: neither an engine nor the cascade's providers.
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        clock: Clock,
        chat: ChatModel | None = None,
        tts: TextToSpeech | None = None,
        output: SpeechOutput | None = None,
        tools: ToolPath | None = None,
        roster: Roster,
        settings: DialogueSettings,
        session_id: str | None = None,
        memory: MemoryRecall | None = None,
        engine: EngineFactory | None = None,
    ) -> None:
        if settings.wake_name is None and settings.bot_user_id is None:
            raise ConfigError(
                "set the wake name or the bot's user id (its display name is the default)",
                setting="wake_name",
            )
        self._bus = bus
        self._clock = clock
        self._roster = roster
        self._settings = settings
        self._session_id = session_id
        # Status lines to say (action results); each waits until the channel is quiet.
        self._announcements = AnnouncementQueue(bus=bus, clock=clock, session_id=session_id)
        self._policy = TurnPolicy(
            roster=roster, wake_name=settings.wake_name, bot_user_id=settings.bot_user_id
        )
        self._context = ShortTermContext(
            system_prompt=settings.system_prompt,
            max_turns=settings.max_context_turns,
            max_notes=settings.max_channel_notes,
        )
        self._controller = InterruptionController(
            mode=settings.mode, resume=settings.resume_after_false_interruption
        )
        if engine is None:
            if chat is None or tts is None or output is None or tools is None:
                raise TypeError("the cascade needs chat, tts, output and tools (or pass an engine)")
            engine = cascade_engine(chat=chat, tts=tts, output=output, tools=tools, memory=memory)
        binding = EngineBinding(
            bus=bus,
            clock=clock,
            settings=settings,
            context=self._context,
            report=self._report,
            session_id=session_id,
            announce=lambda text, cause: self.announce(text, cause=cause),
        )
        self._responses: DuplexVoiceEngine = engine(binding)
        self._snap = Snapshot()
        self._floor = FloorLog()
        # Unbounded on purpose: transcript and speech events arrive a few per second per speaker, and
        # a response's progress reports must never be dropped.
        self._inbox: asyncio.Queue[_Item] = asyncio.Queue()
        self._prepared: dict[str, PreparedResponse] = {}
        self._running: tuple[str, PreparedResponse] | None = None  # the started response's
        self._retry: tuple[str, PreparedResponse] | None = None  # a turn to answer again (no memory)
        self._early_names = EarlyNames()
        self._tasks = TaskOwner(f"conversation {session_id}")  # the loop and the interruption window
        self._timer: asyncio.Task[None] | None = None
        self._turn_ids = itertools.count(1)
        self._resume_ids = itertools.count(1)
        self._phase = _Phase.NEW

    # --- public --------------------------------------------------------------------------------

    @property
    def state(self) -> DialogueState:
        return self._snap.state

    @property
    def context(self) -> ShortTermContext:
        return self._context

    @property
    def engine(self) -> DuplexVoiceEngine:
        """The voice engine this conversation drives."""
        return self._responses

    @property
    def wake_name(self) -> str:
        """The name that addresses the bot now."""
        return self._policy.wake_name

    def announce(self, text: str, *, cause: SpeechCause | None = None) -> None:
        """Say ``text`` (a status line) as soon as the bot is listening; never cuts a response.

        It is spoken like a resume (no model call); interrupting it works as for any response.

        Args:
            text: the line.
            cause: what makes it true; checked when its turn comes, before synthesis and before its
                first frame. Once expired the line is dropped (``SpeechDropped``), never said late.
        """
        if self._phase is not _Phase.CLOSED:
            self._inbox.put_nowait(_Announce(text=text, cause=cause))

    def hear(self, event: _Heard) -> None:
        """What the session heard: a transcript event or a speech-to-text failure (the desk) or a
        speech boundary (the front end's speech sink), in order; handled by the loop. Ignored before :meth:`start` and after
        :meth:`aclose`."""
        if self._phase is _Phase.LISTENING:
            self._inbox.put_nowait(event)

    def hear_claimed(self, final: TranscriptFinal) -> None:
        """A final an intake took (a task or memory request): not a dialogue turn, but a valid
        interruption (recorded as ``TurnIgnored(reason="action_request")``)."""
        if self._phase is _Phase.LISTENING:
            self._inbox.put_nowait(_Claimed(final=final))

    async def start(self) -> None:
        """Begin listening (what :meth:`hear` is given from now on) and start the loop. Once only."""
        if self._phase is _Phase.CLOSED:
            return  # closed first: nothing is opened
        if self._phase is not _Phase.NEW:
            raise RuntimeError("the conversation manager was already started")
        self._phase = _Phase.STARTING
        await self._responses.open()
        if self._phase is _Phase.STARTING:  # a close while the engine opened wins: nothing heard, no loop
            await self._dispatch(Start())  # no effect to apply: it does not yield
            self._phase = _Phase.LISTENING
            self._tasks.spawn(self._run(), name=f"conversation-{self._session_id}")

    async def aclose(self) -> None:
        """Stop listening, cut any response (heard text still committed), end every task. Idempotent."""
        if self._phase is _Phase.CLOSED:
            return
        self._phase = _Phase.CLOSED
        await self._tasks.aclose()
        if self._snap.state is not DialogueState.IDLE:
            await self._dispatch(Stop(reason="closed"))
        await self._responses.aclose()  # responses that outlived their bound

    # --- inbox ---------------------------------------------------------------------------------

    def _report(self, item: DialogueInput) -> None:
        if self._phase is not _Phase.CLOSED:
            self._inbox.put_nowait(item)

    async def _run(self) -> None:
        while True:
            item = await self._inbox.get()
            try:
                await self._handle(item)
            except Exception as exc:  # a bug must not silence the channel; cancellation still ends the loop
                log.exception("conversation %s failed on %s", self._session_id, type(item).__name__)
                self._error("ENGINE_INTERNAL_ERROR", f"{type(exc).__name__}: {exc}", retryable=True)

    async def _handle(self, item: _Item) -> None:
        match item:
            case TranscriptFinal():
                await self._on_final(self._as_heard(item))
                self._responses.drop_prepared(item.utterance_id)  # its final did not take it
            case _Claimed():
                # A request for an intake: not a dialogue turn, and not a false interruption.
                self._early_names.forget(item.final.utterance_id)
                self._ignored(item.final, "action_request")
                self._controller.on_final(item.final.speaker_id, accepted=True)
                self._responses.drop_prepared(item.final.utterance_id)
            case TranscriptSpeculative():
                self._on_speculative(self._as_heard(item))
            case SpeculationWithdrawn():
                self._responses.drop_prepared(item.utterance_id)
            case TranscriptPartial():
                self._early_names.note(
                    item.utterance_id, item.text, self._policy.wake_name, stable=item.stable
                )
                self._controller.on_partial(item.speaker_id, item.text)
            case TranscriptDiscarded():
                self._early_names.forget(item.utterance_id)
                self._responses.drop_prepared(item.utterance_id)
                await self._resume(self._controller.on_discarded(item.speaker_id))
            case SpeechStarted():
                await self._on_speech_started(item)
            case SpeechEnded():
                await self._resume(self._controller.on_speech_ended(item.speaker_id))
            case _WindowExpired():
                await self._resume(self._controller.on_window_expired(item.token))
            case _Announce():
                self._announcements.add(item.text, item.cause)
            case ErrorRaised():
                if item.stage == "stt" and item.retryable:
                    failed = ProviderFailed(
                        kind="stt", code=item.code, message=item.message, retryable=item.retryable
                    )
                    await self._dispatch(failed)
            case Recovered() if self._snap.state is not DialogueState.RECOVERING:
                pass  # the engine reconnected after a recovery that already ended (a discard's)
            case _:
                await self._dispatch(item)
        await self._answer_again()
        await self._next_announcement()

    async def _answer_again(self) -> None:
        """After a failed memory recall, once listening again: the same turn, without memory."""
        if self._retry is None or self._snap.state is not DialogueState.LISTENING:
            return
        (turn_id, prepared), self._retry = self._retry, None
        response_id = f"{turn_id}-without-memory"
        self._prepared[response_id] = replace(prepared, recall=False)
        await self._dispatch(UserTurn(turn_id=turn_id, response_id=response_id))

    async def _next_announcement(self) -> None:
        if not self._announcements or self._snap.state is not DialogueState.LISTENING:
            return
        item = self._announcements.pop()  # expired lines are dropped here, before anything starts
        if item is None:
            return
        rid = item.response_id
        self._prepared[rid] = PreparedResponse(user=None, replay=(item.text,), cause=item.cause, exact=True)
        await self._dispatch(ResumeRequested(turn_id=rid, response_id=rid, cause="announcement"))

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
            await self._resume(self._controller.on_final(event.speaker_id, accepted=False))
            return
        if self._half_duplex_ignores(event.audio_start, event.audio_end):
            self._ignored(event, "bot_speaking")  # half duplex: capture is ignored while the bot speaks
            return
        if self._snap.state is DialogueState.RECOVERING:
            self._ignored(event, "recovering")  # the engine's provider session is being re-established
            return
        turn_id = f"turn-{next(self._turn_ids)}"
        self._bus.publish(
            TurnAccepted(
                at=self._now(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                turn_id=turn_id,
                text=event.text,
            )
        )
        self._controller.on_final(event.speaker_id, accepted=True)
        self._cancel_timer()
        self._prepared[turn_id] = answer_to(
            self._roster,
            wake_name=self._policy.wake_name,
            turn_id=turn_id,
            speaker_id=event.speaker_id,
            text=event.text,
            at=event.at,
            eou_at=event.audio_end,
            audio_start=event.audio_start,
        )
        await self._dispatch(UserTurn(turn_id=turn_id, response_id=turn_id))

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
        return self._settings.mode is DialogueMode.TURN_BASED and self._floor.overlaps(start, end)

    def _on_speculative(self, event: TranscriptSpeculative) -> None:
        """Preemptive generation: if this would be a turn now, prepare its answer, held until the final.

        Only while listening with nothing queued to say (otherwise the final's turn would not start
        at once anyway); the desk never passes on one an intake would claim.
        """
        if (
            not self._settings.preemptive_generation
            or self._snap.state is not DialogueState.LISTENING
            or self._announcements
            or not self._policy.decide(speaker_id=event.speaker_id, text=event.text).accepted
            or self._half_duplex_ignores(event.audio_start, event.audio_end)
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
                at=self._now(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                text=event.text,
                reason=reason,
            )
        )

    async def _on_speech_started(self, event: SpeechStarted) -> None:
        if event.speaker_id not in self._roster.humans():
            return  # another bot talking (a music bot) never interrupts
        barge_in = self._controller.on_speech_started(self._snap.state, event)
        if barge_in is None:
            return
        self._bus.publish(
            InterruptionDetected(
                at=self._now(),
                session_id=self._session_id,
                speaker_id=event.speaker_id,
                turn_id=self._snap.turn_id,
                state=self._snap.state.value,
                confidence=event.confidence,
            )
        )
        await self._dispatch(barge_in)

    async def _resume(self, plan: ResumePlan | None) -> None:
        """After a false interruption: say the cut sentence (and the rest) again, if still listening."""
        if plan is None:
            return
        self._cancel_timer()
        if self._snap.state is not DialogueState.LISTENING:
            return
        response_id = f"{plan.turn_id}-resume-{next(self._resume_ids)}"
        # A cut status line stays one: said again exactly, and only while its cause holds.
        self._prepared[response_id] = PreparedResponse(
            user=None, replay=plan.replay, cause=plan.cause, exact=plan.exact
        )
        await self._dispatch(ResumeRequested(turn_id=plan.turn_id, response_id=response_id))

    # --- the state machine and its effects -----------------------------------------------------

    async def _dispatch(self, event: DialogueInput) -> None:
        try:
            snap, effects = transition(self._snap, event)
        except IllegalTransition as exc:
            log.error("dropped %s: %s", type(event).__name__, exc)
            self._error(exc.code, exc.message, retryable=False)
            return
        previous, self._snap = self._snap, snap
        if snap.state is not previous.state:
            self._floor.update(snap.state in BUSY, self._now())
            self._bus.publish(
                DialogueStateChanged(
                    at=self._now(),
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
                await self._dispatch(follow_up)

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
                        self._start_timer(token)
                return ResponseCancelled(response_id=effect.response_id)
            case CommitResponse():
                self._responses.commit(effect.response_id)
                return None
            case DiscardResponse():
                await self._responses.discard(effect)
                running, self._running = self._running, None
                if effect.code == MEMORY_RECALL_FAILED and running is not None and running[1].recall:
                    self._retry = running  # answered again once recovered (see _answer_again)
                # An engine still reconnecting reports Recovered itself once its new session is up.
                return Recovered() if self._responses.ready else None
            case Recover():
                # Speech-to-text: the transcriber reported the error and discarded the utterance;
                # the next one decodes afresh, so listening may resume at once.
                return Recovered()
            case _:
                assert_never(effect)

    # --- timers and helpers --------------------------------------------------------------------

    def _start_timer(self, token: int) -> None:
        self._cancel_timer()
        self._timer = self._tasks.spawn(self._window(token), name="false-interruption-window")

    async def _window(self, token: int) -> None:
        await self._clock.sleep(self._settings.false_interruption_window_s)
        self._inbox.put_nowait(_WindowExpired(token=token))

    def _cancel_timer(self) -> None:
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        self._timer = None

    def _now(self) -> float:
        return self._clock.monotonic()

    def _error(self, code: str, message: str, *, retryable: bool) -> None:
        self._bus.publish(
            ErrorRaised(
                at=self._now(), session_id=self._session_id, code=code, message=message, retryable=retryable
            )
        )
