"""A conversation manager on the dialogue fakes, in virtual time, with helpers to script a call.

What the rig says reaches the manager the way a session delivers it: a transcript is published on
the bus (for observers) and routed by a :class:`~openab_voice.engine.desk.TranscriptDesk` (a
``claimed`` text is taken by the rig's stand-in intake first); a speech boundary goes to the
manager's ``hear``, as the front end's speech sink calls it, and is published on the bus.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.engine.context import MemoryRecall
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged
from openab_voice.engine.response import ToolPath
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptSpeculative,
)
from openab_voice.stt.recognize import RecognitionEvent
from openab_voice.testing.dialogue_fakes import (
    FakeChatModel,
    FakeRoster,
    FakeSpeechOutput,
    FakeTextToSpeech,
    ReplySource,
    drive,
    run_until,
)
from openab_voice.tools import default_tools

E = TypeVar("E", bound=Event)
SESSION = "s1"


class PhraseIntake:
    """The rig's stand-in for an intake: takes every final whose text ``claimed`` accepts."""

    def __init__(self, claimed: Callable[[str], bool]) -> None:
        self._claimed = claimed
        self.taken: list[TranscriptFinal] = []

    def claims(self, text: str) -> bool:
        return self._claimed(text)

    def offer(self, final: TranscriptFinal) -> bool:
        if not self._claimed(final.text):
            return False
        self.taken.append(final)
        return True


class Rig:
    """``async with Rig(replies=[...]) as rig:`` starts the manager; leaving closes everything."""

    def __init__(
        self,
        *,
        replies: Iterable[ReplySource],
        settings: DialogueSettings | None = None,
        names: dict[str, str] | None = None,
        bots: Iterable[str] = ("bot",),
        tts: dict[str, Any] | None = None,
        tools: Callable[[FakeClock], ToolPath] = default_tools,
        output: Callable[[FakeClock], FakeSpeechOutput] = FakeSpeechOutput,
        claimed: Callable[[str], bool] | None = None,
        memory: MemoryRecall | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.chat = FakeChatModel(self.clock, replies)
        self.tts = FakeTextToSpeech(self.clock, **(tts or {}))
        self.output = output(self.clock)
        self.roster = FakeRoster(names or {"alice": "Alice", "bot": "Jarvis"}, bots=bots)
        self.tools = tools(self.clock)
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            chat=self.chat,
            tts=self.tts,
            output=self.output,
            tools=self.tools,
            roster=self.roster,
            settings=settings or DialogueSettings(bot_user_id="bot"),
            session_id=SESSION,
            memory=memory,
        )
        self.intake = PhraseIntake(claimed) if claimed is not None else None
        self.desk = TranscriptDesk([self.intake] if self.intake is not None else [], self.manager)
        self._utterances = 0

    async def __aenter__(self) -> Rig:
        await self.output.__aenter__()
        await self.manager.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.manager.aclose()
        await self.output.aclose()

    # --- scripting ------------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock.monotonic()

    def hear(self, event: RecognitionEvent) -> None:
        """As the transcriber hands it out: published for observers, then routed by the desk."""
        self.bus.publish(event)
        self.desk.route(event)

    def sense(self, event: SpeechStarted | SpeechEnded) -> None:
        """As the front end delivers a speech boundary: to the manager, and to the bus."""
        self.manager.hear(event)
        self.bus.publish(event)

    def say(
        self,
        text: str,
        *,
        speaker: str = "alice",
        began: float | None = None,
        utterance_id: str | None = None,
    ) -> None:
        self._utterances += 1
        self.hear(
            TranscriptFinal(
                at=self.now(),
                session_id=SESSION,
                speaker_id=speaker,
                utterance_id=utterance_id or f"u{self._utterances}",
                text=text,
                audio_start=self.now() - 1.0 if began is None else began,
                audio_end=self.now(),
                partials=1,
            )
        )

    def speculate(self, text: str, *, utterance_id: str, speaker: str = "alice") -> None:
        """The transcriber's speculative final: what ``utterance_id`` says if nothing follows."""
        self.hear(
            TranscriptSpeculative(
                at=self.now(),
                session_id=SESSION,
                speaker_id=speaker,
                utterance_id=utterance_id,
                text=text,
                audio_start=self.now() - 1.0,
                audio_end=self.now(),
            )
        )

    def withdraw(self, *, utterance_id: str, speaker: str = "alice") -> None:
        self.hear(
            SpeculationWithdrawn(
                at=self.now(), session_id=SESSION, speaker_id=speaker, utterance_id=utterance_id
            )
        )

    def partial(
        self, text: str, *, speaker: str = "alice", utterance_id: str = "partial", stable: bool = False
    ) -> None:
        self.hear(
            TranscriptPartial(
                at=self.now(),
                session_id=SESSION,
                speaker_id=speaker,
                utterance_id=utterance_id,
                text=text,
                stable=stable,
                audio_start=self.now() - 0.5,
                audio_end=self.now(),
            )
        )

    def discard(self, *, speaker: str = "alice") -> None:
        self.hear(
            TranscriptDiscarded(
                at=self.now(), session_id=SESSION, speaker_id=speaker, utterance_id="x", reason="empty"
            )
        )

    def speech_started(self, *, speaker: str = "alice") -> float:
        at = self.now()
        self.sense(
            SpeechStarted(
                at=at,
                session_id=SESSION,
                speaker_id=speaker,
                audio_time=at,
                probability=0.9,
                during_playback=True,
                confidence=0.8,
            )
        )
        return at

    def speech_ended(self, *, speaker: str = "alice", started: float | None = None) -> None:
        at = self.now()
        begun = at - 0.3 if started is None else started
        self.sense(
            SpeechEnded(
                at=at,
                session_id=SESSION,
                speaker_id=speaker,
                audio_time=at,
                started_audio_time=begun,
                duration_s=at - begun,
            )
        )

    async def run(self, seconds: float) -> None:
        await drive(self.clock, seconds)

    async def until(self, predicate: Callable[[], bool], *, limit_s: float = 30.0) -> None:
        assert await run_until(self.clock, predicate, limit_s=limit_s), (
            "condition not reached in virtual time"
        )

    async def until_finished(self, turn_id: str) -> BotUtteranceFinished:
        await self.until(
            lambda: self.utterance(turn_id) is not None and self.manager.state is DialogueState.LISTENING
        )
        utt = self.utterance(turn_id)
        assert utt is not None
        return utt

    async def until_playing(self, sentence: str) -> None:
        await self.until(lambda: sentence in self.played_sentences())

    # --- observations ---------------------------------------------------------------------------

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def states(self) -> list[str]:
        return [f"{e.previous}->{e.state}" for e in self.of(DialogueStateChanged)]

    def utterance(self, turn_id: str) -> BotUtteranceFinished | None:
        found = [e for e in self.of(BotUtteranceFinished) if e.turn_id == turn_id]
        return found[-1] if found else None

    def played_sentences(self) -> list[str]:
        out: list[str] = []
        last = 0
        for _, tag, _ in self.output.played:
            if tag != last:
                out.append(self.tts.sentence_for(tag))
            last = tag
        return out

    def context_rows(self) -> list[tuple[str, str]]:
        return [(row["role"], row["text"]) for row in self.manager.context.dump()]
