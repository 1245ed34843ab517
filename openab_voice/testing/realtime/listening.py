"""What a session does with user audio by itself: server turn detection and input transcription.

Both are off for a core-authoritative client (``turn_detection: null``, no ``transcription``);
both follow the session's configuration as it is at the moment the audio arrives. With turn
detection on (the API's default), appended audio runs through :class:`~.vad.EnergyVad`: speech
start is ``input_audio_buffer.speech_started`` (and, with ``interrupt_response``, cancels the
response in progress as ``turn_detected``), speech end is ``speech_stopped``, a commit by the
server and, with ``create_response``, a response nobody asked for. With
``audio.input.transcription`` set, every committed item is transcribed by the server's listener
and announced with ``conversation.item.input_audio_transcription.completed``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from openai.types.realtime import (
    ConversationItemInputAudioTranscriptionCompletedEvent,
    InputAudioBufferSpeechStartedEvent,
    InputAudioBufferSpeechStoppedEvent,
    RealtimeSessionCreateRequest,
)
from openai.types.realtime.conversation_item_input_audio_transcription_completed_event import (
    UsageTranscriptTextUsageDuration,
)
from websockets.exceptions import ConnectionClosed

from openab_voice.errors import ConnectionDropped
from openab_voice.tasks import TaskOwner
from openab_voice.testing.realtime.conversation import HeldItem, audio_ms
from openab_voice.testing.realtime.response_objects import SendEvent
from openab_voice.testing.realtime.speech import Listener
from openab_voice.testing.realtime.vad import EnergyVad, SpeechStarted
from openab_voice.testing.realtime.wire import new_id

__all__ = ["ServerListening"]


class ServerListening:
    """Server VAD and input transcription for one session.

    Args:
        config: the session's configuration now.
        send: the session's sender.
        listener: the server's STT.
        commit: commits the buffer as the given item id.
        respond: starts a response (as if the client had sent ``response.create``).
        interrupt: cancels the response in progress, if any, because the user spoke.
    """

    def __init__(
        self,
        *,
        config: Callable[[], RealtimeSessionCreateRequest],
        send: SendEvent,
        listener: Listener,
        commit: Callable[[str], Awaitable[object]],
        respond: Callable[[], Awaitable[None]],
        interrupt: Callable[[], None],
    ) -> None:
        self._config = config
        self._send = send
        self._listener = listener
        self._commit = commit
        self._respond = respond
        self._interrupt = interrupt
        self._vad = EnergyVad()
        self._speech_item: str | None = None
        self.tasks = TaskOwner("loopback realtime listening")  # the session closes it

    async def appended(self, pcm: bytes) -> None:
        """Audio was appended to the input buffer."""
        audio = self._config().audio
        detection = audio.input.turn_detection if audio is not None and audio.input is not None else None
        if detection is None or not pcm:
            return
        for boundary in self._vad.feed(pcm, detection):
            if isinstance(boundary, SpeechStarted):
                self._speech_item = new_id("item")
                await self._send(
                    InputAudioBufferSpeechStartedEvent(
                        type="input_audio_buffer.speech_started",
                        event_id=new_id("event"),
                        audio_start_ms=boundary.audio_start_ms,
                        item_id=self._speech_item,
                    )
                )
                if detection.interrupt_response is not False:
                    self._interrupt()
                continue
            item_id = self._speech_item or new_id("item")
            self._speech_item = None
            await self._send(
                InputAudioBufferSpeechStoppedEvent(
                    type="input_audio_buffer.speech_stopped",
                    event_id=new_id("event"),
                    audio_end_ms=boundary.audio_end_ms,
                    item_id=item_id,
                )
            )
            if await self._commit(item_id) is not None and detection.create_response is not False:
                await self._respond()

    def reset(self) -> None:
        """The client committed or cleared the buffer itself."""
        self._vad.reset()
        self._speech_item = None

    async def committed(self, held: HeldItem) -> None:
        """A user audio item was committed: transcribe it when the session asks for transcripts."""
        audio = self._config().audio
        if audio is None or audio.input is None or audio.input.transcription is None:
            return
        self.tasks.spawn(self._transcribe(held), name=f"realtime-transcribe-{held.id}")

    async def _transcribe(self, held: HeldItem) -> None:
        text = await self._listener.transcribe(held.audio)
        held.transcript = text
        event = ConversationItemInputAudioTranscriptionCompletedEvent(
            type="conversation.item.input_audio_transcription.completed",
            event_id=new_id("event"),
            item_id=held.id,
            content_index=0,
            transcript=text,
            usage=UsageTranscriptTextUsageDuration(type="duration", seconds=audio_ms(held.audio) / 1000.0),
        )
        with contextlib.suppress(ConnectionClosed, ConnectionDropped):  # nobody left to tell
            await self._send(event)
