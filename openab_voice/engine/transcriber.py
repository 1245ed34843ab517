"""A voice session's transcription: its processed capture through a recognize stream, onto the bus.

:class:`Transcriber` opens one :class:`~openab_voice.engine.recognize.RecognizeStream` on its
:class:`~openab_voice.engine.recognize.Recognizer` (for a batch provider such as faster-whisper,
:class:`~openab_voice.engine.redecode_stream.RedecodeRecognizer`, which schedules the re-decodes),
feeds it the front end's processed frames, and turns the front end's hints into the stream's inputs:
a :class:`~openab_voice.audio.events.SpeechEnded` that no silent frame follows (Discord stops sending
packets when a speaker goes quiet) ends that speaker's segment, a
:class:`~openab_voice.audio.events.CapturePaused` asks for a speculative decode. What the stream
recognizes is published on the bus in the order it was recognized.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

from openab_voice.audio.events import CapturePaused, SpeechEnded
from openab_voice.audio.pipeline import ProcessedFrame
from openab_voice.bus import EventBus
from openab_voice.engine.recognize import Recognizer, RecognizeStream

__all__ = ["Transcriber"]


class Transcriber:
    """Per-speaker streaming transcription for one session.

    Args:
        recognizer: opens the session's stream.
        bus: where transcript, latency, backlog and error events go.
        session_id: stamped on every event.
    """

    def __init__(self, recognizer: Recognizer, *, bus: EventBus, session_id: str | None = None) -> None:
        self._bus = bus
        self._stream: RecognizeStream = recognizer.stream(session_id=session_id)
        self._runner: asyncio.Task[None] | None = None
        self._publisher: asyncio.Task[None] | None = None
        self._closed = False

    async def run(self, frames: AsyncIterable[ProcessedFrame]) -> None:
        """Transcribe a processed-capture stream until it ends; returns once every utterance in it
        got its final (or discard) on the bus."""
        subscriptions = [
            self._bus.subscribe(SpeechEnded, self._on_speech_ended),
            self._bus.subscribe(CapturePaused, self._on_capture_paused),
        ]
        publisher = self._publish()
        try:
            async for frame in frames:
                if self._closed:
                    return
                self._stream.push_frame(frame)
            self._stream.end_input()
            await asyncio.shield(publisher)
        finally:
            for subscription in subscriptions:
                subscription.close()

    def start(self, frames: AsyncIterable[ProcessedFrame]) -> None:
        """Run :meth:`run` in a task owned by the transcriber (stopped by :meth:`aclose`)."""
        if self._runner is None and not self._closed:
            self._runner = asyncio.get_running_loop().create_task(self.run(frames), name="transcriber")

    def remove_speaker(self, speaker_id: str) -> None:
        """Forget a speaker (they left): their open utterances are discarded."""
        self._stream.remove_speaker(speaker_id)

    def _publish(self) -> asyncio.Task[None]:
        if self._publisher is None:
            self._publisher = asyncio.get_running_loop().create_task(
                self._publish_all(), name="transcriber-publish"
            )
        return self._publisher

    async def _publish_all(self) -> None:
        async for event in self._stream:
            self._bus.publish(event)

    def _on_speech_ended(self, event: SpeechEnded) -> None:
        # After a "silence" end a frame with user_speech False follows, and ends the utterance.
        if event.reason != "silence" and not self._closed:
            self._stream.flush(event.speaker_id, event.audio_time)

    def _on_capture_paused(self, event: CapturePaused) -> None:
        if not self._closed:
            self._stream.pause(event.speaker_id, event.audio_time)

    async def aclose(self) -> None:
        """Stop: the stream waits (bounded) for decodes in flight; what got no final is discarded,
        and published. Idempotent."""
        if self._closed:
            return
        self._closed = True
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        await self._stream.aclose()
        await self._publish()  # what the stream still had, the discards included, then its end
