"""The response subgraph: chat model -> sentence segmenter -> TTS -> output, with tool rounds.

One :class:`ResponseRunner` per response, run as one task the conversation manager owns. Inside, a
task group runs two children joined by a sentence queue:

* **generate** streams the model; each completed sentence goes to the handle and the queue at once.
  A tool call ends the round: the tool runs through the tool path, its result goes back to the
  model as a tool message, and the next round continues the answer.
* **speak** takes sentences in order, synthesizes each, and writes its audio to the output in whole
  20 ms frames as chunks arrive, so playback starts with the first chunk of the first sentence
  while the model is still writing. Then it waits for the output to finish playing.

A response with a cause (:mod:`~openab_voice.engine.expiry`) checks it before each sentence's
synthesis and before its first frame, and follows it while it plays when the cause can be watched;
once it expired nothing more is said (``SpeechDropped``), and a line playing is cut.

Progress goes back to the manager as state-machine inputs (``AudioStarted``, ``ToolStarted``,
``ToolFinished``, then exactly one ``ResponseFinished`` or ``ResponseFailed``). Cancelling the task
cancels both children; the model stream and every TTS stream are closed on the way out
(``aclose``), so nothing keeps generating after an interruption. Latency samples are published
here: ``tts_first_chunk_ms`` per sentence, ``eou_to_first_audio_ms`` once per answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.context import MemoryRecall, with_memory
from openab_voice.engine.events import LatencyMeasured, ToolCallHandled
from openab_voice.engine.expiry import SpeechCause, publish_dropped
from openab_voice.engine.handle import PlayedPosition, SpeechHandle, SpeechOutput, frames_for
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import (
    AudioStarted,
    DialogueInput,
    ResponseFailed,
    ResponseFinished,
    ToolFinished,
    ToolStarted,
)
from openab_voice.errors import OpenabError
from openab_voice.providers.speech import (
    ChatDone,
    ChatMessage,
    ChatModel,
    TextDelta,
    TextToSpeech,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.tools.registry import ToolContext
from openab_voice.tools.router import ToolRouter

__all__ = [
    "MEMORY_RECALL_FAILED",
    "Hold",
    "ResponseDeps",
    "ResponseError",
    "ResponseRequest",
    "ResponseRunner",
    "ToolPath",
]

log = logging.getLogger(__name__)

_Progress = AudioStarted | ToolStarted | ToolFinished | ResponseFinished | ResponseFailed

_WRITE_FRAMES = 10  # 200 ms of audio per write to the output
# The first synthesis unit may end at a clause boundary this far in ("Paris is the capital of France,"),
# so the first audio does not wait for a long first sentence's synthesis; shorter pieces ("Well,")
# wait for more, so a unit is never a lone word.
FIRST_CLAUSE_CHARS = 16


ToolPath: TypeAlias = ToolRouter
"""The one tool path: the :class:`~openab_voice.tools.router.ToolRouter` (budgets, truncation, audit;
off, it runs nothing). A bare :class:`~openab_voice.tools.registry.ToolRegistry` is not one (ADR 0011)."""


MEMORY_RECALL_FAILED = "MEMORY_RECALL_FAILED"
"""The code a response fails with when long-term memory could not be recalled for its turn."""


class ResponseError(OpenabError):
    """A provider failed while a response ran; ``stage`` is ``llm``, ``tts``, ``playback``, ``tools`` or ``memory``."""

    code = "ENGINE_RESPONSE_FAILED"
    retryable = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseDeps:
    """What every response of one conversation shares."""

    bus: EventBus
    clock: Clock
    chat: ChatModel | None  # None: the voice only says given lines (the realtime engine's exact voice)
    tts: TextToSpeech
    output: SpeechOutput
    tools: ToolPath
    settings: DialogueSettings
    session_id: str | None
    memory: MemoryRecall | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseRequest:
    """One response to run.

    Attributes:
        messages: the model request (system prompt, context, the new user turn).
        replay: sentences to say first (a resume after a false interruption).
        generate: run the model (False for a pure replay).
        eou_at: end of the user's speech, for ``eou_to_first_audio_ms`` (None for a resume).
        speaker_id: the user who asked.
        cause: what must still hold for the speech to be said; checked before each sentence's
            synthesis and before the first frame goes out (None: always true).
        labels: speaker names a model may start its reply with (``"Alice:"``); the segmenter
            strips them.
        own_name: the bot's name (its wake name): stripped as a label or vocative, and a reply
            that is only this name is not said.
        recall: recall long-term memory for the turn (False: answer without it).
    """

    messages: tuple[ChatMessage, ...]
    replay: tuple[str, ...] = ()
    generate: bool = True
    eou_at: float | None = None
    speaker_id: str | None = None
    cause: SpeechCause | None = None
    labels: tuple[str, ...] = ()
    own_name: str | None = None
    recall: bool = True


class Hold:
    """Holds a response prepared ahead of its turn (preemptive generation) until it is released.

    While held, the response generates and synthesizes, but nothing reaches the output, no tool
    runs, and its reports and latency figures wait; :meth:`release` (the turn was confirmed) lets
    them all through in order. A hold never released is dropped with its task: nothing was said.
    """

    def __init__(self) -> None:
        self._released = asyncio.Event()
        self._on_release: list[Callable[[], None]] = []
        self.eou_at: float | None = None

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def release(self, *, eou_at: float | None) -> None:
        """The turn is confirmed: ``eou_at`` is the end of the speech it answers."""
        if self._released.is_set():
            return
        self.eou_at = eou_at
        callbacks, self._on_release = self._on_release, []
        for callback in callbacks:
            callback()
        self._released.set()

    def on_release(self, callback: Callable[[], None]) -> None:
        self._on_release.append(callback)

    async def wait(self) -> None:
        await self._released.wait()


class _Expired(Exception):  # noqa: N818 - a signal inside the runner, never raised out of it
    """The response's cause no longer holds: stop before more of it is synthesized or played."""

    def __init__(self, index: int, point: str, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.point = point
        self.reason = reason


class _Withdrawn(_Expired):
    """A watched cause expired while the response was still being synthesized or handed to the
    output: what was in progress is abandoned and the output cut at once."""


@contextlib.contextmanager
def _stage(stage: str) -> Iterator[None]:
    """Turn a provider's failure into a :class:`ResponseError` naming the stage (never cancellation)."""
    try:
        yield
    except (ResponseError, _Expired):
        raise
    except Exception as exc:
        code = exc.code if isinstance(exc, OpenabError) else f"{stage.upper()}_FAILED"
        raise ResponseError(f"{stage}: {type(exc).__name__}: {exc}", code=code, stage=stage) from exc


async def _close(iterator: AsyncIterator[Any]) -> None:
    """``aclose`` an async generator (stops synthesis / generation); plain iterators have none."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


def _first_error(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class ResponseRunner:
    """Runs one response; see the module docstring.

    Args:
        deps: shared providers and limits.
        request: what to say or generate.
        handle: the response's speech handle (sentences, audio, position).
        report: called with each state-machine input, in order (puts it in the manager's inbox).
        hold: set for a response prepared ahead of its turn (see :class:`Hold`).
    """

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        request: ResponseRequest,
        handle: SpeechHandle,
        report: Callable[[DialogueInput], None],
        hold: Hold | None = None,
    ) -> None:
        self._d = deps
        self._request = request
        self._handle = handle
        self._send = report
        self._hold = hold
        self._held: list[_Progress | tuple[str, float, float]] = []  # waiting for the release
        if hold is not None:
            hold.on_release(self._released)
        self._sentences = 0
        self._started: set[int] = set()
        self._first_audio = False
        self._generator: asyncio.Task[None] | None = None

    def _report(self, item: _Progress) -> None:
        if self._hold is not None and not self._hold.released:
            self._held.append(item)
        else:
            self._send(item)

    def _released(self) -> None:
        """The hold was released and the handle renamed: what waited goes out under the turn's ids."""
        held, self._held = self._held, []
        for item in held:
            if isinstance(item, tuple):
                self._publish_latency(*item)
            else:
                self._send(dataclasses.replace(item, response_id=self._handle.response_id))

    @property
    def _eou_at(self) -> float | None:
        return self._request.eou_at if self._hold is None else self._hold.eou_at

    async def _on_hold(self) -> None:
        """Before the first audio or tool call of a held response: wait for its release."""
        if self._hold is not None:
            await self._hold.wait()

    async def run(self) -> None:
        try:
            position = await self._pipeline()
        except Exception as exc:  # CancelledError is not an Exception: it propagates
            err = _first_error(exc)
            code = err.code if isinstance(err, OpenabError) else ResponseError.code
            retryable = err.retryable if isinstance(err, OpenabError) else True
            rid = self._handle.response_id
            log.warning("response %s failed: %s", rid, err)
            self._report(ResponseFailed(response_id=rid, code=code, message=str(err), retryable=retryable))
            return
        interrupted = False
        if position is not None:
            self._handle.mark_played(position)
            interrupted = position.interrupted
        self._report(ResponseFinished(response_id=self._handle.response_id, interrupted=interrupted))

    async def _pipeline(self) -> PlayedPosition | None:
        queue: asyncio.Queue[int | None] = asyncio.Queue()
        async with asyncio.TaskGroup() as group:
            self._generator = group.create_task(
                self._generate(queue), name=f"generate-{self._handle.response_id}"
            )
            speak = group.create_task(self._speak(queue), name=f"speak-{self._handle.response_id}")
        return speak.result()

    # --- generate ------------------------------------------------------------------------------

    async def _generate(self, queue: asyncio.Queue[int | None]) -> None:
        more = all(self._emit(queue, text) for text in self._request.replay)
        if more and self._request.generate:
            await self._converse(queue)
        self._handle.generation_done()
        queue.put_nowait(None)

    def _emit(self, queue: asyncio.Queue[int | None], text: str) -> bool:
        """Queue a sentence; False once the sentence budget is spent (the model is then stopped)."""
        if self._sentences >= self._d.settings.max_response_sentences:
            return False
        self._sentences += 1
        queue.put_nowait(self._handle.add_sentence(text))
        return self._sentences < self._d.settings.max_response_sentences

    async def _converse(self, queue: asyncio.Queue[int | None]) -> None:
        chat = self._d.chat
        if chat is None:
            raise ResponseError("this voice has no chat model: it says only given lines", stage="llm")
        messages = await self._recalled(list(self._request.messages))
        specs = list(self._d.tools.specs()) if chat.capabilities.tools else []
        for round_no in range(self._d.settings.max_tool_rounds + 1):
            text, calls, more = await self._stream_round(chat, messages, specs, queue)
            if not calls or not more:
                return
            if round_no == self._d.settings.max_tool_rounds:
                log.warning("response %s: tool round limit reached", self._handle.response_id)
                return
            messages.append(ChatMessage(role="assistant", content=text, tool_calls=tuple(calls)))
            for call in calls:
                messages.append(await self._run_tool(call))

    async def _recalled(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """The request with the turn's long-term memory, when there is memory and a user turn."""
        memory = self._d.memory
        if memory is None or not self._request.recall or not messages or messages[-1].role != "user":
            return messages
        try:
            lines = await memory.recall(speaker_id=self._request.speaker_id, text=messages[-1].content)
        except Exception as exc:
            # A recoverable memory error: the response fails (recovering), and the conversation
            # answers the turn again without memory, rather than not at all.
            cause = exc.code if isinstance(exc, OpenabError) else type(exc).__name__
            raise ResponseError(f"memory: {cause}: {exc}", code=MEMORY_RECALL_FAILED, stage="memory") from exc
        return with_memory(messages, lines)

    async def _stream_round(
        self,
        chat: ChatModel,
        messages: list[ChatMessage],
        specs: list[ToolSpec],
        queue: asyncio.Queue[int | None],
    ) -> tuple[str, list[ToolCall], bool]:
        """One model call: (its text, its tool calls, whether more sentences may follow)."""
        segmenter = SentenceSegmenter(
            labels=self._request.labels,
            own_name=self._request.own_name,
            first_clause_chars=FIRST_CLAUSE_CHARS,
        )
        parts: list[str] = []
        calls: list[ToolCall] = []
        with _stage("llm"):
            stream = chat.stream(messages, tools=specs)
            try:
                async for event in stream:
                    match event:
                        case TextDelta():
                            parts.append(event.text)
                            if not all(self._emit(queue, s) for s in segmenter.push(event.text)):
                                return "".join(parts), calls, False
                        case ToolCallRequested():
                            calls.append(event.call)
                        case ChatDone():
                            pass
                        case _:
                            assert_never(event)
            finally:
                await _close(stream)
        more = all(self._emit(queue, s) for s in segmenter.flush())
        return "".join(parts), calls, more

    async def _run_tool(self, call: ToolCall) -> ChatMessage:
        await self._on_hold()  # a tool may act: never on a turn not yet confirmed
        rid = self._handle.response_id
        self._report(ToolStarted(response_id=rid, name=call.name))
        with _stage("tools"):
            context = ToolContext(
                session_id=self._d.session_id,
                turn_id=self._handle.turn_id,
                speaker_id=self._request.speaker_id,
            )
            result = await self._d.tools.call(call, context)
        summary: dict[str, Any] = (
            {"content": result.content}
            if result.ok
            else {"error": result.error_code, "reason": result.reason}
        )
        self._d.bus.publish(
            ToolCallHandled(
                at=self._d.clock.monotonic(),
                session_id=self._d.session_id,
                turn_id=self._handle.turn_id,
                name=call.name,
                ok=result.ok,
                result=summary,
            )
        )
        self._report(ToolFinished(response_id=rid, name=call.name, ok=result.ok))
        return ChatMessage(role="tool", content=result.to_json(), tool_call_id=call.id, name=call.name)

    # --- speak ---------------------------------------------------------------------------------

    async def _speak(self, queue: asyncio.Queue[int | None]) -> PlayedPosition | None:
        with self._watching() as withdrawn:
            try:
                await self._say_all(queue, withdrawn)
            except _Withdrawn as cut:
                if self._handle.utterance_id is None:  # nothing of it reached the output
                    self._dropped(_Expired(cut.index, "before_audio", cut.reason))
                else:
                    if self._generator is not None:
                        self._generator.cancel()
                    self._withdraw()  # even when what was handed over already played out
            except _Expired as expired:
                self._dropped(expired)
            uid = self._handle.utterance_id
            if uid is None:
                return None  # nothing was said
            with _stage("playback"):
                # Shielded: cancelling this task must not cancel the output's own future (the output
                # resolves it with the played position when it is interrupted).
                played = asyncio.shield(self._d.output.finish(uid))
                if withdrawn is not None:
                    waiter = asyncio.ensure_future(withdrawn.wait())
                    either: set[asyncio.Future[Any]] = {played, waiter}
                    try:
                        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        waiter.cancel()
                    if not played.done():
                        self._withdraw()
                return await played

    async def _say_all(self, queue: asyncio.Queue[int | None], withdrawn: asyncio.Event | None) -> None:
        """Say each sentence as it comes; with a watched cause, race them against its expiry, so a
        sentence still being synthesized, or waiting on a full output buffer, is abandoned at once
        (:class:`_Withdrawn`) instead of holding the cut back until it was all handed over."""
        if withdrawn is None:
            while (index := await queue.get()) is not None:
                await self._say(index)
            return
        saying = asyncio.ensure_future(self._say_all(queue, None))
        waiter = asyncio.ensure_future(withdrawn.wait())
        try:
            await asyncio.wait({saying, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not saying.done():
                if withdrawn.is_set() and self._handle.utterance_id is not None:
                    # The sound stops now: closing the TTS stream below may wait out a synthesis.
                    self._d.output.interrupt()
                saying.cancel()
                await asyncio.wait({saying})  # its own clean-up runs before the cut is reported
        if not saying.cancelled():
            saying.result()  # finished first: its own outcome (an _Expired, an error)
            return
        reason = self._request.cause.reason() if self._request.cause is not None else None
        raise _Withdrawn(len(self._started), "playing", reason or "expired")

    @contextlib.contextmanager
    def _watching(self) -> Iterator[asyncio.Event | None]:
        """While the response speaks, an event set once its cause reports that it expired (None when
        the cause cannot be watched)."""
        cause = self._request.cause
        if cause is None or cause.watch is None:
            yield None
            return
        expired = asyncio.Event()

        def changed() -> None:
            if cause.reason() is not None:
                expired.set()

        unwatch = cause.watch(changed)
        try:
            yield expired
        finally:
            unwatch()

    def _withdraw(self) -> None:
        """The cause expired while its speech played: cut the output now (the played position comes
        back through ``finish``, as after a barge-in) and say what was cut."""
        reason = self._request.cause.reason() if self._request.cause is not None else None
        self._d.output.interrupt()
        publish_dropped(
            self._d.bus,
            self._d.clock,
            session_id=self._d.session_id,
            turn_id=self._handle.turn_id,
            text=self._handle.text,
            cause=self._request.cause,
            reason=reason or "expired",
            point="playing",
        )

    def _check(self, index: int, point: str) -> None:
        """Raise :class:`_Expired` when the response's cause no longer holds (at sentence ``index``)."""
        cause = self._request.cause
        reason = cause.reason() if cause is not None else None
        if reason is not None:
            raise _Expired(index, point, reason)

    def _dropped(self, expired: _Expired) -> None:
        """Nothing more of this response is said: stop the model, tell the bus what was dropped.

        What already reached the output (an earlier sentence) still plays out: it was true then.
        """
        if self._generator is not None:
            self._generator.cancel()
        unsaid = [self._handle.sentence(i) for i in range(expired.index, self._sentences)]
        log.info("response %s dropped at %s: %s", self._handle.response_id, expired.point, expired.reason)
        publish_dropped(
            self._d.bus,
            self._d.clock,
            session_id=self._d.session_id,
            turn_id=self._handle.turn_id,
            text=" ".join(unsaid),
            cause=self._request.cause,
            reason=expired.reason,
            point=expired.point,
        )

    async def _say(self, index: int) -> None:
        self._check(index, "before_synthesis")
        text = self._handle.sentence(index)
        sent_at = self._d.clock.monotonic()
        pending = b""
        first = True
        with _stage("tts"):
            stream = self._d.tts.synthesize(text)
            try:
                async for chunk in stream:
                    if first:
                        first = False
                        self._latency("tts_first_chunk_ms", sent_at)
                    pending += chunk
                    whole = len(pending) - len(pending) % DISCORD_FRAME_BYTES
                    if whole:
                        await self._write(index, pending[:whole])
                        pending = pending[whole:]
            finally:
                await _close(stream)
        if pending:
            await self._write(index, pending)  # the sentence's short last frame (padded by the output)
        self._handle.complete_sentence(index)

    async def _write(self, index: int, pcm: bytes) -> None:
        # Hand audio over in short pieces: the output's write waits while its buffer is full, and a
        # whole sentence (Piper yields one chunk per sentence) can be longer than that buffer. The
        # state must say "speaking" from the first frame queued, not once the sentence fits.
        step = _WRITE_FRAMES * DISCORD_FRAME_BYTES
        for start in range(0, len(pcm), step):
            piece = pcm[start : start + step]
            with _stage("playback"):
                uid = self._handle.utterance_id
                if uid is None:
                    await self._on_hold()
                    # The last moment to take it back: nothing of it has reached the listeners yet.
                    self._check(index, "before_audio")
                    uid = self._d.output.begin()
                    self._handle.bind_utterance(uid)
                self._handle.add_frames(index, frames_for(len(piece)))
                await self._d.output.write(uid, piece)
            if index not in self._started:
                self._started.add(index)
                self._report(AudioStarted(response_id=self._handle.response_id))
            if not self._first_audio:
                self._first_audio = True
                if self._eou_at is not None:
                    self._latency("eou_to_first_audio_ms", self._eou_at)

    def _latency(self, metric: str, since: float) -> None:
        now = self._d.clock.monotonic()
        if self._hold is not None and not self._hold.released:
            self._held.append((metric, (now - since) * 1000.0, now))  # published with the turn's id
        else:
            self._publish_latency(metric, (now - since) * 1000.0, now)

    def _publish_latency(self, metric: str, value_ms: float, at: float) -> None:
        self._d.bus.publish(
            LatencyMeasured(
                at=at,
                session_id=self._d.session_id,
                metric=metric,
                value_ms=value_ms,
                speaker_id=self._request.speaker_id,
                turn_id=self._handle.turn_id,
            )
        )
