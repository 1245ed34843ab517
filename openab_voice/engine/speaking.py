"""The speak half of a response: sentences to audio, and the cause checks that may stop it.

It takes sentences in order from the sentence queue (the generate half,
:mod:`~openab_voice.engine.generation`, fills it), synthesizes each, and writes its audio to the
output in whole 20 ms frames as chunks arrive, so playback starts with the first chunk of the first
sentence while the model is still writing. Then it waits for the output to finish playing.

A response with a cause (:mod:`~openab_voice.engine.expiry`) checks it before each sentence's
synthesis and before its first frame, and follows it while it plays when the cause can be watched;
once it expired nothing more is said (``SpeechDropped``), and a line playing is cut. Latency samples
published here: ``tts_first_chunk_ms`` per sentence, ``eou_to_first_audio_ms`` once per answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.engine.expiry import publish_dropped
from openab_voice.engine.generation import Generation
from openab_voice.engine.handle import PlayedPosition, SpeechHandle, frames_for
from openab_voice.engine.hold import ResponseReports
from openab_voice.engine.response import ResponseDeps, ResponseRequest, close_stream, stage
from openab_voice.engine.state import AudioStarted
from openab_voice.providers.scripts import join_sentences

__all__ = ["Speaking"]

log = logging.getLogger(__name__)

_WRITE_FRAMES = 10  # 200 ms of audio per write to the output


class _Expired(Exception):  # noqa: N818 - a signal inside the speak half, never raised out of it
    """The response's cause no longer holds: stop before more of it is synthesized or played."""

    def __init__(self, index: int, point: str, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.point = point
        self.reason = reason


class _Withdrawn(_Expired):
    """A watched cause expired while the response was still being synthesized or handed to the
    output: what was in progress is abandoned and the output cut at once."""


_stage = functools.partial(stage, passing=(_Expired,))  # an expiry is no provider failure


class Speaking:
    """The speak half of one response (see the module docstring).

    Args:
        deps: shared providers and limits.
        request: the response's request (its cause, its speaker).
        handle: the response's speech handle.
        reports: where progress and latency figures go.
        generation: the generate half, stopped once nothing more may be said.
    """

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        request: ResponseRequest,
        handle: SpeechHandle,
        reports: ResponseReports,
        generation: Generation,
    ) -> None:
        self._d = deps
        self._request = request
        self._handle = handle
        self._reports = reports
        self._generation = generation
        self._started: set[int] = set()
        self._first_audio = False

    def start(
        self, group: asyncio.TaskGroup, queue: asyncio.Queue[int | None]
    ) -> asyncio.Task[PlayedPosition | None]:
        """Run in ``group``; the task's result is the played position (None: nothing was said)."""
        return group.create_task(self._speak(queue), name=f"speak-{self._handle.response_id}")

    async def _speak(self, queue: asyncio.Queue[int | None]) -> PlayedPosition | None:
        with self._watching() as withdrawn:
            try:
                await self._say_all(queue, withdrawn)
            except _Withdrawn as cut:
                if self._handle.utterance_id is None:  # nothing of it reached the output
                    self._dropped(_Expired(cut.index, "before_audio", cut.reason))
                else:
                    self._generation.stop()
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
        self._generation.stop()
        unsaid = [self._handle.sentence(i) for i in range(expired.index, self._generation.queued)]
        log.info("response %s dropped at %s: %s", self._handle.response_id, expired.point, expired.reason)
        publish_dropped(
            self._d.bus,
            self._d.clock,
            session_id=self._d.session_id,
            turn_id=self._handle.turn_id,
            text=join_sentences(unsaid),
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
                        self._reports.latency("tts_first_chunk_ms", sent_at)
                    pending += chunk
                    whole = len(pending) - len(pending) % DISCORD_FRAME_BYTES
                    if whole:
                        await self._write(index, pending[:whole])
                        pending = pending[whole:]
            finally:
                await close_stream(stream)
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
                    await self._reports.on_hold()
                    # The last moment to take it back: nothing of it has reached the listeners yet.
                    self._check(index, "before_audio")
                    uid = self._d.output.begin()
                    self._handle.bind_utterance(uid)
                self._handle.add_frames(index, frames_for(len(piece)))
                await self._d.output.write(uid, piece)
            if index not in self._started:
                self._started.add(index)
                self._reports.progress(AudioStarted(response_id=self._handle.response_id))
            if not self._first_audio:
                self._first_audio = True
                if self._reports.eou_at is not None:
                    self._reports.latency("eou_to_first_audio_ms", self._reports.eou_at)
