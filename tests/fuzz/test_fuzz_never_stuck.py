"""Never stuck: after any interleaving of what a voice channel throws at the dialogue, it listens again.

Agents that go silent after an interruption are the top complaint in LiveKit's and Pipecat's
trackers (a speech handle left open after a withdrawn preemptive answer, the next turn swallowed
after a false interruption). Hypothesis interleaves, on the cascade and on the realtime engine (the
loopback realtime server's sessions over an in-memory pipe, paced on the same virtual clock: see
``tests/fakes/realtime_pipe.py``): speech starts and ends, speculative finals and their withdrawals,
partials, finals (addressed or not, the speculation's words or others, claimed by an intake),
discards (a cough after a barge-in: a false interruption), provider errors, audience changes (a
second human joins or leaves, so the wake name is needed or not), voice gaps (the output cut under
the engine, everyone's speech ended) and announcements, with virtual time passing between them.
Then the inputs go quiet the way the front end and transcriber leave them (open speech ended, open
speculations withdrawn, no more planned faults) and the properties must hold:

* within :data:`BOUND_S` of virtual time the dialogue is ``listening``, and still is once a pending
  false-interruption window has run out (its resume said);
* no speech handle is left open: every response started was settled once (one
  ``BotUtteranceFinished`` each), the playback holds no open utterance, nothing prepared ahead is
  still held, and every chat and TTS stream the cascade opened was closed;
* the next addressed turn is answered: a final with the wake name gets a response with audio heard.

Examples: ``OPENAB_HYPOTHESIS_EXAMPLES`` per engine (default :data:`CI_EXAMPLES`), derandomized like
the rest of ``tests/fuzz`` (``OPENAB_FUZZ_RANDOM=1`` searches afresh). For a long search, e.g.
``OPENAB_HYPOTHESIS_EXAMPLES=5000 OPENAB_FUZZ_RANDOM=1 pytest tests/fuzz/test_fuzz_never_stuck.py``;
the test's timeout grows with the count. ``pytest -rA`` prints which paths the examples reached.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from openab_voice.audio.events import SpeechEnded
from openab_voice.bus.events import ErrorRaised
from openab_voice.engine.cascade import CascadeEngine, cascade_engine
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineCapabilities, EngineFactory
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged, TurnAccepted
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.realtime import RealtimeSettings, realtime_engine
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState, DiscardResponse, InterruptResponse, StartResponse
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.providers.chat import ChatMessage
from openab_voice.stt.events import TranscriptDiscarded
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.realtime import Faults, Pacing, ScriptedListener, ScriptedResponder, ToneVoice
from openab_voice.testing.realtime.session import SessionServices
from openab_voice.testing.rig import SESSION, Rig
from tests.fakes.realtime_pipe import PipeConnector
from tests.fuzz.conftest import EXAMPLES as FUZZ_EXAMPLES
from tests.fuzz.tallies import Tally

CI_EXAMPLES = 150
EXAMPLES = int(os.environ.get("OPENAB_HYPOTHESIS_EXAMPLES", str(min(CI_EXAMPLES, FUZZ_EXAMPLES))))
BOUND_S = 30.0
"""Virtual seconds within which the quiet dialogue must be listening (a reply takes about 1 s)."""
WINDOW_S = 2.0  # the false-interruption window (DialogueSettings' default, named here)

pytestmark = pytest.mark.timeout(max(120, EXAMPLES))

EngineKind = Literal["cascade", "realtime", "realtime_unvoiced"]
Kind = Literal[
    "start",
    "end",
    "partial",
    "speculate",
    "withdraw",
    "final",
    "discard",
    "error",
    "audience",
    "gap",
    "announce",
]

SETTINGS = DialogueSettings(
    bot_user_id="bot", false_interruption_window_s=WINDOW_S, preemptive_generation=True
)
REPLY = "Sure. It is noon."
FAILING = "Right. That went boom."  # the cascade's TTS fails on "boom"
ADDRESSED = ("Jarvis, what time is it", "hey Jarvis tell me a joke", "what is the weather, Jarvis")
UNADDRESSED = ("what time is it", "I think so too", "Note: buy milk")  # "Note:" is an intake's
PROBE = "Jarvis, are you still there"


@dataclass(frozen=True, slots=True)
class Step:
    """One input, then ``wait`` virtual seconds.

    ``variant`` picks the text of a final or speculation, and the fault of an ``error``: the next
    response's model fails (0), its speech fails (1: the cascade's TTS, a realtime server ``error``
    now), the connection (2: an STT failure for the cascade, the realtime websocket dropped), an STT
    failure (3).
    """

    kind: Kind
    who: str = "alice"
    addressed: bool = True
    same: bool = True  # a final says what its utterance's speculation said (if there was one)
    variant: int = 0
    wait: float = 0.0


# Weighted towards what makes a response run and then cuts it: finals, speech starts and ends, by
# the one human who is there from the start.
KINDS: tuple[Kind, ...] = (
    *("start", "end", "final") * 3,
    *("speculate", "discard") * 2,
    *("withdraw", "partial", "error", "audience", "gap", "announce"),
)
steps = st.lists(
    st.builds(
        Step,
        kind=st.sampled_from(KINDS),
        who=st.sampled_from(("alice", "alice", "alice", "bob")),
        addressed=st.booleans(),
        same=st.booleans(),
        variant=st.integers(0, 3),
        wait=st.sampled_from((0.0, 0.02, 0.1, 0.3, 0.8, 2.5)),
    ),
    max_size=24,
)


# --- the engine under test, with every response it starts recorded --------------------------------


class RecordingEngine:
    """Delegates to the engine under test; remembers every response started."""

    def __init__(self, inner: DuplexVoiceEngine) -> None:
        self.inner = inner
        self.started: list[str] = []

    @property
    def capabilities(self) -> EngineCapabilities:
        return self.inner.capabilities

    @property
    def output(self) -> SpeechOutput:
        return self.inner.output

    @property
    def ready(self) -> bool:
        return self.inner.ready

    async def open(self) -> None:
        await self.inner.open()

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        self.started.append(effect.response_id)
        self.inner.start(effect, prepared)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        self.inner.prepare(key, prepared)

    def drop_prepared(self, key: str | None = None) -> None:
        self.inner.drop_prepared(key)

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        return await self.inner.interrupt(effect)

    def commit(self, response_id: str) -> None:
        self.inner.commit(response_id)

    async def discard(self, effect: DiscardResponse) -> None:
        await self.inner.discard(effect)

    async def aclose(self) -> None:
        await self.inner.aclose()


def recording(factory: EngineFactory, into: list[RecordingEngine]) -> EngineFactory:
    def build(binding: EngineBinding) -> DuplexVoiceEngine:
        engine = RecordingEngine(factory(binding))
        into.append(engine)
        return engine

    return build


@dataclass(slots=True)
class Faulty:
    """The cascade's planned faults: the next model stream fails, or the next reply's speech does."""

    chat: bool = False
    tts: bool = False

    def reply(self, _messages: Sequence[ChatMessage]) -> ScriptedReply:
        if self.chat:
            self.chat = False
            return ScriptedReply.failing(REPLY, after=2)
        if self.tts:
            self.tts = False
            return ScriptedReply.text(FAILING)
        return ScriptedReply.text(REPLY)


@dataclass(slots=True)
class Channel:
    """A running conversation on one engine, and the faults that can be planned for it."""

    rig: Rig
    engine: RecordingEngine
    faulty: Faulty = field(default_factory=Faulty)
    connector: PipeConnector | None = None
    faults: Faults | None = None


def _manager(rig: Rig, factory: EngineFactory, engines: list[RecordingEngine]) -> None:
    rig.manager = ConversationManager(
        bus=rig.bus,
        clock=rig.clock,
        roster=rig.roster,
        settings=SETTINGS,
        session_id=SESSION,
        engine=recording(factory, engines),
    )
    rig.desk = TranscriptDesk([rig.intake] if rig.intake is not None else [], rig.manager)


@asynccontextmanager
async def channel(kind: EngineKind) -> AsyncIterator[Channel]:
    faulty = Faulty()
    rig = Rig(
        replies=[faulty.reply] * 400,
        settings=SETTINGS,
        tts={"fail_on": "boom"},
        claimed=lambda text: text.startswith("Note:"),
    )
    engines: list[RecordingEngine] = []
    connector: PipeConnector | None = None
    faults: Faults | None = None
    if kind == "cascade":
        factory = cascade_engine(chat=rig.chat, tts=rig.tts, output=rig.output, tools=rig.tools)
    else:
        faults = Faults()
        services = SessionServices(
            responder=ScriptedResponder([REPLY]),
            listener=ScriptedListener("(audio)"),
            voice=ToneVoice(ms_per_word=200),
            clock=rig.clock,
            pacing=Pacing(realtime_factor=1, chunk_ms=100),
            faults=faults,
        )
        connector = PipeConnector(services)
        factory = realtime_engine(
            connector=connector,
            output=rig.output,
            tools=rig.tools,
            settings=RealtimeSettings(reconnect_initial_s=0.05, reconnect_max_s=0.2),
            # The exact voice for status lines; unvoiced, they are dropped (and still settled).
            voice=rig.tts if kind == "realtime" else None,
        )
    _manager(rig, factory, engines)
    try:
        async with rig:
            [engine] = engines
            if kind != "cascade":
                assert await rig.clock.run_until(lambda: engine.ready, limit_s=1.0)
            yield Channel(rig=rig, engine=engine, faulty=faulty, connector=connector, faults=faults)
    finally:
        if connector is not None:
            await connector.aclose()


# --- driving it -------------------------------------------------------------------------------------


class Driver:
    """Plays steps the way the front end and the transcriber deliver them: one speaker's speech
    starts before it ends, and each utterance gets speculations, partials, then one final, discard or
    withdrawal (and a new utterance begins after a final or discard)."""

    def __init__(self, ch: Channel) -> None:
        self.ch = ch
        self.rig = ch.rig
        self.speaking: dict[str, float] = {}
        self.utterances = {"alice": 1, "bob": 1}
        self.speculated: dict[str, str] = {}  # speaker -> the text of their open speculation

    def uid(self, who: str) -> str:
        return f"{who}-{self.utterances[who]}"

    def next_utterance(self, who: str) -> None:
        self.speculated.pop(who, None)
        self.utterances[who] += 1

    async def play(self, step: Step) -> None:
        await self.apply(step)
        if step.wait:
            await self.rig.run(step.wait)
        else:
            await self.rig.clock.settle()  # only let ready tasks run

    async def apply(self, step: Step) -> None:
        rig, who = self.rig, step.who
        texts = ADDRESSED if step.addressed else UNADDRESSED
        text = texts[step.variant % len(texts)]
        match step.kind:
            case "start":
                if who not in self.speaking:
                    self.speaking[who] = rig.speech_started(speaker=who)
            case "end":
                if who in self.speaking:
                    rig.speech_ended(speaker=who, started=self.speaking.pop(who))
            case "partial":
                rig.partial(text, speaker=who, utterance_id=self.uid(who), stable=step.same)
            case "speculate":
                self.speculated[who] = text
                rig.speculate(text, utterance_id=self.uid(who), speaker=who)
            case "withdraw":
                if self.speculated.pop(who, None) is not None:
                    rig.withdraw(utterance_id=self.uid(who), speaker=who)
            case "final":
                said = self.speculated.get(who, text) if step.same else text
                rig.say(said, speaker=who, utterance_id=self.uid(who))
                self.next_utterance(who)
            case "discard":
                rig.hear(_discarded(rig, who, self.uid(who)))
                self.next_utterance(who)
            case "error":
                await self.fault(step.variant)
            case "audience":
                if "bob" in rig.roster.names:
                    del rig.roster.names["bob"]
                else:
                    rig.roster.names["bob"] = "Bob"
            case "gap":
                # The voice connection broke: playback is cut under the engine, capture ends for all.
                rig.output.interrupt()
                for speaker, began in sorted(self.speaking.items()):
                    rig.sense(_ended(rig, speaker, began, reason="voice_gap"))
                self.speaking.clear()
            case "announce":
                rig.manager.announce("The task has finished.")

    async def fault(self, variant: int) -> None:
        ch = self.ch
        if variant == 3 or (variant == 2 and ch.connector is None):
            self.rig.hear(
                ErrorRaised(
                    at=self.rig.now(),
                    session_id=SESSION,
                    stage="stt",
                    code="STT_DECODE_FAILED",
                    message="decode failed",
                    retryable=True,
                )
            )
            return
        if ch.connector is None:
            if variant == 0:
                ch.faulty.chat = True
            else:
                ch.faulty.tts = True
            return
        assert ch.faults is not None
        session = ch.connector.current
        if variant == 0:
            ch.faults.fail_next_response()
        elif session is not None and variant == 1:
            await session.send_error(type="server_error", message="The server had an error.")
        elif session is not None:
            await session.drop()

    def quiesce(self) -> None:
        """The inputs go quiet: open speech ends, open speculations are withdrawn, no more faults."""
        for who, began in sorted(self.speaking.items()):
            self.rig.speech_ended(speaker=who, started=began)
        self.speaking.clear()
        for who in sorted(self.speculated):
            self.rig.withdraw(utterance_id=self.uid(who), speaker=who)
            self.next_utterance(who)
        self.ch.faulty.chat = self.ch.faulty.tts = False
        if self.ch.faults is not None:
            self.ch.faults.failures.clear()


def _discarded(rig: Rig, who: str, uid: str) -> TranscriptDiscarded:
    return TranscriptDiscarded(
        at=rig.now(), session_id=SESSION, speaker_id=who, utterance_id=uid, reason="empty"
    )


def _ended(rig: Rig, who: str, began: float, *, reason: str) -> SpeechEnded:
    at = rig.now()
    return SpeechEnded(
        at=at,
        session_id=SESSION,
        speaker_id=who,
        audio_time=at,
        started_audio_time=began,
        duration_s=at - began,
        reason=reason,
    )


# --- the properties ---------------------------------------------------------------------------------


def _open_handles(ch: Channel) -> list[str]:
    """What is still open although the dialogue is quiet (empty: nothing)."""
    rig, engine = ch.rig, ch.engine
    problems: list[str] = []
    finished = rig.events.of(BotUtteranceFinished)
    if len(finished) != len(engine.started):
        problems.append(f"{len(engine.started)} responses started, {len(finished)} settled: {engine.started}")
    if rig.output.open_utterances:
        problems.append(f"playback holds open utterances {rig.output.open_utterances}")
    inner = engine.inner
    if isinstance(inner, CascadeEngine):
        if inner.prepared_key is not None:
            problems.append(f"a response prepared for {inner.prepared_key} is still held")
        chat = rig.chat
        if chat.completed + chat.closed_early != len(chat.requests):
            closed = chat.completed + chat.closed_early
            problems.append(f"chat streams left open: {len(chat.requests)} opened, {closed} closed")
    tts = rig.tts  # the cascade's, and the realtime engine's exact voice
    if len(tts.completed) + len(tts.closed_early) != len(tts.requested):
        problems.append(f"TTS streams left open: {tts.requested} vs {tts.completed + tts.closed_early}")
    return problems


def _listening(rig: Rig) -> Callable[[], bool]:
    return lambda: rig.manager.state is DialogueState.LISTENING


def _path(rig: Rig) -> str:
    """The most telling path an example took (one bucket per example, for the tally)."""
    causes = {e.cause for e in rig.events.of(DialogueStateChanged)}
    states = {e.state for e in rig.events.of(DialogueStateChanged)}
    if "false_interruption" in causes:
        return "resumed"
    if "recovering" in states:
        return "recovered"
    if "interrupted" in states:
        return "barged_in"
    if "announcement" in causes:
        return "announced"
    if len(rig.events.of(TurnAccepted)) > 1:
        return "answered"
    return "probe_only"


async def _never_stuck(kind: EngineKind, plan: Sequence[Step]) -> str:
    async with channel(kind) as ch:
        rig = ch.rig
        driver = Driver(ch)
        for step in plan:
            await driver.play(step)
        driver.quiesce()

        def history() -> str:
            return f"states: {rig.states()}"

        assert await rig.clock.run_until(_listening(rig), limit_s=BOUND_S), f"not listening: {history()}"
        await rig.run(WINDOW_S + 0.5)  # a pending false interruption resolves, its resume plays
        assert await rig.clock.run_until(_listening(rig), limit_s=BOUND_S), f"not listening: {history()}"
        problems = _open_handles(ch)
        assert not problems, f"{problems}; {history()}"

        accepted = len(rig.events.of(TurnAccepted))
        rig.say(PROBE, utterance_id="probe")

        def answered() -> BotUtteranceFinished | None:
            turns = rig.events.of(TurnAccepted)
            if len(turns) <= accepted or rig.manager.state is not DialogueState.LISTENING:
                return None
            return rig.utterance(turns[accepted].turn_id)

        assert await rig.clock.run_until(lambda: answered() is not None, limit_s=BOUND_S), (
            f"the next addressed turn was not answered: {history()}"
        )
        reply = answered()
        assert reply is not None and not reply.interrupted and reply.spoken_text, reply
        assert not _open_handles(ch), _open_handles(ch)
        return _path(rig)


@pytest.mark.parametrize("kind", ["cascade", "realtime", "realtime_unvoiced"])
def test_the_dialogue_is_never_stuck(kind: EngineKind, tally: Tally) -> None:
    @settings(max_examples=EXAMPLES)
    @example(plan=[])
    @example(  # barge-in by a real turn: the interrupter's words, then their final
        plan=[Step("final", wait=0.8), Step("start", wait=0.1), Step("partial"), Step("final"), Step("end")]
    )
    @example(plan=[Step("announce")])  # a status line on the realtime engine: its exact voice says it
    @example(  # barge-in, then a cough: a false interruption, resumed
        plan=[Step("final", wait=0.8), Step("start", wait=0.1), Step("discard"), Step("end", wait=0.3)]
    )
    @example(  # a preemptive answer withdrawn while another turn's reply plays
        plan=[Step("final", wait=0.3), Step("speculate", who="bob"), Step("withdraw", who="bob", wait=0.8)]
    )
    @example(plan=[Step("speculate", wait=0.3), Step("final", wait=0.3), Step("error", variant=2, wait=0.3)])
    @given(plan=steps)
    def target(plan: list[Step]) -> None:
        tally.inputs += 1
        tally.counts[asyncio.run(_never_stuck(kind, plan))] += 1

    target()
    seen = ("resumed", "recovered", "barged_in", "answered") if EXAMPLES >= 50 else ("probe_only",)
    tally.check(
        buckets=("resumed", "recovered", "barged_in", "announced", "answered", "probe_only"), seen=seen
    )
