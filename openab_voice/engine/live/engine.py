"""The live engine: OpenAI GPT-Live behind :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`,
with our core owning the turns as far as the API lets it (docs/adr/0022-gpt-live-engine.md).

One live session per voice channel (:mod:`~openab_voice.engine.live.provider`), its input muted:
our VAD, echo gate and turn policy decide, and only an accepted turn's audio is sent, attributed, and
ended by muting again (the silence the server's own turn-taking ends a turn on). The answer's speech
streams into playback (:mod:`~openab_voice.engine.live.response`). Barge-in stops the output first;
the API has no cancel or truncate, so the model is told in a note which words were heard, and
whatever it still says is never played (it is no answer of ours). Delegations are proposals
(:mod:`~openab_voice.engine.live.delegation`); status lines are said by our exact voice. A dropped
session reconnects to a fresh one seeded from the heard history.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.context import UserUtterance
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineCapabilities, EngineFactory
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.live.cuts import LiveCuts, note
from openab_voice.engine.live.delegation import Delegations
from openab_voice.engine.live.provider import LiveSession
from openab_voice.engine.live.response import LiveResponse
from openab_voice.engine.live.session import LiveSettings, live_capabilities
from openab_voice.engine.realtime.audio import TurnAudio
from openab_voice.engine.realtime.exact import ExactLines
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.engine.response import ToolPath
from openab_voice.engine.state import (
    DiscardResponse,
    InterruptResponse,
    ResponseFailed,
    ResponseFinished,
    StartResponse,
)
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import ErrorCode, OpenabError, ProviderRequestFailed, ResponseError
from openab_voice.lifecycle import Lifecycle
from openab_voice.providers.live import LIVE_RATE, LiveConnector, LiveLink
from openab_voice.providers.tts import TextToSpeech
from openab_voice.tasks import TaskOwner
from openab_voice.tools.registry import ToolContext

if TYPE_CHECKING:
    from openai.types.live import ServerEvent

__all__ = ["LiveEngine", "live_engine"]

log = logging.getLogger(__name__)

_APPEND_BYTES = LIVE_RATE * 2  # one second of 24 kHz s16le per session.input_audio.append


@dataclass(slots=True)
class _Active:
    response: LiveResponse
    user: UserUtterance | None
    task: asyncio.Task[None] | None = None
    settled: bool = False


def _failed(response_id: str, err: OpenabError) -> ResponseFailed:
    return ResponseFailed(
        response_id=response_id, code=err.code, message=err.message, retryable=err.retryable
    )


def _unavailable(message: str, code: ErrorCode = ErrorCode.REALTIME_CONNECTION_LOST) -> OpenabError:
    return ProviderRequestFailed(message, code=code, provider="openai-live")


def speaker_label(name: str) -> str:
    """A display name fit to go into a note: printable, without quotes, at most 32 characters."""
    clean = "".join(ch for ch in name if ch.isprintable() and ch not in '"\n\r')[:32].strip()
    return clean or "Someone"


class LiveEngine:
    """See the module docstring. Arguments as :class:`~openab_voice.engine.realtime.RealtimeEngine`'s;
    ``capture`` is required in practice: the live model hears audio only (a turn without its audio
    fails with the reason)."""

    def __init__(
        self,
        binding: EngineBinding,
        *,
        connector: LiveConnector,
        output: SpeechOutput,
        tools: ToolPath,
        capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
        settings: LiveSettings | None = None,
        voice: TextToSpeech | None = None,
        claims: SpeechClaims | None = None,
    ) -> None:
        self._b = binding
        self._claims = claims
        self._exact = ExactLines(binding, voice=voice, output=output, tools=tools)
        self._output = output
        self._capture = capture
        self._settings = settings or LiveSettings()
        self._audio = TurnAudio(window_s=self._settings.capture_window_s)
        self._active: _Active | None = None
        self._turn = ToolContext(session_id=binding.session_id)  # the last turn sent: its calls' facts
        self._tasks = TaskOwner("live engine")
        self._life = Lifecycle("live engine")
        self._session = LiveSession(
            binding=binding, connector=connector, tools=tools, settings=self._settings, route=self
        )
        self._cuts = LiveCuts(binding, session=self._session)
        self._delegations = Delegations(
            send=self._send,
            tools=tools,
            bus=binding.bus,
            clock=binding.clock,
            session_id=binding.session_id,
            context=lambda: self._turn,
        )
        self._capabilities = live_capabilities(binding.settings.mode)

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
    def unsolicited(self) -> int:
        """Speech events of the model that came with no answer of ours in flight (never played)."""
        return self._session.unsolicited

    async def open(self) -> None:
        """Start capturing and connect (in the background; a failure reports ``ProviderLost``)."""
        if not self._life.new:
            return
        self._life.start()
        if self._capture is not None:
            self._spawn(self._capture_loop(self._capture()), "live-capture")
        self._spawn(self._session.run(), "live-connection")

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        if prepared.exact or prepared.user is None:
            # Status lines, and a resume: the live model speaks only to audio it hears, so the cut
            # sentences are said again, word for word, by our exact voice (then told to the model).
            self._exact.start(effect, prepared, self._session.link)
            return
        handle = SpeechHandle(response_id=effect.response_id, turn_id=effect.turn_id, output=self._output)
        link = self._session.link
        active = _Active(response=self._response(link, handle, prepared), user=prepared.user)
        self._active = active
        if link is None:
            err = self.failure or _unavailable("no live session")
            self._b.report(_failed(effect.response_id, err))
            return
        active.task = self._spawn(self._respond(active), f"live-response-{effect.response_id}")
        handle.bind_task(active.task)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        """Preemptive generation is the cascade's: a live answer cannot be held unheard."""

    def drop_prepared(self, key: str | None = None) -> None:
        """Nothing is ever prepared ahead."""

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        if self._exact.owns(effect.response_id):
            return await self._exact.interrupt(effect)
        active = self._take(effect.response_id)
        if active is None:
            return None
        handle = active.response.handle
        played_ms = handle.interrupt()  # the output stops first; this also cancels the task
        active.response.cut()
        if effect.barge_in is not None:
            self._latency(
                "barge_in_ms", effect.barge_in.audio_time, handle.turn_id, effect.barge_in.speaker_id
            )
        if active.task is not None and not await handle.wait_closed(
            self._b.clock, self._b.settings.cancel_timeout_s
        ):
            log.warning("live response %s did not unwind", handle.response_id)
        await self._cuts.tell_heard(active.response, played_ms)
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
            await handle.wait_closed(self._b.clock, self._b.settings.cancel_timeout_s)
            await self._cuts.tell_heard(active.response, played_ms)
            self._settle(active, discard=True)
        self._b.bus.publish(
            ErrorRaised(
                at=self._now(),
                session_id=self._b.session_id,
                code=effect.code,
                message=effect.message,
                retryable=effect.retryable,
                details={"response_id": effect.response_id, "engine": "live"},
            )
        )

    async def aclose(self) -> None:
        if not self._life.begin_close():
            return
        await self._tasks.aclose()
        await self._exact.aclose()
        await self._session.close()
        self._life.finish_close()

    # --- one answer ------------------------------------------------------------------------------

    def _response(
        self, link: LiveLink | None, handle: SpeechHandle, prepared: PreparedResponse
    ) -> LiveResponse:
        return LiveResponse(
            link=link if link is not None else _NoLink(),
            delegations=self._delegations,
            settings=self._settings,
            model=self._session.model,
            handle=handle,
            prepared=prepared,
            output=self._output,
            bus=self._b.bus,
            clock=self._b.clock,
            report=self._b.report,
            session_id=self._b.session_id,
            claims=self._claims,
        )

    async def _respond(self, active: _Active) -> None:
        response = active.response
        handle = response.handle
        try:
            await self._send_turn(response)
            await response.stream()
            uid = handle.utterance_id
            position = None if uid is None else await asyncio.shield(self._output.finish(uid))
        except ClaimCut as cut:
            await self._cuts.claim(response, cut)
            self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=True))
            return
        except Exception as exc:  # CancelledError is not an Exception: a cut still propagates
            err = exc if isinstance(exc, OpenabError) else ResponseError(f"live: {exc!r}", stage="live")
            if self._active is active and not self._session.lost:  # a lost session is reported once
                self._b.report(_failed(handle.response_id, err))
            return
        interrupted = False
        if position is not None:
            handle.mark_played(position)
            interrupted = position.interrupted
        self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))

    async def _send_turn(self, response: LiveResponse) -> None:
        """What the model hears of a turn: what our exact voice said since, who speaks, the speaker's
        audio (nobody else's), then the mute that ends it."""
        prepared, link = response.prepared, response.link
        for line in self._exact.untold_lines(link):
            await note(link, f"You (the assistant) just said, in the call: {line}")
        user = prepared.user
        assert user is not None  # a resume is the exact voice's (start)
        audio = b""
        if prepared.audio_start is not None and prepared.eou_at is not None:
            start = prepared.audio_start - self._settings.lead_in_s
            audio = self._audio.span(user.speaker_id, start, prepared.eou_at, rate=LIVE_RATE)
        if not audio:
            raise ResponseError("the live model hears audio only, and this turn has none", stage="live")
        self._turn = ToolContext(
            session_id=self._b.session_id, turn_id=response.handle.turn_id, speaker_id=user.speaker_id
        )
        # The display name is the speaker's own text and the note is developer context: on one line,
        # without quotes, clipped, it names a speaker and says little else.
        await note(link, f"{speaker_label(user.speaker_name)} says:")
        await link.send({"type": "session.input_audio.unmute"})
        for at in range(0, len(audio), _APPEND_BYTES):
            chunk = base64.b64encode(audio[at : at + _APPEND_BYTES]).decode("ascii")
            await link.send({"type": "session.input_audio.append", "audio": chunk})
        response.in_flight = True
        await link.send({"type": "session.input_audio.mute"})

    async def _send(self, event: Any) -> None:
        link = self._session.link
        if link is None:
            raise _unavailable("no live session")
        await link.send(event)

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
        active.response.in_flight = False
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

    # --- the session's events --------------------------------------------------------------------

    def deliver(self, event: ServerEvent, *, error: bool = False) -> bool:
        """Give speech, delegations and errors to the answer in flight. A delegation with none in
        flight is still answered (never dropped); speech with none is not ours to play."""
        active = self._active
        if active is not None and active.response.in_flight:
            active.response.events.put_nowait(event)
            return True
        if not error and event.type in ("session.delegation.created", "response.event"):
            self._spawn(self._delegate(event), "live-delegation")
            return True
        return False

    async def _delegate(self, event: ServerEvent) -> None:
        try:
            await self._delegations.handle(event)
        except OpenabError as exc:  # the session went: the fresh one has no such delegation
            log.warning("live delegation not answered: %s", exc)

    async def _capture_loop(self, frames: AsyncIterator[ProcessedFrame]) -> None:
        async for processed in frames:
            self._audio.push(processed.frame)

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

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _now(self) -> float:
        return self._b.clock.monotonic()


class _NoLink:
    """Stands in for the session of an answer that could not start (it never sends)."""

    async def send(self, event: Any) -> None:
        raise _unavailable("no live session")

    async def events(self) -> AsyncIterator[Any]:
        return
        yield

    async def close(self) -> None:
        return


def live_engine(
    *,
    connector: LiveConnector,
    output: SpeechOutput,
    tools: ToolPath,
    capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
    settings: LiveSettings | None = None,
    voice: TextToSpeech | None = None,
    claims: SpeechClaims | None = None,
) -> EngineFactory:
    """The factory a :class:`~openab_voice.engine.conversation.ConversationManager` builds it with."""

    def build(binding: EngineBinding) -> DuplexVoiceEngine:
        return LiveEngine(
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
