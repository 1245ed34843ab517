"""The output item of a response and the events around it.

``response.output_item.added`` and ``conversation.item.added`` open it (the latter only when the
response writes to the conversation, not for ``conversation: "none"``); for a message,
``response.content_part.added`` opens its one part (in the item from then on, so a truncate can cut
it while it streams), and closing it sends the part's ``*.done`` events, then
``response.output_item.done`` and ``conversation.item.done``, with the item's content set to what
was actually sent (the transcript of the words streamed, less what a truncation cut).
"""

from __future__ import annotations

from typing import Literal

from openai.types.realtime import (
    ConversationItemAdded,
    ConversationItemDone,
    RealtimeConversationItemAssistantMessage,
    ResponseAudioDoneEvent,
    ResponseAudioTranscriptDoneEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseTextDoneEvent,
)
from openai.types.realtime.realtime_conversation_item_assistant_message import Content as AssistantContent
from openai.types.realtime.response_content_part_added_event import Part as AddedPart
from openai.types.realtime.response_content_part_done_event import Part as DonePart

from openab_voice.testing.realtime.conversation import Conversation, HeldItem
from openab_voice.testing.realtime.response_objects import ItemIds, SendEvent
from openab_voice.testing.realtime.wire import new_id

__all__ = ["OutputItems"]


class OutputItems:
    """Opens and closes one response's output item (always output index 0, content index 0).

    Args:
        send: the session's sender.
        conversation: where the item goes (unless ``out_of_band``).
        response_id: the response the events belong to.
        out_of_band: ``conversation: "none"``: the item is not added to the conversation.
        audio: the message speaks (audio + transcript) rather than writes text.
    """

    def __init__(
        self, *, send: SendEvent, conversation: Conversation, response_id: str, out_of_band: bool, audio: bool
    ) -> None:
        self._send = send
        self._conversation = conversation
        self._response_id = response_id
        self._out_of_band = out_of_band
        self._audio = audio

    async def open_message(self) -> HeldItem:
        item = RealtimeConversationItemAssistantMessage(
            id=new_id("item"),
            object="realtime.item",
            type="message",
            role="assistant",
            status="in_progress",
            content=[],
        )
        held = HeldItem(item=item)
        await self.add(held)
        return held

    async def add(self, held: HeldItem) -> None:
        previous = None if self._out_of_band else self._conversation.last_id()
        await self._send(
            ResponseOutputItemAddedEvent(
                type="response.output_item.added",
                event_id=new_id("event"),
                item=held.item,
                output_index=0,
                response_id=self._response_id,
            )
        )
        if not self._out_of_band:
            self._conversation.insert(held)
            await self._send(
                ConversationItemAdded(
                    type="conversation.item.added",
                    event_id=new_id("event"),
                    item=held.item,
                    previous_item_id=previous,
                )
            )

    async def close_message(self, held: HeldItem, status: Literal["completed", "incomplete"]) -> None:
        """Close the open message: its part, its audio, its item (with the transcript actually sent)."""
        assert isinstance(held.item, RealtimeConversationItemAssistantMessage)
        text = " ".join(word.text for word in held.words)
        audio = self._audio
        if audio:
            await self._send(
                ResponseAudioDoneEvent(
                    type="response.output_audio.done", event_id=new_id("event"), **self.ids(held)
                )
            )
            await self._send(
                ResponseAudioTranscriptDoneEvent(
                    type="response.output_audio_transcript.done",
                    event_id=new_id("event"),
                    transcript=text,
                    **self.ids(held),
                )
            )
        else:
            await self._send(
                ResponseTextDoneEvent(
                    type="response.output_text.done", event_id=new_id("event"), text=text, **self.ids(held)
                )
            )
        part = DonePart(type="audio", transcript=text) if audio else DonePart(type="text", text=text)
        await self._send(
            ResponseContentPartDoneEvent(
                type="response.content_part.done", event_id=new_id("event"), part=part, **self.ids(held)
            )
        )
        content = (
            AssistantContent(type="output_audio", transcript=text)
            if audio
            else AssistantContent(type="output_text", text=text)
        )
        held.item = held.item.model_copy(update={"status": status, "content": [content]})
        await self.finish(held)

    async def finish(self, held: HeldItem) -> None:
        await self._send(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                event_id=new_id("event"),
                item=held.item,
                output_index=0,
                response_id=self._response_id,
            )
        )
        if not self._out_of_band:
            await self._send(
                ConversationItemDone(type="conversation.item.done", event_id=new_id("event"), item=held.item)
            )

    async def open_part(self, held: HeldItem) -> None:
        """Open the message's one part, empty: the item has it from now on, as in the API.

        So a ``conversation.item.truncate`` sent while the message still streams (right after a
        ``response.cancel``, on a barge-in) finds the audio part to cut.
        """
        assert isinstance(held.item, RealtimeConversationItemAssistantMessage)
        if self._audio:
            part = AddedPart(type="audio", transcript="")
            content = AssistantContent(type="output_audio", transcript="")
        else:
            part = AddedPart(type="text", text="")
            content = AssistantContent(type="output_text", text="")
        held.item = held.item.model_copy(update={"content": [content]})
        await self._send(
            ResponseContentPartAddedEvent(
                type="response.content_part.added", event_id=new_id("event"), part=part, **self.ids(held)
            )
        )

    def ids(self, held: HeldItem) -> ItemIds:
        return {"item_id": held.id, "content_index": 0, "output_index": 0, "response_id": self._response_id}
