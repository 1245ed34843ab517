"""The realtime engine: a speech-to-speech provider (OpenAI Realtime) behind
:class:`~openab_voice.engine.duplex.DuplexVoiceEngine`, with our core owning the turns.

One provider session per voice channel. Its server turn detection is off (``turn_detection:
null``): our VAD, echo gate and turn policy decide who spoke and when; the provider's speech events
are advisory (logged, never acted on). For each turn the manager accepts:

1. a user text item names the speaker (``"Alice says:"``): one session hears everyone, so each turn
   is attributed, and the wake-name rule is the manager's, as in the cascade;
2. that speaker's processed capture for the turn (and nobody else's) is appended, resampled from
   the internal rate to the provider's 24 kHz, and committed at our end of speech;
3. ``response.create``; the response's audio streams into playback resampled to 48 kHz stereo.

Barge-in: the output stops first (within one frame), then ``response.cancel`` and
``conversation.item.truncate`` with ``audio_end_ms`` = the position playback reports it actually
played, so only heard audio stays in the provider's context; our own context gets only the heard
transcript. A resume after a false interruption is asked of the model in words ("say exactly ...");
its speech is not exact (``exact_speech_output`` False), so a status line (an announcement) never
goes to it: the exact voice (:mod:`~openab_voice.engine.realtime_exact`, our TTS) says it into the
same playback, and the provider is told what was heard.

Claims: each sentence of the model's audio transcript is checked against the action store
(:class:`~openab_voice.engine.claims.SpeechClaims`) as it arrives, before its audio plays. A sentence
claiming a status no action of the session is in (RFC decision 6: the model "cannot announce approval
or claim an action result") is cut like a barge-in (output stopped, ``response.cancel``, items
truncated at the played position), never committed as heard, published as ``SpeechClaimCut``, and
the canonical line for the true status is announced in its place.

Failures: a dropped websocket reports ``ProviderLost`` (``recovering``) and reconnects with bounded
backoff to a *fresh* session seeded from our heard history; then ``Recovered`` (``listening``).
Authentication failure or an unknown model is not retried: the engine stays down and the call stays
up receive-only. Server ``error`` events and rate limits map to the error tree
(:mod:`openab_voice.providers.realtime_openai`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openab_voice.audio.pipeline import ProcessedFrame
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
    LatencyMeasured,
    ProviderTruncated,
    SpeechClaimCut,
)
from openab_voice.engine.handle import FRAME_MS, SpeechHandle, SpeechOutput
from openab_voice.engine.realtime_audio import TurnAudio
from openab_voice.engine.realtime_exact import ExactLines
from openab_voice.engine.realtime_provider import ProviderSession
from openab_voice.engine.realtime_response import ClaimCut, RealtimeResponse
from openab_voice.engine.realtime_session import (
    NoLink,
    RealtimeSettings,
    realtime_capabilities,
    session_config,
)
from openab_voice.engine.response import ResponseError, ToolPath
from openab_voice.engine.state import (
    DiscardResponse,
    InterruptResponse,
    ResponseFailed,
    ResponseFinished,
    StartResponse,
)
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import OpenabError
from openab_voice.providers.realtime_openai import (
    PROVIDER_RATE,
    RealtimeConnector,
    RealtimeLink,
    connection_error,
)
from openab_voice.providers.speech import TextToSpeech
from openab_voice.tasks import TaskOwner

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra: its models are only read here
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["RealtimeEngine", "RealtimeSettings", "realtime_capabilities", "realtime_engine", "session_config"]

log = logging.getLogger(__name__)

_APPEND_BYTES = 24_000 * 2  # one second of 24 kHz s16le per input_audio_buffer.append


class _Phase(enum.Enum):
    """Where the engine is in its life (it only moves forward)."""

    NEW = "new"  # built: nothing captured or connected yet
    OPEN = "open"  # capturing; the provider session connected or reconnecting
    CLOSED = "closed"  # every task ended, the provider session closed; open() does nothing


@dataclass(slots=True)
class _Active:
    response: RealtimeResponse
    user: UserUtterance | None
    task: asyncio.Task[None] | None = None
    settled: bool = False


class RealtimeEngine:
    """See the module docstring.

    Args:
        binding: the conversation it serves.
        connector: opens provider sessions.
        output: playback.
        tools: the tool path (only :data:`~openab_voice.engine.realtime_response.REALTIME_TOOLS`
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
        self._phase = _Phase.NEW
        self._session = ProviderSession(
            binding=binding, connector=connector, tools=tools, settings=self._settings, route=self
        )
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
        return self._session.link is not None and self._phase is _Phase.OPEN

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
        if self._phase is not _Phase.NEW:
            return
        self._phase = _Phase.OPEN
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
            self._b.report(
                ResponseFailed(
                    response_id=effect.response_id,
                    code=err.code,
                    message=err.message,
                    retryable=err.retryable,
                )
            )
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
            self._latency(
                "barge_in_ms", effect.barge_in.audio_time, handle.turn_id, effect.barge_in.speaker_id
            )
        # truncate_sent_ms runs from our decision to interrupt (the machine's barge-in) to the send.
        await self._cut(response, played_ms, barge_in_at=decided_at if effect.barge_in is not None else None)
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
                await self._cut(active.response, played_ms, barge_in_at=None)
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
        if self._phase is _Phase.CLOSED:
            return
        self._phase = _Phase.CLOSED
        await self._tasks.aclose()
        await self._exact.aclose()
        await self._session.close()

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
            interrupted = await self._cut_claim(response, cut)
            self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))
            return
        except Exception as exc:  # CancelledError is not an Exception: a cut still propagates
            err = (
                exc if isinstance(exc, OpenabError) else ResponseError(f"realtime: {exc!r}", stage="realtime")
            )
            if self._active is active and not self._session.lost:  # a lost session is reported once, as such
                self._b.report(
                    ResponseFailed(
                        response_id=handle.response_id,
                        code=err.code,
                        message=err.message,
                        retryable=err.retryable,
                    )
                )
            return
        interrupted = False
        if position is not None:
            handle.mark_played(position)
            interrupted = position.interrupted
        self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))

    async def _request(self, response: RealtimeResponse) -> None:
        """Send the turn (attributed text, then the speaker's audio) and ask for the response."""
        prepared, link = response.prepared, response.link
        for told in self._exact.untold(link):  # what the exact voice said since the last request
            await link.send(told)
        user = prepared.user
        if user is None:
            # A resume or an announcement: the model is the only voice; ask it for the words (a
            # resume cut before any words were known answers again).
            response.in_flight = True
            if not prepared.replay:
                await link.send({"type": "response.create"})
                return
            said = " ".join(prepared.replay)
            instructions = f"Say exactly this, and nothing else: {said}"
            await link.send({"type": "response.create", "response": {"instructions": instructions}})
            return
        audio = b""
        if prepared.audio_start is not None and prepared.eou_at is not None:
            start = prepared.audio_start - self._settings.lead_in_s
            audio = self._audio.span(user.speaker_id, start, prepared.eou_at, rate=PROVIDER_RATE)
        # With no audio (capture off) the turn goes as its transcript, still attributed.
        said = f"{user.speaker_name} says:" if audio else f"{user.speaker_name} says: {user.text}"
        await link.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": said}],
                },
            }
        )
        if audio:
            for at in range(0, len(audio), _APPEND_BYTES):
                chunk = base64.b64encode(audio[at : at + _APPEND_BYTES]).decode("ascii")
                await link.send({"type": "input_audio_buffer.append", "audio": chunk})
            await link.send({"type": "input_audio_buffer.commit"})
        response.in_flight = True
        await link.send({"type": "response.create"})

    async def _cut(self, response: RealtimeResponse, played_ms: float, *, barge_in_at: float | None) -> None:
        """Cancel what the provider still generates and truncate its items at the played position."""
        await self._cancel(response)
        await self._truncate(response, played_ms, barge_in_at=barge_in_at)

    async def _cancel(self, response: RealtimeResponse) -> None:
        """``response.cancel`` if it is still generating; its late events are dropped either way."""
        if response.in_flight:
            response.in_flight = False
            self._session.forget(response.provider_ids, created=bool(response.provider_ids))
            with contextlib.suppress(OpenabError):
                await response.link.send({"type": "response.cancel"})
        else:
            self._session.forget(response.provider_ids, created=True)

    async def _truncate(
        self, response: RealtimeResponse, played_ms: float, *, barge_in_at: float | None
    ) -> None:
        """``conversation.item.truncate`` each item at what was heard of it."""
        link = response.link
        for item_id, audio_end_ms in response.truncations(played_ms):
            try:
                await link.send(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": item_id,
                        "content_index": 0,
                        "audio_end_ms": audio_end_ms,
                    }
                )
            except OpenabError:
                return  # the session is gone: the fresh one is seeded from the heard history anyway
            turn_id = response.handle.turn_id
            if barge_in_at is not None:
                self._latency("truncate_sent_ms", barge_in_at, turn_id, None)
            self._b.bus.publish(
                ProviderTruncated(
                    at=self._now(),
                    session_id=self._b.session_id,
                    turn_id=turn_id,
                    item_id=item_id,
                    audio_end_ms=audio_end_ms,
                    played_ms=played_ms,
                    utterance_id=response.handle.utterance_id,
                )
            )

    async def _cut_claim(self, response: RealtimeResponse, cut: ClaimCut) -> bool:
        """Stop the claim before it plays, take it out of the provider's context, report it, and
        queue the true status in its place; whether the output was cut (not just ended early).

        When none of the claim's audio is out yet, what came before it plays to its end; when its
        first words are (they arrived before the words that made it a claim), the output stops now.
        """
        found = cut.contradiction
        handle = response.handle
        await self._cancel(response)  # the model stops generating at once
        log.warning("cut the model's claim %r: the action is %s", found.claimed, found.actual)
        self._b.bus.publish(
            SpeechClaimCut(
                at=self._now(),
                session_id=self._b.session_id,
                turn_id=response.handle.turn_id,
                text=found.sentence,
                claimed=found.claimed,
                actual=found.actual,
                action_id=found.action_id,
                kept_ms=cut.kept_frames * FRAME_MS,
                correction=found.correction,
            )
        )
        if self._b.announce is not None:
            self._b.announce(found.correction, found.cause)
        uid = handle.utterance_id
        if cut.claim_frames or uid is None:
            played_ms, interrupted = handle.stop(), True  # inside the response's own task: not cancelled
        else:
            await response.release()
            position = await asyncio.shield(self._output.finish(uid))
            handle.mark_played(position)
            played_ms, interrupted = position.played_ms, position.interrupted
        await self._truncate(response, played_ms, barge_in_at=None)
        return interrupted

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

    def _latency(self, metric: str, since: float, turn_id: str, speaker_id: str | None) -> None:
        now = self._now()
        self._b.bus.publish(
            LatencyMeasured(
                at=now,
                session_id=self._b.session_id,
                metric=metric,
                value_ms=(now - since) * 1000.0,
                speaker_id=speaker_id,
                turn_id=turn_id,
            )
        )


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
