"""The conversation manager for one voice channel.

It hears its session directly, never through the bus: transcripts from the session's
:class:`~openab_voice.engine.desk.TranscriptDesk` and speech events from the front end's speech sink,
fed by :meth:`~ConversationManager.hear` through one inbox to one loop task, with the running
response's progress reports. The loop delegates: :class:`~openab_voice.engine.hearing.Hearing`
decides turns and barge-ins, every decision goes through the pure state machine
(:mod:`openab_voice.engine.state`), and :class:`~openab_voice.engine.dispatcher.EffectDispatcher`
applies its effects. The manager owns the life cycle, the inbox and the false-interruption timer.
What it hears and publishes, and how errors recover: docs/adr/0015-data-path-by-direct-calls.md.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.engine.cascade import cascade_engine
from openab_voice.engine.context import MemoryRecall, ShortTermContext
from openab_voice.engine.dispatcher import EffectDispatcher
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineFactory
from openab_voice.engine.expiry import AnnouncementQueue, SpeechCause
from openab_voice.engine.handle import SpeechOutput
from openab_voice.engine.hearing import Hearing
from openab_voice.engine.interruption import InterruptionController
from openab_voice.engine.response import ToolPath
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import (
    DialogueInput,
    DialogueState,
    ProviderFailed,
    Recovered,
    Start,
    Stop,
)
from openab_voice.engine.turns import Roster
from openab_voice.errors import ConfigError, ErrorCode
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.chat import ChatModel
from openab_voice.providers.tts import TextToSpeech
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    SpeechResumed,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.tasks import TaskOwner

__all__ = ["ConversationManager"]

log = logging.getLogger(__name__)


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
    | SpeechResumed
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
        output: the playback path (:class:`~openab_voice.discord.wire.playback.Playback`; the cascade).
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
        self._clock = clock
        self._settings = settings
        self._session_id = session_id
        # Status lines to say (action results); each waits until the channel is quiet.
        self._announcements = AnnouncementQueue(bus=bus, clock=clock, session_id=session_id)
        self._context = ShortTermContext(
            system_prompt=settings.system_prompt,
            max_turns=settings.max_context_turns,
            max_notes=settings.max_channel_notes,
        )
        self._controller = InterruptionController(
            mode=settings.mode,
            resume=settings.resume_after_false_interruption,
            backchannels=settings.ignore_backchannels,
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
        self._dialogue = EffectDispatcher(
            bus=bus,
            clock=clock,
            session_id=session_id,
            responses=self._responses,
            controller=self._controller,
            announcements=self._announcements,
            arm_window=self._start_timer,
            cancel_window=self._cancel_timer,
        )
        self._hearing = Hearing(
            bus=bus,
            clock=clock,
            session_id=session_id,
            roster=roster,
            settings=settings,
            context=self._context,
            controller=self._controller,
            responses=self._responses,
            announcements=self._announcements,
            dialogue=self._dialogue,
            cancel_window=self._cancel_timer,
        )
        # Unbounded on purpose: transcript and speech events arrive a few per second per speaker, and
        # a response's progress reports must never be dropped.
        self._inbox: asyncio.Queue[_Item] = asyncio.Queue()
        self._tasks = TaskOwner(f"conversation {session_id}")  # the loop and the interruption window
        self._timer: asyncio.Task[None] | None = None
        self._life = Lifecycle("conversation manager")
        # The domain part of running: False while the engine opens (reports and announcements queue,
        # nothing is heard yet), True once the loop runs.
        self._listening = False

    # --- public --------------------------------------------------------------------------------

    @property
    def state(self) -> DialogueState:
        return self._dialogue.snapshot.state

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
        return self._hearing.wake_name

    def announce(self, text: str, *, cause: SpeechCause | None = None) -> None:
        """Say ``text`` (a status line) as soon as the bot is listening; never cuts a response.

        It is spoken like a resume (no model call); interrupting it works as for any response.

        Args:
            text: the line.
            cause: what makes it true; checked when its turn comes, before synthesis and before its
                first frame. Once expired the line is dropped (``SpeechDropped``), never said late.
        """
        if not self._life.closed:
            self._inbox.put_nowait(_Announce(text=text, cause=cause))

    def hear(self, event: _Heard) -> None:
        """What the session heard: a transcript event or a speech-to-text failure (the desk) or a
        speech boundary (the front end's speech sink), in order; handled by the loop. Ignored before :meth:`start` and after
        :meth:`aclose`."""
        if self._listening and not self._life.closed:
            self._inbox.put_nowait(event)

    def hear_claimed(self, final: TranscriptFinal) -> None:
        """A final an intake took (a task or memory request): not a dialogue turn, but a valid
        interruption (recorded as ``TurnIgnored(reason="action_request")``)."""
        if self._listening and not self._life.closed:
            self._inbox.put_nowait(_Claimed(final=final))

    async def start(self) -> None:
        """Begin listening (what :meth:`hear` is given from now on) and start the loop. Once only."""
        if self._life.closed:
            return  # closed first: nothing is opened
        if not self._life.new:  # RuntimeError kept: callers and tests match on it
            raise RuntimeError("the conversation manager was already started")
        self._life.start()
        await self._responses.open()
        if not self._life.closed:  # a close while the engine opened wins: nothing heard, no loop
            await self._dialogue.dispatch(Start())  # no effect to apply: it does not yield
            self._listening = True
            self._tasks.spawn(self._run(), name=f"conversation-{self._session_id}")

    async def aclose(self) -> None:
        """Stop listening, cut any response (heard text still committed), end every task. Idempotent."""
        if not self._life.begin_close():
            return
        await self._tasks.aclose()
        if self._dialogue.snapshot.state is not DialogueState.IDLE:
            await self._dialogue.dispatch(Stop(reason="closed"))
        await self._responses.aclose()  # responses that outlived their bound
        self._life.finish_close()

    # --- inbox ---------------------------------------------------------------------------------

    def _report(self, item: DialogueInput) -> None:
        if not self._life.closed:
            self._inbox.put_nowait(item)

    async def _run(self) -> None:
        while True:
            item = await self._inbox.get()
            try:
                await self._handle(item)
            except Exception as exc:  # a bug must not silence the channel; cancellation still ends the loop
                log.exception("conversation %s failed on %s", self._session_id, type(item).__name__)
                self._dialogue.error(
                    ErrorCode.ENGINE_INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", retryable=True
                )

    async def _handle(self, item: _Item) -> None:
        match item:
            case TranscriptFinal():
                await self._hearing.final(item)
            case _Claimed():
                self._hearing.claimed(item.final)
            case TranscriptSpeculative():
                self._hearing.speculative(item)
            case SpeculationWithdrawn():
                self._responses.drop_prepared(item.utterance_id)
            case TranscriptPartial():
                await self._hearing.partial(item)
            case TranscriptDiscarded():
                await self._hearing.discarded(item)
            case SpeechStarted():
                await self._hearing.speech_started(item)
            case SpeechResumed():  # a turn ended inside a speech segment, and the words go on
                await self._hearing.speech_started(_onset(item))
            case SpeechEnded():
                ended = self._controller.on_speech_ended(item.speaker_id, duration_s=item.duration_s)
                await self._dialogue.resume(ended)
            case _WindowExpired():
                await self._dialogue.resume(self._controller.on_window_expired(item.token))
            case _Announce():
                self._announcements.add(item.text, item.cause)
            case ErrorRaised():
                if item.stage == "stt" and item.retryable:
                    failed = ProviderFailed(
                        kind="stt", code=item.code, message=item.message, retryable=item.retryable
                    )
                    await self._dialogue.dispatch(failed)
            case Recovered() if self._dialogue.snapshot.state is not DialogueState.RECOVERING:
                pass  # the engine reconnected after a recovery that already ended (a discard's)
            case _:
                await self._dialogue.dispatch(item)
        await self._dialogue.answer_again()
        await self._dialogue.next_announcement()

    # --- the false-interruption window ---------------------------------------------------------

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


def _onset(resumed: SpeechResumed) -> SpeechStarted:
    """The onset the front end never sent for words that go on after a turn ended inside its speech
    segment (the segment's own onset was the echo gate's to accept, and it did)."""
    return SpeechStarted(
        at=resumed.at,
        session_id=resumed.session_id,
        speaker_id=resumed.speaker_id,
        audio_time=resumed.audio_time,
        probability=1.0,
        during_playback=True,
        confidence=1.0,
    )
