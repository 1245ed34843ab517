"""A voice session's transcription: its processed capture through a recognize stream, to the desk.

:class:`Transcriber` opens one :class:`~openab_voice.stt.recognize.RecognizeStream` on its
:class:`~openab_voice.stt.recognize.Recognizer` (for a batch provider such as faster-whisper,
:class:`~openab_voice.stt.redecode_stream.RedecodeRecognizer`) and feeds it the front end's marked
capture (:meth:`~openab_voice.audio.frontend.FrontEnd.subscribe_marked`: frames with the speech marks
in band, in order). A :class:`~openab_voice.audio.events.SpeechEnded` that no silent frame follows
(Discord sends nothing in silence) ends that speaker's segment; a
:class:`~openab_voice.audio.events.CapturePaused` asks for a speculative decode. It subscribes to
nothing on the bus. Each recognized event, in order, is published on the bus (for observers), then
handed to ``sink`` (the session's :class:`~openab_voice.engine.desk.TranscriptDesk`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Callable

from openab_voice.audio.capture_stream import CaptureItem
from openab_voice.audio.events import CapturePaused, SpeechEnded
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus import EventBus
from openab_voice.lifecycle import Lifecycle
from openab_voice.stt.recognize import RecognitionEvent, Recognizer, RecognizeStream
from openab_voice.tasks import TaskOwner

__all__ = ["Transcriber"]

log = logging.getLogger(__name__)


class Transcriber:
    """Per-speaker streaming transcription for one session.

    Args:
        recognizer: opens the session's stream.
        bus: where every recognized event is published, for observers.
        session_id: stamped on every event.
        sink: the data path: called with each recognized event after its publication (the
            session's transcript desk); a sink that raises is logged, and the next event goes on.
    """

    def __init__(
        self,
        recognizer: Recognizer,
        *,
        bus: EventBus,
        session_id: str | None = None,
        sink: Callable[[RecognitionEvent], None] | None = None,
    ) -> None:
        self._bus = bus
        self._sink = sink
        self._stream: RecognizeStream = recognizer.stream(session_id=session_id)
        self._tasks = TaskOwner("transcriber")  # the runner (start) and the publisher
        self._runner: asyncio.Task[None] | None = None
        self._publisher: asyncio.Task[None] | None = None
        # new: nothing fed yet; running: a capture is fed (start() does nothing more); closed: what
        # is still fed is ignored
        self._life = Lifecycle("transcriber")

    async def run(self, capture: AsyncIterable[CaptureItem]) -> None:
        """Transcribe a processed-capture stream (frames, and speech marks in band) until it ends;
        returns once every utterance in it got its final (or discard) out."""
        if self._life.new:
            self._life.start()
        publisher = self._publish()
        async for item in capture:
            if self._life.closed:
                return
            match item:
                case ProcessedFrame():
                    self._stream.push_frame(item)
                case SpeechEnded() if item.reason != "silence":
                    # Capture stopped, the speaker left, a gap: no silent frame follows to end it.
                    # After a "silence" end a frame with user_speech False follows, and ends it.
                    self._stream.flush(item.speaker_id, item.audio_time)
                case CapturePaused():
                    self._stream.pause(item.speaker_id, item.audio_time)
                case _:
                    pass  # SpeechStarted: the frames' user_speech says it
        self._stream.end_input()
        await asyncio.shield(publisher)

    def start(self, capture: AsyncIterable[CaptureItem]) -> None:
        """Run :meth:`run` in a task owned by the transcriber (stopped by :meth:`aclose`)."""
        if self._life.new:
            self._life.start()
            self._runner = self._tasks.spawn(self.run(capture), name="transcriber")

    def remove_speaker(self, speaker_id: str) -> None:
        """Forget a speaker (they left): their open utterances are discarded."""
        self._stream.remove_speaker(speaker_id)

    def _publish(self) -> asyncio.Task[None]:
        if self._publisher is None:
            self._publisher = self._tasks.spawn(self._publish_all(), name="transcriber-publish")
        return self._publisher

    async def _publish_all(self) -> None:
        async for event in self._stream:
            self._bus.publish(event)
            if self._sink is not None:
                try:
                    self._sink(event)
                except Exception:  # a consumer's bug must not stop transcription
                    log.exception("transcript sink failed for %s", type(event).__name__)

    async def aclose(self) -> None:
        """Stop: the stream waits (bounded) for decodes in flight; what got no final is discarded,
        and published. Idempotent."""
        if not self._life.begin_close():
            return
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            await asyncio.wait({runner})
        await self._stream.aclose()
        try:
            await self._publish()  # what the stream still had, the discards included, then its end
        finally:
            await self._tasks.aclose()
        self._life.finish_close()
