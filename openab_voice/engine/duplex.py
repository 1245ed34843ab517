"""The engine seam: what a voice engine declares (:class:`EngineCapabilities`) and what the
conversation manager drives (:class:`DuplexVoiceEngine`).

The conversation manager owns everything engine-neutral (turn policy, end of turn, interruption,
the state machine, the heard-only context). An engine only produces speech for the turns it is
given, through a :class:`~openab_voice.engine.handle.SpeechHandle`, and reports progress as
state-machine inputs. Three implementations: the cascade (:mod:`openab_voice.engine.cascade`),
the realtime engine (:mod:`openab_voice.engine.realtime`) and the live engine
(:mod:`openab_voice.engine.live`). Capabilities are declared, never guessed from a name. In detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, Protocol

from openab_voice.bus.events import LatencyMeasured

if TYPE_CHECKING:  # the seam names the engine's vocabulary; none of it is needed at run time here
    from openab_voice.bus import EventBus
    from openab_voice.clock import Clock
    from openab_voice.engine.context import ShortTermContext
    from openab_voice.engine.expiry import SpeechCause
    from openab_voice.engine.handle import SpeechHandle, SpeechOutput
    from openab_voice.engine.settings import DialogueSettings
    from openab_voice.engine.state import DialogueInput, DiscardResponse, InterruptResponse, StartResponse
    from openab_voice.engine.supervisor import PreparedResponse

__all__ = [
    "DISCORD_PCM",
    "AudioFormat",
    "DialogueMode",
    "DuplexVoiceEngine",
    "EngineBinding",
    "EngineCapabilities",
    "EngineFactory",
]


class DialogueMode(StrEnum):
    FULL_DUPLEX = "full_duplex"
    """Listen while speaking; valid user speech interrupts the bot."""
    TURN_BASED = "turn_based"
    """Half duplex: capture is ignored while the bot holds the floor; nothing interrupts it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioFormat:
    """An audio format an engine accepts or produces: rate, channels and sample type."""

    rate: int
    channels: int
    sample: Literal["s16le"] = "s16le"

    def __str__(self) -> str:
        return f"{self.sample} {self.rate} Hz x{self.channels}"


DISCORD_PCM = AudioFormat(rate=48_000, channels=2)
"""What playback takes (and what the receiver decodes): 48 kHz stereo s16le."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCapabilities:
    """What the configured engine really does.

    Attributes:
        mode: the mode it runs in (turn based after an allowed fallback).
        streaming_input: the STT produces hypotheses while the user talks.
        partials: partial transcripts are published.
        streaming_output: speech starts before the whole reply exists (sentence by sentence; the
            TTS itself may also stream within a sentence: ``tts_streaming``).
        tts_streaming: the TTS yields audio before a sentence is fully synthesized.
        interruption: user speech can cut the bot off.
        semantic_tools: the engine's model can call tools.
        full_duplex: listening and understanding while speaking, with barge-in (continuous duplex).
        engine: which implementation (``cascade``, ``realtime`` or ``live``).
        exact_speech_output: the words spoken are exactly the text the engine reports (the
            cascade synthesizes its own text; a speech-to-speech model's transcript is its best
            effort caption of what it said).
        input_format: the audio the engine's recognizer is fed (processed capture).
        output_format: what the engine writes to playback.
        provider_input_format: what the provider itself takes, when it is not ``input_format``
            (the engine resamples); None for the cascade.
        provider_output_format: what the provider itself produces, when it is not ``output_format``.
    """

    mode: DialogueMode
    streaming_input: bool
    partials: bool
    streaming_output: bool
    tts_streaming: bool
    interruption: bool
    semantic_tools: bool
    full_duplex: bool
    engine: Literal["cascade", "realtime", "live"] = "cascade"
    exact_speech_output: bool = True
    input_format: AudioFormat = AudioFormat(rate=16_000, channels=1)
    output_format: AudioFormat = DISCORD_PCM
    provider_input_format: AudioFormat | None = None
    provider_output_format: AudioFormat | None = None

    @property
    def continuous_duplex(self) -> bool:
        """The RFC's name for full duplex: it listens (and can be interrupted) while it speaks."""
        return self.full_duplex

    @property
    def half_duplex(self) -> bool:
        return not self.full_duplex


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineBinding:
    """What the conversation manager hands an engine when it builds it (one engine per manager).

    Attributes:
        bus: where the engine publishes its observations (latency, tool calls, utterances).
        clock: the injected clock.
        settings: the negotiated dialogue settings.
        context: the manager's heard-only short-term context; the engine writes it only when a
            response settles (the user turn, then the heard assistant text), never otherwise.
        report: where the engine's state-machine inputs go (the manager's inbox), in order.
        session_id: the voice session.
        announce: queues a status line to be said exactly once the bot listens (the manager's
            ``announce``): an engine that cut a false claim of its model says the true status so.
    """

    bus: EventBus
    clock: Clock
    settings: DialogueSettings
    context: ShortTermContext
    report: Callable[[DialogueInput], None]
    session_id: str | None
    announce: Callable[[str, SpeechCause | None], None] | None = None

    def latency(self, metric: str, since: float, *, turn_id: str, speaker_id: str | None) -> None:
        """Publish ``metric``: the time from ``since`` to now, for ``turn_id``."""
        now = self.clock.monotonic()
        self.bus.publish(
            LatencyMeasured(
                at=now,
                session_id=self.session_id,
                metric=metric,
                value_ms=(now - since) * 1000.0,
                speaker_id=speaker_id,
                turn_id=turn_id,
            )
        )


class DuplexVoiceEngine(Protocol):
    """One voice engine, driven by the conversation manager's one effect dispatcher.

    At most one response is active. Every response is settled exactly once (``interrupt``,
    ``commit`` or ``discard``); settling records the user turn and only the heard assistant text in
    the context and publishes ``BotUtteranceFinished``. Progress comes back through the binding's
    ``report``: ``AudioStarted``, ``ToolStarted`` / ``ToolFinished``, then one ``ResponseFinished``
    or ``ResponseFailed``. An engine whose provider connection can be lost reports ``ProviderLost``
    when it is and ``Recovered`` once a fresh connection is ready.
    """

    @property
    def capabilities(self) -> EngineCapabilities: ...

    @property
    def output(self) -> SpeechOutput:
        """The playback path the engine writes into."""
        ...

    @property
    def ready(self) -> bool:
        """The engine can start a response now (False while its provider is being reconnected)."""
        ...

    async def open(self) -> None:
        """Begin: connect a provider session, subscribe to capture (the manager's start)."""
        ...

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        """Begin the response ``effect`` names (``prepared`` says what it answers or replays)."""
        ...

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        """Optionally run a response ahead of its turn, held (preemptive generation); may do nothing."""
        ...

    def drop_prepared(self, key: str | None = None) -> None:
        """Drop what :meth:`prepare` holds (only if it answers ``key``, when given)."""
        ...

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        """Cut the response now (output first), settle it; its handle, or None when not active."""
        ...

    def commit(self, response_id: str) -> None:
        """The response ended on its own: settle it."""
        ...

    async def discard(self, effect: DiscardResponse) -> None:
        """The response failed: stop it, commit nothing, report the error."""
        ...

    async def aclose(self) -> None:
        """End every task the engine owns; idempotent and bounded."""
        ...


EngineFactory = Callable[[EngineBinding], DuplexVoiceEngine]
"""Builds a conversation's engine from what the manager binds it to."""
