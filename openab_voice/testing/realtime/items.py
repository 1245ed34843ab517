"""The input audio buffer and the conversation items, as a session's client events change them.

``input_audio_buffer.append`` / ``.commit`` / ``.clear`` and ``conversation.item.create`` /
``.delete`` / ``.retrieve`` / ``.truncate``, answered as the GA API does: a commit or a created item
is announced with ``conversation.item.added`` then ``conversation.item.done`` (a commit first with
``input_audio_buffer.committed``); what the API refuses gets an ``error`` (less than 100 ms
committed, an unknown item, a function output with no call, invalid base64 ...).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable

from openai.types.realtime import (
    ConversationItemAdded,
    ConversationItemCreateEvent,
    ConversationItemDeletedEvent,
    ConversationItemDeleteEvent,
    ConversationItemDone,
    ConversationItemRetrieveEvent,
    ConversationItemTruncatedEvent,
    ConversationItemTruncateEvent,
    InputAudioBufferAppendEvent,
    InputAudioBufferClearedEvent,
    InputAudioBufferClearEvent,
    InputAudioBufferCommitEvent,
    InputAudioBufferCommittedEvent,
    RealtimeConversationItemFunctionCall,
    RealtimeConversationItemFunctionCallOutput,
    RealtimeConversationItemUserMessage,
)
from openai.types.realtime.realtime_conversation_item_user_message import Content as UserContent
from openai.types.realtime.realtime_server_event import ConversationItemRetrieved

from openab_voice.testing.realtime.conversation import Conversation, HeldItem, ItemRefusal, audio_ms
from openab_voice.testing.realtime.response_objects import SendEvent
from openab_voice.testing.realtime.wire import new_id

__all__ = ["MIN_COMMIT_MS", "ItemDesk", "ItemEvent", "Refuse"]

MIN_COMMIT_MS = 100.0
"""The real API refuses to commit less than 100 ms of audio."""

Refuse = Callable[[str, str, str | None, str | None], Awaitable[None]]
"""Sends an ``error``: ``(code, message, param, client event_id)``."""

ItemEvent = (
    InputAudioBufferAppendEvent
    | InputAudioBufferCommitEvent
    | InputAudioBufferClearEvent
    | ConversationItemCreateEvent
    | ConversationItemDeleteEvent
    | ConversationItemRetrieveEvent
    | ConversationItemTruncateEvent
)


class ItemDesk:
    """Handles the client events that change the input buffer or the conversation."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        send: SendEvent,
        refuse: Refuse,
        on_commit: Callable[[HeldItem], Awaitable[None]],
    ) -> None:
        self.input_audio = bytearray()
        self._on_commit = on_commit
        self._conversation = conversation
        self._send = send
        self._refuse = refuse

    async def handle(self, event: ItemEvent) -> None:
        match event:
            case InputAudioBufferAppendEvent():
                await self._append(event.audio, event.event_id)
            case InputAudioBufferCommitEvent():
                await self.commit(event.event_id)
            case InputAudioBufferClearEvent():
                self.input_audio.clear()
                await self._send(
                    InputAudioBufferClearedEvent(type="input_audio_buffer.cleared", event_id=new_id("event"))
                )
            case ConversationItemCreateEvent():
                await self._item_create(event)
            case ConversationItemDeleteEvent():
                refusal = self._conversation.delete(event.item_id)
                if refusal is not None:
                    return await self._refuse_item(refusal, event.event_id)
                await self._send(
                    ConversationItemDeletedEvent(
                        type="conversation.item.deleted", event_id=new_id("event"), item_id=event.item_id
                    )
                )
            case ConversationItemRetrieveEvent():
                held = self._conversation.get(event.item_id)
                if held is None:
                    message = f"Item with id '{event.item_id}' not found."
                    return await self._refuse("item_not_found", message, "item_id", event.event_id)
                await self._send(
                    ConversationItemRetrieved(
                        type="conversation.item.retrieved", event_id=new_id("event"), item=held.item
                    )
                )
            case ConversationItemTruncateEvent():
                result = self._conversation.truncate(event.item_id, event.content_index, event.audio_end_ms)
                if isinstance(result, ItemRefusal):
                    return await self._refuse_item(result, event.event_id)
                await self._send(
                    ConversationItemTruncatedEvent(
                        type="conversation.item.truncated",
                        event_id=new_id("event"),
                        item_id=event.item_id,
                        content_index=event.content_index,
                        audio_end_ms=event.audio_end_ms,
                    )
                )

    async def _refuse_item(self, refusal: ItemRefusal, event_id: str | None) -> None:
        await self._refuse(refusal.code, refusal.message, refusal.param, event_id)

    async def _append(self, audio: str, event_id: str | None) -> None:
        try:
            self.input_audio += base64.b64decode(audio, validate=True)
        except binascii.Error:
            await self._refuse("invalid_value", "Invalid 'audio': not valid base64.", "audio", event_id)

    async def commit(self, event_id: str | None, *, item_id: str | None = None) -> HeldItem | None:
        """Commit the buffer as a user audio item (``item_id`` chosen by server VAD, else new)."""
        buffered = audio_ms(bytes(self.input_audio))
        if buffered < MIN_COMMIT_MS:
            message = (
                "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                f"but buffer only has {buffered:.2f}ms of audio."
            )
            await self._refuse("input_audio_buffer_commit_empty", message, None, event_id)
            return None
        item = RealtimeConversationItemUserMessage(
            id=item_id or new_id("item"),
            object="realtime.item",
            type="message",
            role="user",
            status="completed",
            content=[UserContent(type="input_audio", transcript=None)],
        )
        previous = self._conversation.last_id()
        held = HeldItem(item=item, audio=bytes(self.input_audio))
        self.input_audio.clear()
        self._conversation.insert(held)
        await self._send(
            InputAudioBufferCommittedEvent(
                type="input_audio_buffer.committed",
                event_id=new_id("event"),
                item_id=held.id,
                previous_item_id=previous,
            )
        )
        await self._announce(held, previous)
        await self._on_commit(held)
        return held

    async def _item_create(self, event: ConversationItemCreateEvent) -> None:
        item = event.item
        if isinstance(item, RealtimeConversationItemFunctionCallOutput) and not any(
            isinstance(other, RealtimeConversationItemFunctionCall) and other.call_id == item.call_id
            for other in self._conversation.items
        ):
            return await self._refuse(
                "invalid_value",
                f"No tool call found for function call output with call_id {item.call_id}.",
                "item.call_id",
                event.event_id,
            )
        audio = b""
        if isinstance(item, RealtimeConversationItemUserMessage):
            try:
                audio = b"".join(base64.b64decode(p.audio, validate=True) for p in item.content if p.audio)
            except binascii.Error:
                return await self._refuse(
                    "invalid_value", "Invalid 'audio': not valid base64.", "item.content", event.event_id
                )
        stored = item.model_copy(
            update={"id": item.id or new_id("item"), "object": "realtime.item", "status": "completed"}
        )
        held = HeldItem(item=stored, audio=audio)
        previous = self._conversation.insert(held, previous_item_id=event.previous_item_id)
        if isinstance(previous, ItemRefusal):
            return await self._refuse_item(previous, event.event_id)
        await self._announce(held, previous)

    async def _announce(self, held: HeldItem, previous: str | None) -> None:
        await self._send(
            ConversationItemAdded(
                type="conversation.item.added",
                event_id=new_id("event"),
                item=held.item,
                previous_item_id=previous,
            )
        )
        await self._send(
            ConversationItemDone(
                type="conversation.item.done",
                event_id=new_id("event"),
                item=held.item,
                previous_item_id=previous,
            )
        )
