"""One delegated Responses response as the nested stream events a ``response.event`` carries.

``ResponseEvent.event`` is an untyped dict in the Live SDK; the loopback builds each one from the
Responses models (``openai.types.responses``: ``ResponseCreatedEvent``,
``ResponseOutputItemAddedEvent`` / ``DoneEvent`` with a ``ResponseFunctionToolCall`` or a
``ResponseOutputMessage``, the argument and text deltas, ``ResponseCompletedEvent``) and dumps it
with API names and unset fields left out, so a client validating the nested stream with
``ResponseStreamEvent`` gets what the Responses API would send. Lifecycle snapshots omit input and
clear instructions, tools and output, as the SDK's ``ResponseEvent`` says. Sequence numbers count
from 0 per response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from openai._models import BaseModel as SdkModel
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from openab_voice.testing.live.wire import new_id
from openab_voice.testing.realtime.responder import CallFunction

__all__ = ["BackendStream", "NestedEvent"]

NestedEvent = dict[str, Any]


def _dump(model: SdkModel) -> NestedEvent:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


class BackendStream:
    """The nested events of one delegated response, numbered in order.

    Args:
        model: the backend model (the session's ``delegation.responses.model``).
        created_at: Unix seconds.
        parallel_tool_calls: the delegation's setting (False when unset).
    """

    def __init__(self, *, model: str, created_at: float, parallel_tool_calls: bool) -> None:
        self.id = new_id("resp")
        self._model = model
        self._created_at = created_at
        self._parallel = parallel_tool_calls
        self._sequence = 0
        self._outputs = 0

    def _event(self, cls: Callable[..., SdkModel], kind: str, **fields: Any) -> NestedEvent:
        """The next nested event: a ``cls`` of type ``kind`` numbered after the previous one."""
        self._sequence += 1
        return _dump(cls(type=kind, sequence_number=self._sequence - 1, **fields))

    def _snapshot(self, status: Literal["in_progress", "completed"]) -> Response:
        return Response(
            id=self.id,
            object="response",
            created_at=self._created_at,
            model=self._model,
            status=status,
            instructions=None,
            output=[],
            tools=[],
            tool_choice="auto",
            parallel_tool_calls=self._parallel,
        )

    def created(self) -> NestedEvent:
        return self._event(ResponseCreatedEvent, "response.created", response=self._snapshot("in_progress"))

    def completed(self) -> NestedEvent:
        return self._event(ResponseCompletedEvent, "response.completed", response=self._snapshot("completed"))

    def function_call(self, call: CallFunction) -> list[NestedEvent]:
        """A ``function_call`` output item, from ``output_item.added`` to ``output_item.done``."""
        index, self._outputs = self._outputs, self._outputs + 1
        item = ResponseFunctionToolCall(
            type="function_call",
            id=new_id("fc"),
            call_id=call.call_id,
            name=call.name,
            arguments="",
            status="in_progress",
        )
        assert item.id is not None
        ids: dict[str, Any] = {"item_id": item.id, "output_index": index}
        done = item.model_copy(update={"arguments": call.arguments, "status": "completed"})
        return [
            self._event(
                ResponseOutputItemAddedEvent, "response.output_item.added", output_index=index, item=item
            ),
            self._event(
                ResponseFunctionCallArgumentsDeltaEvent,
                "response.function_call_arguments.delta",
                delta=call.arguments,
                **ids,
            ),
            self._event(
                ResponseFunctionCallArgumentsDoneEvent,
                "response.function_call_arguments.done",
                arguments=call.arguments,
                **ids,
            ),
            self._event(
                ResponseOutputItemDoneEvent, "response.output_item.done", output_index=index, item=done
            ),
        ]

    def message(self, text: str) -> list[NestedEvent]:
        """An assistant ``message`` output item with one ``output_text`` part holding ``text``."""
        index, self._outputs = self._outputs, self._outputs + 1
        item_id = new_id("msg")
        empty = ResponseOutputText(type="output_text", text="", annotations=[])
        full = ResponseOutputText(type="output_text", text=text, annotations=[])
        ids: dict[str, Any] = {"item_id": item_id, "output_index": index, "content_index": 0}

        def message(status: Literal["in_progress", "completed"], parts: list[ResponseOutputText]) -> Any:
            return ResponseOutputMessage(
                type="message", id=item_id, role="assistant", status=status, content=list(parts)
            )

        return [
            self._event(
                ResponseOutputItemAddedEvent,
                "response.output_item.added",
                output_index=index,
                item=message("in_progress", []),
            ),
            self._event(ResponseContentPartAddedEvent, "response.content_part.added", part=empty, **ids),
            self._event(ResponseTextDeltaEvent, "response.output_text.delta", delta=text, logprobs=[], **ids),
            self._event(ResponseTextDoneEvent, "response.output_text.done", text=text, logprobs=[], **ids),
            self._event(ResponseContentPartDoneEvent, "response.content_part.done", part=full, **ids),
            self._event(
                ResponseOutputItemDoneEvent,
                "response.output_item.done",
                output_index=index,
                item=message("completed", [full]),
            ),
        ]
