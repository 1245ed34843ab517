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

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import ErrorRaised
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.context import UserUtterance
from openab_voice.engine.duplex import (
    DuplexVoiceEngine,
    EngineBinding,
    EngineCapabilities,
    EngineFactory,
)
from openab_voice.engine.events import (
    BotUtteranceFinished,
)
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.realtime.audio import TurnAudio
from openab_voice.engine.realtime.cuts import Cuts
from openab_voice.engine.realtime.exact import ExactLines
from openab_voice.engine.realtime.provider import ProviderSession
from openab_voice.engine.realtime.response import RealtimeResponse
from openab_voice.engine.realtime.session import (
    NoLink,
    RealtimeSettings,
    realtime_capabilities,
)
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.engine.realtime.turn import send_turn
from openab_voice.engine.response import ToolPath
from openab_voice.engine.state import (
    DiscardResponse,
    InterruptResponse,
    ResponseFailed,
    ResponseFinished,
    StartResponse,
)
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import OpenabError, ResponseError
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.realtime import PROVIDER_RATE, RealtimeConnector, RealtimeLink
from openab_voice.providers.realtime_openai import connection_error
from openab_voice.providers.tts import TextToSpeech
from openab_voice.tasks import TaskOwner

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra: its models are only read here
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["RealtimeEngine", "realtime_engine"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Active:
    response: RealtimeResponse
    user: UserUtterance | None
    task: asyncio.Task[None] | None = None
    settled: bool = False


def _failed(response_id: str, err: OpenabError) -> ResponseFailed:
    return ResponseFailed(
        response_id=response_id, code=err.code, message=err.message, retryable=err.retryable
    )


class RealtimeEngine:
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
        self._b = binding
        self._claims = claims
        self._exact = ExactLines(binding, voice=voice, output=output, tools=tools)
        self._output = output
        self._tools = tools
        self._capture = capture
        self._settings = settings or RealtimeSettings()
        self._audio = TurnAudio(window_s=self._settings.capture_window_s)
        self._active: _Active | None = None
        self._tasks = TaskOwner("realtime engine")
        # running: capturing, the provider session connected or reconnecting; open() once only
        self._life = Lifecycle("realtime engine")
        self._session = ProviderSession(
            binding=binding, connector=connector, tools=tools, settings=self._settings, route=self
        )
        self._cuts = Cuts(binding, session=self._session, output=output)
        self._capabilities = realtime_capabilities(binding.settings.mode)

    # --- the seam ------------------------------------------------------------------------------

    @property
    def capabilities(self) -> EngineCapabilities:
        return self._capabilities

    @property
    def output(self) -> SpeechOutput:
        return self._output

    @property
    def ready(self) -> bool:
        return self._session.link is not None and self._life.running

    @property
    def failure(self) -> OpenabError | None:
        """A failure that is not retried (auth, unknown model): the engine stays down."""
        return self._session.failure

    @property
    def advisory(self) -> list[str]:
        """The provider's latest speech events, kept for inspection; never acted on."""
        return list(self._session.advisory)

    async def open(self) -> None:
        """Start capturing and connect (in the background; a failure reports ``ProviderLost``)."""
        if not self._life.new:
            return
        self._life.start()
        if self._capture is not None:
            self._spawn(self._capture_loop(self._capture()), "realtime-capture")
        self._spawn(self._session.run(), "realtime-connection")

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        if prepared.exact:
            self._exact.start(effect, prepared, self._session.link)
            return
        handle = SpeechHandle(response_id=effect.response_id, turn_id=effect.turn_id, output=self._output)
        link = self._session.link
        if link is None:
            err = self.failure or connection_error(ConnectionError("no provider session"), model=self._model)
            self._active = _Active(response=self._response(link, handle, prepared), user=prepared.user)
            self._b.report(_failed(effect.response_id, err))
            return
        active = _Active(response=self._response(link, handle, prepared), user=prepared.user)
        self._active = active
        task = self._spawn(self._respond(active), f"realtime-response-{effect.response_id}")
        active.task = task
        handle.bind_task(task)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        """Preemptive generation is the cascade's: a provider response cannot be held unheard."""

    def drop_prepared(self, key: str | None = None) -> None:
        """Nothing is ever prepared ahead."""

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        if self._exact.owns(effect.response_id):
            return await self._exact.interrupt(effect)
        active = self._take(effect.response_id)
        if active is None:
            return None
        response = active.response
        handle = response.handle
        decided_at = self._now()
        played_ms = handle.interrupt()  # the output stops first; this also cancels the task
        response.cut()
        if effect.barge_in is not None:
            self._cuts.latency(
                "barge_in_ms", effect.barge_in.audio_time, handle.turn_id, effect.barge_in.speaker_id
            )
        # truncate_sent_ms runs from our decision to interrupt (the machine's barge-in) to the send.
        await self._cuts.cut(
            response, played_ms, barge_in_at=decided_at if effect.barge_in is not None else None
        )
        if active.task is not None and not await handle.wait_closed(
            self._b.clock, self._b.settings.cancel_timeout_s
        ):
            log.warning("realtime response %s did not unwind", handle.response_id)
        self._settle(active, discard=False)
        return handle

    def commit(self, response_id: str) -> None:
        if self._exact.owns(response_id):
            self._exact.commit(response_id)
            return
        active = self._take(response_id)
        if active is not None:
            self._settle(active, discard=False)

    async def discard(self, effect: DiscardResponse) -> None:
        if self._exact.owns(effect.response_id):
            await self._exact.discard(effect)
            return
        active = self._take(effect.response_id)
        if active is not None:
            handle = active.response.handle
            played_ms = handle.interrupt()
            if self._session.link is not None and self._session.link is active.response.link:
                await self._cuts.cut(active.response, played_ms, barge_in_at=None)
            await handle.wait_closed(self._b.clock, self._b.settings.cancel_timeout_s)
            self._settle(active, discard=True)
        self._b.bus.publish(
            ErrorRaised(
                at=self._now(),
                session_id=self._b.session_id,
                code=effect.code,
                message=effect.message,
                retryable=effect.retryable,
                details={"response_id": effect.response_id, "engine": "realtime"},
            )
        )

    async def aclose(self) -> None:
        if not self._life.begin_close():
            return
        await self._tasks.aclose()
        await self._exact.aclose()
        await self._session.close()
        self._life.finish_close()

    # --- one response --------------------------------------------------------------------------

    @property
    def _model(self) -> str:
        return self._session.model

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
            model=self._model,
            preroll_ms=self._settings.preroll_ms,
            claims=self._claims,
        )

    async def _respond(self, active: _Active) -> None:
        response = active.response
        handle = response.handle
        try:
            await self._request(response)
            await response.stream()
            uid = handle.utterance_id
            position = None if uid is None else await asyncio.shield(self._output.finish(uid))
        except ClaimCut as cut:
            interrupted = await self._cuts.claim(response, cut)
            self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))
            return
        except Exception as exc:  # CancelledError is not an Exception: a cut still propagates
            err = (
                exc if isinstance(exc, OpenabError) else ResponseError(f"realtime: {exc!r}", stage="realtime")
            )
            if self._active is active and not self._session.lost:  # a lost session is reported once, as such
                self._b.report(_failed(handle.response_id, err))
            return
        interrupted = False
        if position is not None:
            handle.mark_played(position)
            interrupted = position.interrupted
        self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))

    async def _request(self, response: RealtimeResponse) -> None:
        """Send the turn (its speaker's audio when captured) and ask for the response."""
        prepared, user = response.prepared, response.prepared.user
        audio = b""
        if user is not None and prepared.audio_start is not None and prepared.eou_at is not None:
            start = prepared.audio_start - self._settings.lead_in_s
            audio = self._audio.span(user.speaker_id, start, prepared.eou_at, rate=PROVIDER_RATE)
        await send_turn(response, audio=audio, told=self._exact.untold(response.link))

    def _take(self, response_id: str) -> _Active | None:
        active = self._active
        if active is None or active.response.handle.response_id != response_id:
            return None
        return active

    def _settle(self, active: _Active, *, discard: bool) -> None:
        """Commit the user turn and only the heard transcript (nothing when ``discard``); once."""
        if active.settled:
            return
        active.settled = True
        if self._active is active:
            self._active = None
        handle = active.response.handle
        heard = "" if discard else handle.heard_text()
        if not discard:
            if active.user is not None:
                self._b.context.record_turn(active.user)
            self._b.context.record_heard(handle.turn_id, heard)
        self._b.bus.publish(
            BotUtteranceFinished(
                at=self._now(),
                session_id=self._b.session_id,
                turn_id=handle.turn_id,
                text=handle.text,
                spoken_text=heard,
                interrupted=discard or handle.interrupted,
            )
        )

    # --- the provider session's response events -------------------------------------------------

    def deliver(self, event: RealtimeServerEvent, *, error: bool = False) -> bool:
        """Give a response's event to the active response (an error only while one is in flight)."""
        active = self._active
        if active is None or (error and not active.response.in_flight):
            return False
        active.response.events.put_nowait(event)
        return True

    async def _capture_loop(self, frames: AsyncIterator[ProcessedFrame]) -> None:
        async for processed in frames:
            self._audio.push(processed.frame)

    # --- helpers -------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _now(self) -> float:
        return self._b.clock.monotonic()


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
