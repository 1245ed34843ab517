"""What the speech-to-speech engines share behind :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`:
one provider session kept alive (:class:`~openab_voice.engine.realtime.keeper.SessionKeeper`), at most
one answer in flight, status lines said by the exact voice, the speakers' processed capture kept for
the turn being sent, and every answer settled once with only its heard text committed.

:class:`ProviderEngine` runs the seam; an engine says how a turn is sent (:meth:`~ProviderEngine._request`),
how a cut answer is taken back (:meth:`~ProviderEngine._cut`), and what a
false claim of its model does (:meth:`~ProviderEngine._claim`). The realtime engine
(:mod:`~openab_voice.engine.realtime.engine`) and the live engine (:mod:`openab_voice.engine.live`) are
its two.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import ErrorRaised
from openab_voice.engine.context import UserUtterance
from openab_voice.engine.duplex import EngineBinding, EngineCapabilities
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.realtime.audio import TurnAudio
from openab_voice.engine.realtime.exact import ExactLines
from openab_voice.engine.realtime.keeper import SessionKeeper
from openab_voice.engine.realtime.speech import ClaimCut, ProviderSpeech
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
from openab_voice.providers.tts import TextToSpeech
from openab_voice.tasks import TaskOwner

__all__ = ["Active", "ProviderEngine", "failed"]

log = logging.getLogger(__name__)


R = TypeVar("R", bound=ProviderSpeech)


@dataclass(slots=True)
class Active(Generic[R]):
    """The answer in flight, and the user turn it answers."""

    response: R
    user: UserUtterance | None
    task: asyncio.Task[None] | None = None
    settled: bool = False


def failed(response_id: str, err: OpenabError) -> ResponseFailed:
    return ResponseFailed(
        response_id=response_id, code=err.code, message=err.message, retryable=err.retryable
    )


class ProviderEngine(abc.ABC, Generic[R]):
    """See the module docstring.

    Args:
        binding: the conversation it serves.
        name: the engine's name (``realtime``, ``live``) in task names, logs and error details.
        output: playback.
        tools: the tool path (the exact voice's too).
        capture: subscribes to the processed capture of every speaker (``FrontEnd.subscribe``).
        capture_window_s: each speaker's capture kept for the turn being decided.
        voice: the exact voice (TTS) that says status lines; None: they are dropped, not guessed.
        capabilities: what the engine declares.
    """

    def __init__(
        self,
        binding: EngineBinding,
        *,
        name: str,
        output: SpeechOutput,
        tools: ToolPath,
        capture: Callable[[], AsyncIterator[ProcessedFrame]] | None,
        capture_window_s: float,
        voice: TextToSpeech | None,
        capabilities: EngineCapabilities,
    ) -> None:
        self._b = binding
        self._name = name
        self._exact = ExactLines(binding, voice=voice, output=output, tools=tools)
        self._output = output
        self._tools = tools
        self._capture = capture
        self._audio = TurnAudio(window_s=capture_window_s)
        self._active: Active[R] | None = None
        self._tasks = TaskOwner(f"{name} engine")
        # running: capturing, the provider session connected or reconnecting; open() once only
        self._life = Lifecycle(f"{name} engine")
        self._capabilities = capabilities

    # --- what an engine provides --------------------------------------------------------------

    @property
    @abc.abstractmethod
    def _session(self) -> SessionKeeper[Any, Any]:
        """The provider session kept alive."""

    @abc.abstractmethod
    def _response(self, link: Any, handle: SpeechHandle, prepared: PreparedResponse) -> R:
        """A new answer on ``link`` (None: there is no session; the answer fails at once)."""

    def _says_exactly(self, prepared: PreparedResponse) -> bool:
        """The exact voice says it (a status line), not the model."""
        return prepared.exact

    @abc.abstractmethod
    async def _request(self, response: R) -> None:
        """Send the turn ``response`` answers."""

    @abc.abstractmethod
    async def _claim(self, response: R, cut: ClaimCut) -> bool:
        """The model's sentence claimed what the store does not bear out; whether the output was cut."""

    @abc.abstractmethod
    async def _cut(self, response: R, played_ms: float, *, barge_in_at: float | None) -> None:
        """The output of ``response`` stopped at ``played_ms``: take back what the provider holds of
        the rest (``barge_in_at``: when the interruption was decided, for a barge-in)."""

    async def _take_back(self, response: R, played_ms: float) -> None:
        """A discarded answer: take back what the provider still holds of it."""
        await self._cut(response, played_ms, barge_in_at=None)

    @abc.abstractmethod
    def _unavailable(self) -> OpenabError:
        """Why an answer cannot start: no session now."""

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

    async def open(self) -> None:
        """Start capturing and connect (in the background; a failure reports ``ProviderLost``)."""
        if not self._life.new:
            return
        self._life.start()
        if self._capture is not None:
            self._spawn(self._capture_loop(self._capture()), f"{self._name}-capture")
        self._spawn(self._session.run(), f"{self._name}-connection")

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        if self._says_exactly(prepared):
            self._exact.start(effect, prepared, self._session.link)
            return
        handle = SpeechHandle(response_id=effect.response_id, turn_id=effect.turn_id, output=self._output)
        link = self._session.link
        active = Active(response=self._response(link, handle, prepared), user=prepared.user)
        self._active = active
        if link is None:
            self._b.report(failed(effect.response_id, self.failure or self._unavailable()))
            return
        active.task = self._spawn(self._respond(active), f"{self._name}-response-{effect.response_id}")
        handle.bind_task(active.task)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        """Preemptive generation is the cascade's: a provider answer cannot be held unheard."""

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
        barge_in = effect.barge_in
        if barge_in is not None:
            self._b.latency(
                "barge_in_ms", barge_in.audio_time, turn_id=handle.turn_id, speaker_id=barge_in.speaker_id
            )
        await self._cut(response, played_ms, barge_in_at=decided_at if barge_in is not None else None)
        if active.task is not None and not await handle.wait_closed(
            self._b.clock, self._b.settings.cancel_timeout_s
        ):
            log.warning("%s response %s did not unwind", self._name, handle.response_id)
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
            await self._take_back(active.response, played_ms)
            await handle.wait_closed(self._b.clock, self._b.settings.cancel_timeout_s)
            self._settle(active, discard=True)
        self._b.bus.publish(
            ErrorRaised(
                at=self._now(),
                session_id=self._b.session_id,
                code=effect.code,
                message=effect.message,
                retryable=effect.retryable,
                details={"response_id": effect.response_id, "engine": self._name},
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

    async def _respond(self, active: Active[R]) -> None:
        response = active.response
        handle = response.handle
        try:
            await self._request(response)
            await response.stream()
            uid = handle.utterance_id
            position = None if uid is None else await asyncio.shield(self._output.finish(uid))
        except ClaimCut as cut:
            interrupted = await self._claim(response, cut)
            self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))
            return
        except Exception as exc:  # CancelledError is not an Exception: a cut still propagates
            err = (
                exc
                if isinstance(exc, OpenabError)
                else ResponseError(f"{self._name}: {exc!r}", stage=self._name)
            )
            if self._active is active and not self._session.lost:  # a lost session is reported once, as such
                self._b.report(failed(handle.response_id, err))
            return
        interrupted = False
        if position is not None:
            handle.mark_played(position)
            interrupted = position.interrupted
        self._b.report(ResponseFinished(response_id=handle.response_id, interrupted=interrupted))

    def _take(self, response_id: str) -> Active[R] | None:
        active = self._active
        if active is None or active.response.handle.response_id != response_id:
            return None
        return active

    def _settle(self, active: Active[R], *, discard: bool) -> None:
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

    # --- helpers -------------------------------------------------------------------------------

    async def _capture_loop(self, frames: AsyncIterator[ProcessedFrame]) -> None:
        async for processed in frames:
            self._audio.push(processed.frame)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _now(self) -> float:
        return self._b.clock.monotonic()
