"""The response supervisor: owns the response tasks and applies the machine's response effects.

At most one response is active. ``start`` runs a :class:`~openab_voice.engine.runner.ResponseRunner`
task with a fresh :class:`~openab_voice.engine.handle.SpeechHandle`; ``interrupt`` (output stopped
first), ``commit`` and ``discard`` settle it exactly once. ``prepare`` runs a response for a turn not
yet confirmed under a :class:`~openab_voice.engine.hold.Hold` (silent, no tools); ``start`` adopts it
only when the confirmed turn asks exactly the same. Settling writes the context (the user turn, then
only the heard assistant text) and publishes ``BotUtteranceFinished``; only the conversation's
effect dispatcher calls these. In detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.engine.context import ShortTermContext, UserUtterance
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.hold import Hold
from openab_voice.engine.response import ResponseDeps, ResponseRequest
from openab_voice.engine.runner import ResponseRunner
from openab_voice.engine.state import (
    DialogueInput,
    DiscardResponse,
    InterruptResponse,
    StartResponse,
)
from openab_voice.tasks import TaskOwner

__all__ = ["PreparedResponse", "ResponseSupervisor"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedResponse:
    """A response decided on, waiting for the machine's ``StartResponse``.

    Attributes:
        user: the new user turn (recorded in context when the response settles); None on a resume.
        replay: sentences to say again instead of generating (a resume).
        eou_at: end of the user's speech, for ``eou_to_first_audio_ms``.
        audio_start: start of the user's speech (an engine fed the turn's audio takes it from here).
        speaker_id: who asked.
        cause: what must still hold for it to be said (an announcement's); None: always.
        labels: names a reply may wrongly start with (``"Alice:"``), stripped from what is spoken.
        own_name: the bot's name (stripped likewise; a reply that is only this name says nothing).
        recall: recall long-term memory for the turn (False: the retry after a failed recall).
        exact: the words are a status line and must be said exactly as written: an engine whose
            model voice is not exact (a realtime model asked to "say exactly ...") says them with its
            exact voice (TTS) instead.
    """

    user: UserUtterance | None
    replay: tuple[str, ...] = ()
    eou_at: float | None = None
    audio_start: float | None = None
    speaker_id: str | None = None
    cause: SpeechCause | None = None
    labels: tuple[str, ...] = ()
    own_name: str | None = None
    recall: bool = True
    exact: bool = False


@dataclass(slots=True)
class _Active:
    handle: SpeechHandle
    user: UserUtterance | None
    settled: bool = False


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A response running ahead of its turn, held; ``key`` is what it answers."""

    key: str
    request: ResponseRequest
    handle: SpeechHandle
    hold: Hold


class ResponseSupervisor:
    """Starts, interrupts and settles responses; owns their tasks.

    Args:
        deps: providers and limits shared by every response.
        context: the conversation's short-term context (written only when a response settles).
        report: where a runner's state-machine inputs go (the manager's inbox).
    """

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        context: ShortTermContext,
        report: Callable[[DialogueInput], None],
    ) -> None:
        self._d = deps
        self._context = context
        self._report = report
        self._cancel_timeout_s = deps.settings.cancel_timeout_s
        self._active: _Active | None = None
        self._ahead: _Prepared | None = None
        self._tasks = TaskOwner("response supervisor")

    @property
    def output(self) -> SpeechOutput:
        return self._d.output

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        request = self._request(prepared)
        ahead, self._ahead = self._ahead, None
        if ahead is not None and _same_ask(ahead.request, request):
            ahead.handle.assign(response_id=effect.response_id, turn_id=effect.turn_id)
            self._active = _Active(handle=ahead.handle, user=prepared.user)
            ahead.hold.release(eou_at=prepared.eou_at)
            return
        if ahead is not None:
            self._drop(ahead)
        handle = SpeechHandle(response_id=effect.response_id, turn_id=effect.turn_id, output=self._d.output)
        self._run(request, handle, hold=None)
        self._active = _Active(handle=handle, user=prepared.user)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        """Run the response ``prepared`` describes ahead of its turn, held (replaces one held before).

        Args:
            key: what it answers (an utterance id): :meth:`drop_prepared` with it drops it.
            prepared: as for :meth:`start`; its ``eou_at`` is ignored (the confirmed turn's counts).
        """
        self.drop_prepared()
        request = self._request(prepared)
        handle = SpeechHandle(response_id=f"ahead-{key}", turn_id=f"ahead-{key}", output=self._d.output)
        hold = Hold()
        self._run(request, handle, hold=hold)
        self._ahead = _Prepared(key=key, request=request, handle=handle, hold=hold)

    def drop_prepared(self, key: str | None = None) -> None:
        """Drop the held response (only if it answers ``key``, when given); nothing of it was said."""
        ahead = self._ahead
        if ahead is not None and (key is None or ahead.key == key):
            self._ahead = None
            self._drop(ahead)

    @property
    def prepared_key(self) -> str | None:
        """What the held response answers (None: none is held)."""
        return None if self._ahead is None else self._ahead.key

    def _request(self, prepared: PreparedResponse) -> ResponseRequest:
        return ResponseRequest(
            messages=tuple(self._context.messages(prepared.user)),
            replay=prepared.replay,
            generate=not prepared.replay,
            eou_at=prepared.eou_at,
            speaker_id=prepared.speaker_id,
            cause=prepared.cause,
            labels=prepared.labels,
            own_name=prepared.own_name,
            recall=prepared.recall,
        )

    def _run(self, request: ResponseRequest, handle: SpeechHandle, *, hold: Hold | None) -> None:
        runner = ResponseRunner(deps=self._d, request=request, handle=handle, report=self._report, hold=hold)
        handle.bind_task(self._tasks.spawn(runner.run(), name=f"response-{handle.response_id}"))

    def _drop(self, ahead: _Prepared) -> None:
        log.debug("dropped the response prepared for %s", ahead.key)
        ahead.handle.interrupt()  # nothing reached the output: this only cancels its task

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        """Cut the response; returns its (settled) handle, or None when it is not the active one."""
        active = self._take(effect.response_id)
        if active is None:
            return None
        handle = active.handle
        handle.interrupt()
        if effect.barge_in is not None:
            now = self._d.clock.monotonic()
            self._d.bus.publish(
                LatencyMeasured(
                    at=now,
                    session_id=self._d.session_id,
                    metric="barge_in_ms",
                    value_ms=(now - effect.barge_in.audio_time) * 1000.0,
                    speaker_id=effect.barge_in.speaker_id,
                    turn_id=handle.turn_id,
                )
            )
        if not await handle.wait_closed(self._d.clock, self._cancel_timeout_s):
            log.warning(
                "response %s did not unwind within %.1f s", handle.response_id, self._cancel_timeout_s
            )
        self._settle(active, discard=False)
        return handle

    def commit(self, response_id: str) -> SpeechHandle | None:
        """Settle the response that ended on its own; returns its handle (None: not the active one)."""
        active = self._take(response_id)
        if active is None:
            return None
        self._settle(active, discard=False)
        return active.handle

    @property
    def active_id(self) -> str | None:
        """The active response (None: none is)."""
        return None if self._active is None else self._active.handle.response_id

    async def discard(self, effect: DiscardResponse) -> None:
        active = self._take(effect.response_id)
        if active is not None:
            active.handle.interrupt()  # a failed response's queued audio stops too
            await active.handle.wait_closed(self._d.clock, self._cancel_timeout_s)
            self._settle(active, discard=True)
        self._d.bus.publish(
            ErrorRaised(
                at=self._d.clock.monotonic(),
                session_id=self._d.session_id,
                code=effect.code,
                message=effect.message,
                retryable=effect.retryable,
                details={"response_id": effect.response_id},
            )
        )

    async def aclose(self) -> None:
        """Cancel every response task still alive (one that outlived its bound) and wait for them."""
        self.drop_prepared()
        await self._tasks.aclose()

    def _take(self, response_id: str) -> _Active | None:
        active = self._active
        if active is None or active.handle.response_id != response_id:
            return None
        return active

    def _settle(self, active: _Active, *, discard: bool) -> None:
        """Commit what was heard (nothing when ``discard``) and report the utterance; once per response."""
        if active.settled:
            return
        active.settled = True
        if self._active is active:
            self._active = None
        handle = active.handle
        heard = "" if discard else handle.heard_text()
        if not discard:
            if active.user is not None:
                self._context.record_turn(active.user)
            self._context.record_heard(handle.turn_id, heard)
        self._d.bus.publish(
            BotUtteranceFinished(
                at=self._d.clock.monotonic(),
                session_id=self._d.session_id,
                turn_id=handle.turn_id,
                text=handle.text,
                spoken_text=heard,
                interrupted=discard or handle.interrupted,
            )
        )


def _same_ask(ahead: ResponseRequest, now: ResponseRequest) -> bool:
    """A response prepared ahead answers the confirmed turn: the model was asked the same, and what
    is stripped from its reply is the same."""
    return (
        ahead.generate
        and now.generate
        and ahead.messages == now.messages
        and ahead.labels == now.labels
        and ahead.own_name == now.own_name
    )
