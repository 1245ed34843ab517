"""One bot on the emulator for the dialogue benchmark: real STT and TTS, a scripted chat model, one
user; its bus events recorded and its waits done by polling (a poll never scans the whole log).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bench.dialogue_clips import ANSWER
from openab_voice.bench.dialogue_report import Samples
from openab_voice.bus.events import Event, LatencyMeasured
from openab_voice.clock import Clock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import DialogueStateChanged
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.providers.chat import ChatMessage
from openab_voice.providers.tts import TextToSpeech
from openab_voice.providers.turn import TurnDetector
from openab_voice.stt.base import SpeechToText
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

ACK = "Okay."
USER = 1001
POLL_S = 0.005
WAIT_S = 30.0  # every wait of the bench gives up after this
_QUIET_S = 0.4  # bot silent and listening this long: the round is over

E = TypeVar("E", bound=Event)

EngineProviders = Callable[[SpeechToText, DialogueSettings], ConversationProviders]
"""The providers of a speech-to-speech engine on its loopback server (None: the cascade's)."""


class DialogueSession:
    """One bot on the emulator with one user, its events recorded and waited on by polling."""

    def __init__(
        self,
        clock: Clock,
        stt: SpeechToText,
        tts: TextToSpeech,
        *,
        ttft_s: float,
        seed: int,
        resume: bool,
        preemptive: bool,
        engine_providers: EngineProviders | None = None,
        turn_detector: TurnDetector | None = None,
    ) -> None:
        self.clock = clock
        self.chat = ScriptedChatModel(clock, [_reply], ttft_s=ttft_s, token_s=0.02)
        dialogue, caps = negotiate(
            DialogueSettings(resume_after_false_interruption=resume, preemptive_generation=preemptive),
            stt=stt.capabilities,
            tts=tts.capabilities,
            chat=self.chat.capabilities,
        )
        providers = ConversationProviders(
            stt=stt, tts=tts, chat=self.chat, dialogue=dialogue, capabilities=caps
        )
        if engine_providers is not None:
            providers = engine_providers(stt, dialogue)
        providers.turn_detector = turn_detector  # None: turns end on the VAD's silence alone
        settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
        self.h = BotOnEmulator(
            settings,
            EmulatorConfig(dave=True, seed=seed),
            users={USER: "alice"},
            clock=clock,
            providers=providers,
        )
        self.events: list[Event] = []
        self.state = "idle"
        self._speech = [0, 0]  # the user's SpeechStarted, SpeechEnded
        self._ended_at: float | None = None  # last SpeechEnded not yet followed by its transcript
        self.h.bus.subscribe(Event, self._on_event)

    def _on_event(self, e: Event) -> None:
        """Record ``e`` and keep what the waits poll up to date (polling never scans the log)."""
        self.events.append(e)
        match e:
            case DialogueStateChanged():
                self.state = e.state
            case SpeechStarted() if e.speaker_id == str(USER):
                self._speech[0] += 1
            case SpeechEnded() if e.speaker_id == str(USER):
                self._speech[1] += 1
                self._ended_at = e.at
            case TranscriptFinal() | TranscriptDiscarded() if e.speaker_id == str(USER):
                self._ended_at = None

    def user_idle(self) -> bool:
        """The user is not talking and the last utterance was transcribed (or, after 3 s, never will be)."""
        started, ended = self._speech
        pending = self._ended_at is not None and self.clock.monotonic() - self._ended_at < 3.0
        return ended >= started and not pending

    async def __aenter__(self) -> DialogueSession:
        await self.h.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.h.aclose()

    def of(self, kind: type[E], since: int = 0) -> list[E]:
        return [e for e in self.events[since:] if isinstance(e, kind)]

    async def poll(self, ready: Callable[[], bool], within_s: float) -> bool:
        """Poll ``ready`` every few ms; False when ``within_s`` passed first."""
        deadline = self.clock.monotonic() + within_s
        while not ready():
            if self.clock.monotonic() > deadline:
                return False
            await self.clock.sleep(POLL_S)
        return True

    async def until(self, ready: Callable[[], bool], what: str, within_s: float = WAIT_S) -> None:
        if not await self.poll(ready, within_s):
            raise EmulatorError(
                f"dialogue bench: {what} within {within_s} s", code=ErrorCode.EMULATOR_TIMEOUT
            )

    async def first_audio_after(self, since: float) -> float:
        """Poll until the bot starts to sound after ``since``; returns its first packet's arrival (not
        the poll's time: a poll late under load must not add its own delay)."""
        sink = self.h.emulator.bot_audio
        await self.until(lambda: sink.first_audio_after(since) is not None, "no bot audio")
        first = sink.first_audio_after(since)
        assert first is not None
        return first

    async def settle(self) -> None:
        """Wait until the user is idle, the bot listening and silent, all for ``_QUIET_S`` unbroken."""
        sink = self.h.emulator.bot_audio
        since: list[float] = []

        def quiet() -> bool:
            now, last = self.clock.monotonic(), sink.last_audio_at
            silent = last is None or now - last > _QUIET_S
            if not (self.state in ("listening", "idle") and silent and self.user_idle()):
                since.clear()
                return False
            if not since:
                since.append(now)
            return now - since[0] >= _QUIET_S

        await self.until(quiet, "the bot did not go quiet")

    def collect(self, samples: Samples) -> None:
        for e in self.of(LatencyMeasured):
            if e.metric == "barge_in_ms":
                samples.engine_barge_in.append(e.value_ms)
            elif e.metric == "truncate_sent_ms":
                samples.truncate_sent.append(e.value_ms)
            elif e.metric in samples.metrics:
                samples.metrics[e.metric].append(e.value_ms)
        for f in self.of(TranscriptFinal):
            samples.speech_end_to_final.append((f.at - f.audio_end) * 1000.0)


def _reply(messages: Sequence[ChatMessage]) -> str:
    """The long answer to the question; a short one to anything else (the stop, or echo that leaked
    through as a turn), so that a round never waits on a second long answer."""
    heard = messages[-1].content.lower() if messages else ""
    return ANSWER if "capital" in heard or "france" in heard else ACK
