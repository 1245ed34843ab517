"""What the loopback Live model does with what it hears: turns, replies and server barge-in.

At the end of each speech (:class:`~.floor.Utterance`) the session's STT transcribes it, the
transcript goes out as ``session.input_transcript.delta`` events (one per word, spread over the
speech on the session timeline), the responder is asked and its reply is spoken
(:class:`~.speaking.Speaker`) or delegated. Replies (and lines said for a delegation) are spoken one
after another, in the order they were decided.

Speech heard while a reply is being decided or spoken is a barge-in: every reply in progress or
waiting stops before its next event (what went out is kept in its :class:`~.speaking.Spoken`; the
words sent stay in the model's context, as there is no truncation in Live). What was heard is
transcribed and kept whatever happens; only deciding and speaking are cut.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from openai.types.live import InputTranscriptDeltaEvent, SessionResource
from websockets.exceptions import ConnectionClosed

from openab_voice.clock import Clock
from openab_voice.errors import ConnectionDropped, ReplyStopped
from openab_voice.tasks import TaskOwner
from openab_voice.testing.live.floor import Utterance
from openab_voice.testing.live.responder import (
    CallFunction,
    Conversation,
    Delegate,
    Line,
    LiveReply,
    LiveResponder,
    LiveTurn,
    Speak,
)
from openab_voice.testing.live.session_config import function_tools
from openab_voice.testing.live.speaking import (
    SendEvent,
    Speaker,
    Spoken,
    SpokenSource,
    Stop,
    StopReason,
    race,
)
from openab_voice.testing.live.wire import error_event, new_id
from openab_voice.testing.realtime.faults import Faults, ResponseFailure
from openab_voice.testing.realtime.pacing import timed_words
from openab_voice.testing.realtime.speech import Listener

__all__ = ["Dialogue", "TurnRecord"]


@dataclass(slots=True, kw_only=True)
class TurnRecord:
    """One user speech and what came of it, for tests (``*_ms`` on the session timeline)."""

    start_ms: int
    end_ms: int
    transcript: str | None = None
    turn: LiveTurn | None = None
    reply: LiveReply | None = None
    spoken: Spoken | None = None
    failure: ResponseFailure | None = None
    stopped: StopReason | None = None


class Dialogue:
    """Turns and replies of one session.

    Args:
        listener: the server's STT.
        responder: decides replies.
        faults: planned faults (a planned response failure becomes an ``error`` event).
        clock: the injected clock.
        send: the session's sender.
        speaker: the session's voice.
        conversation: the session's conversation.
        resource: the session now.
        timeline: the session timeline now, in ms.
        delegate: hands a delegating reply to the session's delegations (with its offset in ms).
        finished: called with each reply spoken to its end.
        changed: called when a reply ended (the session's waiters look again).
        tasks: the session's task owner.
    """

    def __init__(
        self,
        *,
        listener: Listener,
        responder: LiveResponder,
        faults: Faults,
        clock: Clock,
        send: SendEvent,
        speaker: Speaker,
        conversation: Conversation,
        resource: Callable[[], SessionResource],
        timeline: Callable[[], float],
        delegate: Callable[[CallFunction | Delegate, int], Awaitable[None]],
        finished: Callable[[Spoken], Awaitable[None]],
        changed: Callable[[], Awaitable[None]],
        tasks: TaskOwner,
    ) -> None:
        self._listener = listener
        self._responder = responder
        self._faults = faults
        self._clock = clock
        self._send = send
        self._speaker = speaker
        self._conversation = conversation
        self._resource = resource
        self._timeline = timeline
        self._delegate = delegate
        self._finished = finished
        self._changed = changed
        self._tasks = tasks
        self._replies: list[tuple[asyncio.Task[None], Stop]] = []
        self.turns: list[TurnRecord] = []
        self.spoken: list[Spoken] = []

    @property
    def active(self) -> bool:
        """Whether a reply is being decided, spoken or waiting to be spoken."""
        return bool(self._replies)

    @property
    def speaking(self) -> bool:
        """Whether the voice is in the middle of a reply (its audio started, not ended)."""
        return any(spoken.status == "speaking" and spoken.start_ms is not None for spoken in self.spoken)

    def stop_all(self, reason: StopReason) -> None:
        """Stop every reply in progress or waiting, before its next event."""
        for _, stop in self._replies:
            stop.set(reason)

    def heard(self, utterance: Utterance) -> None:
        """A speech ended: transcribe it and answer."""
        self._queue(partial(self._answer, utterance), "live-turn")

    def say(self, text: str, source: SpokenSource) -> None:
        """Have the voice say ``text`` (after what it is saying now)."""
        self._queue(partial(self._say, text, source), f"live-say-{source}")

    def _queue(self, work: Callable[[Stop], Awaitable[None]], name: str) -> None:
        previous = self._replies[-1][0] if self._replies else None
        stop = Stop()

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # one voice: replies are said in order
            with contextlib.suppress(ReplyStopped, ConnectionClosed, ConnectionDropped):
                await work(stop)
            await self._changed()  # a stop sends nothing: tests waiting on the session learn it here

        task = self._tasks.spawn(run(), name=name, on_done=self._forget)
        self._replies.append((task, stop))

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._replies = [entry for entry in self._replies if entry[0] is not task]

    async def _answer(self, utterance: Utterance, stop: Stop) -> None:
        record = TurnRecord(start_ms=utterance.start_ms, end_ms=utterance.end_ms)
        self.turns.append(record)
        started_at = self._clock.monotonic()
        text = await self._listener.transcribe(utterance.pcm)
        record.transcript = text
        await self._input_transcript(text, utterance)
        self._conversation.lines.append(Line(role="user", text=text))
        resource = self._resource()
        turn = self._conversation.turn(
            "speech", instructions=resource.instructions or "", tools=function_tools(resource)
        )
        record.turn = turn
        failure = record.failure = self._faults.take_failure()
        if failure is not None:
            return await self._send(
                error_event(type=failure.type, code=failure.code or "server_error", message=failure.message)
            )
        try:
            reply = record.reply = await race(stop, partial(self._responder.respond, turn))
            if isinstance(reply, Speak):
                spoken = record.spoken = Spoken(text=reply.text, source="turn")
                await self._speak(spoken, stop, started_at=started_at, not_before_ms=utterance.decided_ms)
            else:
                await self._delegate(reply, max(round(self._timeline()), utterance.decided_ms))
        except ReplyStopped:
            record.stopped = stop.reason
            raise

    async def _say(self, text: str, source: SpokenSource, stop: Stop) -> None:
        spoken = Spoken(text=text, source=source)
        await self._speak(spoken, stop, started_at=self._clock.monotonic(), not_before_ms=0.0)

    async def _speak(self, spoken: Spoken, stop: Stop, *, started_at: float, not_before_ms: float) -> None:
        self.spoken.append(spoken)
        try:
            await self._speaker.speak(spoken, stop, started_at=started_at, not_before_ms=not_before_ms)
        except ReplyStopped:
            spoken.status = "stopped"
            spoken.stop_reason = stop.reason
            raise
        finally:
            if spoken.words_sent:  # the model said them, heard or not: Live has no truncation
                self._conversation.lines.append(Line(role="assistant", text=spoken.transcript_sent))
        await self._finished(spoken)

    async def _input_transcript(self, text: str, utterance: Utterance) -> None:
        duration = max(0, utterance.end_ms - utterance.start_ms)
        for index, (start, word) in enumerate(timed_words(text, utterance.start_ms, duration)):
            await self._send(
                InputTranscriptDeltaEvent(
                    type="session.input_transcript.delta",
                    event_id=new_id("event"),
                    delta=word.text if index == 0 else " " + word.text,
                    start_ms=round(start),
                    end_ms=round(word.end_ms),
                )
            )
