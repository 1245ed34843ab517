"""The ``realtime.response`` object a loopback response reports, and the ids its events carry."""

from __future__ import annotations

from typing import Literal, Protocol, TypedDict

from openai.types.realtime import (
    RealtimeResponse,
    RealtimeResponseStatus,
    RealtimeResponseUsage,
    RealtimeSessionCreateRequest,
)
from openai.types.realtime.conversation_item import ConversationItem
from openai.types.realtime.realtime_audio_formats import AudioPCM
from openai.types.realtime.realtime_response import Audio, AudioOutput

from openab_voice.testing.realtime.session_config import PCM_RATE, output_is_audio
from openab_voice.testing.realtime.wire import ServerEvent

__all__ = ["CallIds", "ItemIds", "SendEvent", "Status", "response_object"]

Status = Literal["in_progress", "completed", "cancelled", "failed", "incomplete"]


class SendEvent(Protocol):
    """The session's sender; ``audio_ms_after`` is the response's audio position once this is sent.

    Raises ``ConnectionDropped`` once the connection is dropped, websockets' ``ConnectionClosed``
    once the client closed it.
    """

    async def __call__(self, event: ServerEvent, *, audio_ms_after: float = 0.0) -> None: ...


class ItemIds(TypedDict):
    """Where a content event belongs (``**ids`` into the SDK event's constructor)."""

    item_id: str
    content_index: int
    output_index: int
    response_id: str


class CallIds(TypedDict):
    """Where a function call's argument events belong."""

    item_id: str
    call_id: str
    output_index: int
    response_id: str


def response_object(
    response_id: str,
    status: Status,
    output: list[ConversationItem],
    *,
    config: RealtimeSessionCreateRequest,
    out_of_band: bool,
    details: RealtimeResponseStatus | None,
    output_words: int,
) -> RealtimeResponse:
    """The response as ``response.created`` / ``response.done`` carry it (usage once it is over)."""
    voice = config.audio.output.voice if config.audio and config.audio.output else None
    response = RealtimeResponse(
        id=response_id,
        object="realtime.response",
        status=status,
        output=output,
        conversation_id=None if out_of_band else "conv_loopback",
        output_modalities=["audio"] if output_is_audio(config) else ["text"],
        max_output_tokens="inf",
        audio=Audio(
            output=AudioOutput(
                format=AudioPCM(type="audio/pcm", rate=PCM_RATE),
                voice=voice if isinstance(voice, str) or voice is None else voice.id,
            )
        ),
    )
    if details is not None:
        response.status_details = details
    if status != "in_progress":
        response.usage = RealtimeResponseUsage(
            input_tokens=0, output_tokens=output_words, total_tokens=output_words
        )
    return response
