"""The realtime engine: a speech-to-speech provider (OpenAI Realtime) behind
:class:`~openab_voice.engine.duplex.DuplexVoiceEngine`, with our core owning the turns.

One provider session per voice channel (:mod:`~openab_voice.engine.realtime.provider`), server turn
detection off: our VAD, echo gate and turn policy decide; each accepted turn goes attributed
(:mod:`~openab_voice.engine.realtime.turn`) and the answer streams into playback
(:mod:`~openab_voice.engine.realtime.response`). Barge-in stops the output first, then cancels and
truncates (:mod:`~openab_voice.engine.realtime.cuts`); status lines are said by our own voice
(:mod:`~openab_voice.engine.realtime.exact`). A dropped session reconnects to a fresh one seeded from
the heard history; auth or model errors leave the call receive-only. In detail:
docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.duplex import (
    DuplexVoiceEngine,
    EngineBinding,
    EngineFactory,
)
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.realtime.cuts import Cuts
from openab_voice.engine.realtime.provider import ProviderSession
from openab_voice.engine.realtime.provider_engine import ProviderEngine
from openab_voice.engine.realtime.response import RealtimeResponse
from openab_voice.engine.realtime.session import (
    NoLink,
    RealtimeSettings,
    realtime_capabilities,
)
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.engine.realtime.turn import send_turn
from openab_voice.engine.response import ToolPath
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import OpenabError
from openab_voice.providers.realtime import PROVIDER_RATE, RealtimeConnector, RealtimeLink
from openab_voice.providers.realtime_openai import connection_error
from openab_voice.providers.tts import TextToSpeech

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra: its models are only read here
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["RealtimeEngine", "realtime_engine"]


class RealtimeEngine(ProviderEngine[RealtimeResponse]):
    """See the module docstring.

    Args:
        binding: the conversation it serves.
        connector: opens provider sessions.
        output: playback.
        tools: the tool path (only :data:`~openab_voice.engine.realtime.response.REALTIME_TOOLS`
            are offered).
        capture: subscribes to the processed capture of every speaker (``FrontEnd.subscribe``);
            None: turns go to the provider as their transcript (no audio).
        settings: voice, reconnection and capture bounds.
        voice: the exact voice (TTS) that says status lines; None: they are dropped, not guessed.
        claims: checks the model's sentences about actions against the store (None: unchecked).
    """

    def __init__(
        self,
        binding: EngineBinding,
        *,
        connector: RealtimeConnector,
        output: SpeechOutput,
        tools: ToolPath,
        capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
        settings: RealtimeSettings | None = None,
        voice: TextToSpeech | None = None,
        claims: SpeechClaims | None = None,
    ) -> None:
        self._settings = settings or RealtimeSettings()
        super().__init__(
            binding,
            name="realtime",
            output=output,
            tools=tools,
            capture=capture,
            capture_window_s=self._settings.capture_window_s,
            voice=voice,
            capabilities=realtime_capabilities(binding.settings.mode),
        )
        self._claims = claims
        self._provider = ProviderSession(
            binding=binding, connector=connector, tools=tools, settings=self._settings, route=self
        )
        self._cuts = Cuts(binding, session=self._provider, output=output)

    @property
    def _session(self) -> ProviderSession:
        return self._provider

    @property
    def advisory(self) -> list[str]:
        """The provider's latest speech events, kept for inspection; never acted on."""
        return list(self._provider.advisory)

    # --- one response --------------------------------------------------------------------------

    def _response(
        self, link: RealtimeLink | None, handle: SpeechHandle, prepared: PreparedResponse
    ) -> RealtimeResponse:
        return RealtimeResponse(
            link=link if link is not None else NoLink(),
            handle=handle,
            prepared=prepared,
            output=self._output,
            tools=self._tools,
            bus=self._b.bus,
            clock=self._b.clock,
            report=self._b.report,
            session_id=self._b.session_id,
            max_tool_rounds=self._b.settings.max_tool_rounds,
            model=self._provider.model,
            preroll_ms=self._settings.preroll_ms,
            claims=self._claims,
        )

    def _unavailable(self) -> OpenabError:
        return connection_error(ConnectionError("no provider session"), model=self._provider.model)

    async def _request(self, response: RealtimeResponse) -> None:
        """Send the turn (its speaker's audio when captured) and ask for the response."""
        prepared, user = response.prepared, response.prepared.user
        audio = b""
        if user is not None and prepared.audio_start is not None and prepared.eou_at is not None:
            start = prepared.audio_start - self._settings.lead_in_s
            audio = self._audio.span(user.speaker_id, start, prepared.eou_at, rate=PROVIDER_RATE)
        await send_turn(response, audio=audio, told=self._exact.untold(response.link))

    async def _claim(self, response: RealtimeResponse, cut: ClaimCut) -> bool:
        return await self._cuts.claim(response, cut)

    async def _cut(self, response: RealtimeResponse, played_ms: float, *, barge_in_at: float | None) -> None:
        # Cancel what it still generates, truncate at the played position; truncate_sent_ms runs
        # from our decision to interrupt (the machine's barge-in) to the send.
        await self._cuts.cut(response, played_ms, barge_in_at=barge_in_at)

    async def _take_back(self, response: RealtimeResponse, played_ms: float) -> None:
        if self._provider.link is not None and self._provider.link is response.link:
            await self._cut(response, played_ms, barge_in_at=None)

    # --- the provider session's response events -------------------------------------------------

    def deliver(self, event: RealtimeServerEvent, *, error: bool = False) -> bool:
        """Give a response's event to the active response (an error only while one is in flight)."""
        active = self._active
        if active is None or (error and not active.response.in_flight):
            return False
        active.response.events.put_nowait(event)
        return True


def realtime_engine(
    *,
    connector: RealtimeConnector,
    output: SpeechOutput,
    tools: ToolPath,
    capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
    settings: RealtimeSettings | None = None,
    voice: TextToSpeech | None = None,
    claims: SpeechClaims | None = None,
) -> EngineFactory:
    """The factory a :class:`~openab_voice.engine.conversation.ConversationManager` builds it with."""

    def build(binding: EngineBinding) -> DuplexVoiceEngine:
        return RealtimeEngine(
            binding,
            connector=connector,
            output=output,
            tools=tools,
            capture=capture,
            settings=settings,
            voice=voice,
            claims=claims,
        )

    return build
