"""The conversation rig: a conversation manager on the dialogue fakes, in virtual time, scripted.

Used by the tests and by ``openab-voice self-test agent``. Time is a
:class:`~openab_voice.testing.virtual_time.VirtualClock` (``await rig.run(s)``, ``await rig.until(p)``)
and every bus event lands in ``rig.events``, an :class:`~openab_voice.testing.events.EventLog`. This
rig runs the cascade engine (chat model, TTS); :class:`openab_voice.testing.realtime.rig.RealtimeRig`
is the same rig on the realtime engine and the loopback realtime server.

What the rig says reaches the manager the way a session delivers it: a transcript is published on
the bus (for observers) and routed by a :class:`~openab_voice.engine.desk.TranscriptDesk` (a
``claimed`` text is taken by the rig's stand-in intake first); a speech boundary goes to the
manager's ``hear``, as the front end's speech sink calls it, and is published on the bus.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, cast

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.engine.context import MemoryRecall
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.events import BotUtteranceFinished
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
)
from openab_voice.testing.events import EventLog
from openab_voice.testing.virtual_time import VirtualClock
from openab_voice.tools import default_tools

SESSION = "s1"


def bare_tools(clock: FakeClock) -> ToolPath:
    """The built-in tools without a router: called as the router would be, but with no budget, audit or
    refusal in the way, so a test sees the engine's own handling of a tool round."""
    return cast(ToolPath, default_tools(clock))  # a registry has the router's specs() and call()


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
    """``async with Rig(replies=[...]) as rig:`` starts the manager; leaving closes everything.

    ``threads``: while the rig runs, the loop's ``to_thread`` work goes to threads its clock waits for
    (:meth:`~openab_voice.testing.virtual_time.VirtualClock.threads`), for code under test that hands
    work to threads.
    """

    def __init__(
        self,
        *,
        replies: Iterable[ReplySource],
        settings: DialogueSettings | None = None,
        names: dict[str, str] | None = None,
        bots: Iterable[str] = ("bot",),
        tts: dict[str, Any] | None = None,
        tools: Callable[[FakeClock], ToolPath] = bare_tools,
        output: Callable[[FakeClock], FakeSpeechOutput] = FakeSpeechOutput,
        claimed: Callable[[str], bool] | None = None,
        memory: MemoryRecall | None = None,
        session_id: str = SESSION,
        threads: bool = False,
    ) -> None:
        self.clock = VirtualClock()
        self._threads = threads
        self._stack = contextlib.ExitStack()
        self.session_id = session_id
        self.bus = EventBus()
        self.events = EventLog(self.bus)
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
            session_id=session_id,
            memory=memory,
        )
        self.intake = PhraseIntake(claimed) if claimed is not None else None
        self.desk = TranscriptDesk([self.intake] if self.intake is not None else [], self.manager)
        self._utterances = 0

    async def __aenter__(self) -> Rig:
        if self._threads:
            self._stack.enter_context(self.clock.threads())
        await self.output.__aenter__()
        await self.manager.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.manager.aclose()
            await self.output.aclose()
        finally:
            self._stack.close()

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
                session_id=self.session_id,
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
                session_id=self.session_id,
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
                at=self.now(), session_id=self.session_id, speaker_id=speaker, utterance_id=utterance_id
            )
        )

    def partial(
        self, text: str, *, speaker: str = "alice", utterance_id: str = "partial", stable: bool = False
    ) -> None:
        self.hear(
            TranscriptPartial(
                at=self.now(),
                session_id=self.session_id,
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
                at=self.now(),
                session_id=self.session_id,
                speaker_id=speaker,
                utterance_id="x",
                reason="empty",
            )
        )

    def speech_started(self, *, speaker: str = "alice") -> float:
        at = self.now()
        self.sense(
            SpeechStarted(
                at=at,
                session_id=self.session_id,
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
                session_id=self.session_id,
                speaker_id=speaker,
                audio_time=at,
                started_audio_time=begun,
                duration_s=at - begun,
            )
        )

    async def run(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass."""
        await self.clock.run_for(seconds)

    async def until(self, predicate: Callable[[], bool], *, limit_s: float = 30.0) -> None:
        """Run virtual time until ``predicate()`` holds; fail, listing the events, past ``limit_s``."""
        if not await self.clock.run_until(predicate, limit_s=limit_s):
            raise AssertionError(f"condition not reached in {limit_s:g} virtual s; {self.events.describe()}")

    async def until_finished(self, turn_id: str) -> BotUtteranceFinished:
        await self.until(self.finished(turn_id))
        utt = self.utterance(turn_id)
        assert utt is not None
        return utt

    async def until_playing(self, sentence: str) -> None:
        await self.until(lambda: sentence in self.played_sentences())

    # --- observations ---------------------------------------------------------------------------

    def states(self, *, since: int = 0) -> list[str]:
        return self.events.transitions(since=since)

    def utterance(self, turn_id: str) -> BotUtteranceFinished | None:
        return self.events.last(BotUtteranceFinished, turn_id=turn_id)

    def finished(self, turn_id: str) -> Callable[[], bool]:
        """A predicate: ``turn_id``'s utterance finished and the manager listens again."""
        return lambda: self.utterance(turn_id) is not None and self.manager.state is DialogueState.LISTENING

    def played_sentences(self, since_time: float = 0.0) -> list[str]:
        """Sentences in the order their frames were played (consecutive frames collapsed)."""
        out: list[str] = []
        last = 0
        for _, tag, at in self.output.played:
            if at >= since_time and tag != last:
                out.append(self.tts.sentence_for(tag))
            last = tag
        return out

    def context_rows(self) -> list[tuple[str, str]]:
        return [(row["role"], row["text"]) for row in self.manager.context.dump()]
