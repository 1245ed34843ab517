"""How the loopback Live voice speaks: ``session.output_audio.delta`` and ``output_transcript.delta``.

A reply is synthesized sentence by sentence (:class:`~openab_voice.testing.realtime.speech.Voice`)
and sent in ``chunk_ms`` pieces paced on the injected clock
(:class:`~openab_voice.testing.realtime.pacing.Pacer`, the realtime loopback's schedule). Audio
deltas carry only ``delta`` (the session's PCM format; no ``start_ms`` / ``end_ms``, no ids, as on
the primary socket); each word's transcript delta goes out with the chunk its audio starts in,
with ``start_ms`` / ``end_ms`` on the session timeline. The output's place on the timeline: it
starts when its first chunk goes, no earlier than the end of the speech it answers nor than the end
of the output before it.

There is no done event (the API has none). A stop (a barge-in, a fixture, the session closing)
ends the reply before its next event; :class:`Spoken` keeps what was sent.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import soxr
from openai.types.live import OutputAudioDeltaEvent, OutputTranscriptDeltaEvent

from openab_voice.clock import Clock
from openab_voice.errors import ReplyStopped
from openab_voice.testing.live.wire import ServerEvent, new_id
from openab_voice.testing.realtime.conversation import TimedWord, audio_ms
from openab_voice.testing.realtime.pacing import Pacer, Pacing, split_sentences, timed_words
from openab_voice.testing.realtime.speech import Voice

__all__ = [
    "SendEvent",
    "Speaker",
    "Spoken",
    "SpokenSource",
    "Stop",
    "StopReason",
    "from_pcm24",
    "race",
    "to_pcm24",
]

T = TypeVar("T")
PCM24 = 24_000
StopReason = Literal["barge_in", "fixture", "closed"]
SpokenSource = Literal["turn", "commentary", "backend", "acknowledgement"]


class SendEvent(Protocol):
    """The session's sender (``audio_ms_after``: the reply's audio sent once this event is out)."""

    async def __call__(self, event: ServerEvent, *, audio_ms_after: float = 0.0) -> None: ...


@dataclass(slots=True, kw_only=True)
class Spoken:
    """One reply the voice spoke (or began to), for tests.

    Attributes:
        text: what it was to say.
        source: why: ``turn`` (a user speech), ``commentary`` (a client delegation's result),
            ``backend`` (a Responses delegation's output), ``acknowledgement`` (of a delegation).
        start_ms: where its audio starts on the session timeline (None until the first chunk).
        audio_ms_sent: how much of its audio went out.
        words_sent: the words whose transcript went out.
        status: ``speaking``, ``completed``, or ``stopped`` (then ``stop_reason`` says why).
    """

    text: str
    source: SpokenSource
    start_ms: int | None = None
    audio_ms_sent: float = 0.0
    words_sent: list[str] = field(default_factory=list)
    status: Literal["speaking", "completed", "stopped"] = "speaking"
    stop_reason: StopReason | None = None

    @property
    def transcript_sent(self) -> str:
        return " ".join(self.words_sent)


class Stop:
    """A reply's stop signal and why it was given."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason: StopReason | None = None

    def set(self, reason: StopReason) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()

    def check(self) -> None:
        if self.event.is_set():
            raise ReplyStopped


async def race(stop: Stop, start: Callable[[], Awaitable[T]]) -> T:
    """``await start()`` unless ``stop`` comes first (then what ran is cancelled and awaited).

    ``start`` is called only once the race is on, so a stop that came first leaves no coroutine
    unawaited.

    Raises:
        ReplyStopped: the stop came first.
    """
    stop.check()
    task = asyncio.ensure_future(start())
    stopper = asyncio.ensure_future(stop.event.wait())
    contenders: set[asyncio.Future[Any]] = {task, stopper}
    try:
        await asyncio.wait(contenders, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in contenders:
            future.cancel()
        await asyncio.wait(contenders)
    if task.cancelled() or not task.done():
        raise ReplyStopped
    return task.result()


def to_pcm24(pcm: bytes, rate: int) -> bytes:
    """Mono PCM16 at ``rate`` -> 24 kHz (the loopback's ears and voice work at 24 kHz)."""
    return pcm if rate == PCM24 else _resample(pcm, rate, PCM24)


def from_pcm24(pcm: bytes, rate: int) -> bytes:
    """24 kHz mono PCM16 -> ``rate``."""
    return pcm if rate == PCM24 else _resample(pcm, PCM24, rate)


def _resample(pcm: bytes, from_rate: int, to_rate: int) -> bytes:
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2")
    out: Any = soxr.resample(samples, from_rate, to_rate)
    return np.asarray(out, dtype="<i2").tobytes()


class Speaker:
    """The session's voice: streams replies and keeps the output's place on the timeline.

    Args:
        send: the session's sender.
        voice: TTS (24 kHz).
        clock: paces the audio.
        pacing: chunk size, first-audio latency, real-time factor.
        timeline: the session timeline now, in ms.
        rate: the session's PCM rate now.
    """

    def __init__(
        self,
        *,
        send: SendEvent,
        voice: Voice,
        clock: Clock,
        pacing: Pacing,
        timeline: Callable[[], float],
        rate: Callable[[], int],
    ) -> None:
        self._send = send
        self._voice = voice
        self._clock = clock
        self._pacing = pacing
        self._timeline = timeline
        self._rate = rate
        self.end_ms = 0.0  # where the output sent so far ends on the timeline

    async def speak(self, spoken: Spoken, stop: Stop, *, started_at: float, not_before_ms: float) -> None:
        """Stream ``spoken.text``; ``started_at`` (clock seconds) is when the reply was decided.

        Raises:
            ReplyStopped: ``stop`` was given (``spoken`` says what went out).
        """
        pacer = Pacer(self._pacing, started_at=started_at)
        chunk_bytes = self._pacing.chunk_ms * PCM24 // 1000 * 2
        offset = 0.0  # where this sentence's audio starts in the reply
        origin: float | None = None
        for sentence in split_sentences(spoken.text):
            pcm = await race(stop, partial(self._voice.synthesize, sentence))
            words = timed_words(sentence, offset, audio_ms(pcm))
            for start in range(0, len(pcm), chunk_bytes):
                chunk = pcm[start : start + chunk_bytes]
                chunk_start = offset + audio_ms(pcm[:start])
                chunk_end = chunk_start + audio_ms(chunk)
                await race(stop, partial(self._pace, pacer, chunk_start))
                if origin is None:
                    origin = max(self._timeline(), self.end_ms, not_before_ms)
                    spoken.start_ms = round(origin)
                due = [w for w in words if w[0] < chunk_end]
                words = words[len(due) :]
                await self._words(spoken, stop, due, origin)
                stop.check()
                delta = base64.b64encode(from_pcm24(chunk, self._rate())).decode("ascii")
                await self._send(
                    OutputAudioDeltaEvent(type="session.output_audio.delta", delta=delta),
                    audio_ms_after=chunk_end,
                )
                spoken.audio_ms_sent = chunk_end
                self.end_ms = origin + chunk_end
            await self._words(spoken, stop, words, origin if origin is not None else self._place())
            offset += audio_ms(pcm)
        spoken.status = "completed"

    def _place(self) -> float:
        return max(self._timeline(), self.end_ms)

    async def _pace(self, pacer: Pacer, position_ms: float) -> None:
        # The delay is read when the sleep starts: read earlier, a clock advanced in between would
        # push the deadline later than due.
        await self._clock.sleep(pacer.delay(position_ms, self._clock.monotonic()))

    async def _words(
        self, spoken: Spoken, stop: Stop, words: list[tuple[float, TimedWord]], origin: float
    ) -> None:
        for start, word in words:
            stop.check()
            await self._send(
                OutputTranscriptDeltaEvent(
                    type="session.output_transcript.delta",
                    event_id=new_id("event"),
                    delta=word.text if not spoken.words_sent else " " + word.text,
                    start_ms=round(origin + start),
                    end_ms=round(origin + word.end_ms),
                )
            )
            spoken.words_sent.append(word.text)
