"""The generate half of a response: the sentences to say, from a replay and from the model.

It streams the model; each completed sentence goes to the handle and the sentence queue at once (the
speak half, :mod:`~openab_voice.engine.speaking`, takes them from there). A tool call ends the
round: the tool runs through the tool path, its result goes back to the model as a tool message, and
the next round continues the answer. Long-term memory is recalled once, before the first round. The
sentence budget (``max_response_sentences``) stops the model; ``None`` on the queue ends it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, assert_never

from openab_voice.engine.context import with_memory
from openab_voice.engine.events import ToolCallHandled
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.hold import ResponseReports
from openab_voice.engine.response import ResponseDeps, ResponseRequest, close_stream, stage
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.engine.state import ToolFinished, ToolStarted
from openab_voice.errors import ErrorCode, OpenabError, ResponseError
from openab_voice.providers.chat import (
    ChatDone,
    ChatMessage,
    ChatModel,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.tools.registry import ToolContext

__all__ = ["FIRST_CLAUSE_CHARS", "Generation"]

log = logging.getLogger(__name__)

# The first synthesis unit may end at a clause boundary this far in ("Paris is the capital of France,"),
# so the first audio does not wait for a long first sentence's synthesis; shorter pieces ("Well,")
# wait for more, so a unit is never a lone word.
FIRST_CLAUSE_CHARS = 16


class Generation:
    """The generate half of one response (see the module docstring)."""

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        request: ResponseRequest,
        handle: SpeechHandle,
        reports: ResponseReports,
    ) -> None:
        self._d = deps
        self._request = request
        self._handle = handle
        self._reports = reports
        self._sentences = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        """How many sentences went to the queue so far."""
        return self._sentences

    def start(self, group: asyncio.TaskGroup, queue: asyncio.Queue[int | None]) -> None:
        """Run in ``group``, putting each sentence's index on ``queue``, then ``None``."""
        self._task = group.create_task(self._generate(queue), name=f"generate-{self._handle.response_id}")

    def stop(self) -> None:
        """Nothing more will be said: stop the model (what is queued stays queued)."""
        if self._task is not None:
            self._task.cancel()

    async def _generate(self, queue: asyncio.Queue[int | None]) -> None:
        more = all(self._emit(queue, text) for text in self._request.replay)
        if more and self._request.generate:
            await self._converse(queue)
        self._handle.generation_done()
        queue.put_nowait(None)

    def _emit(self, queue: asyncio.Queue[int | None], text: str) -> bool:
        """Queue a sentence; False once the sentence budget is spent (the model is then stopped)."""
        if self._sentences >= self._d.settings.max_response_sentences:
            return False
        self._sentences += 1
        queue.put_nowait(self._handle.add_sentence(text))
        return self._sentences < self._d.settings.max_response_sentences

    async def _converse(self, queue: asyncio.Queue[int | None]) -> None:
        chat = self._d.chat
        if chat is None:
            raise ResponseError("this voice has no chat model: it says only given lines", stage="llm")
        messages = await self._recalled(list(self._request.messages))
        specs = list(self._d.tools.specs()) if chat.capabilities.tools else []
        for round_no in range(self._d.settings.max_tool_rounds + 1):
            text, calls, more = await self._stream_round(chat, messages, specs, queue)
            if not calls or not more:
                return
            if round_no == self._d.settings.max_tool_rounds:
                log.warning("response %s: tool round limit reached", self._handle.response_id)
                return
            messages.append(ChatMessage(role="assistant", content=text, tool_calls=tuple(calls)))
            for call in calls:
                messages.append(await self._run_tool(call))

    async def _recalled(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """The request with the turn's long-term memory, when there is memory and a user turn."""
        memory = self._d.memory
        if memory is None or not self._request.recall or not messages or messages[-1].role != "user":
            return messages
        try:
            lines = await memory.recall(speaker_id=self._request.speaker_id, text=messages[-1].content)
        except Exception as exc:
            # A recoverable memory error: the response fails (recovering), and the conversation
            # answers the turn again without memory, rather than not at all.
            cause = exc.code if isinstance(exc, OpenabError) else type(exc).__name__
            raise ResponseError(
                f"memory: {cause}: {exc}", code=ErrorCode.MEMORY_RECALL_FAILED, stage="memory"
            ) from exc
        return with_memory(messages, lines)

    async def _stream_round(
        self,
        chat: ChatModel,
        messages: list[ChatMessage],
        specs: list[ToolSpec],
        queue: asyncio.Queue[int | None],
    ) -> tuple[str, list[ToolCall], bool]:
        """One model call: (its text, its tool calls, whether more sentences may follow)."""
        segmenter = SentenceSegmenter(
            labels=self._request.labels,
            own_name=self._request.own_name,
            first_clause_chars=FIRST_CLAUSE_CHARS,
        )
        parts: list[str] = []
        calls: list[ToolCall] = []
        with stage("llm"):
            stream = chat.stream(messages, tools=specs)
            try:
                async for event in stream:
                    match event:
                        case TextDelta():
                            parts.append(event.text)
                            if not all(self._emit(queue, s) for s in segmenter.push(event.text)):
                                return "".join(parts), calls, False
                        case ToolCallRequested():
                            calls.append(event.call)
                        case ChatDone():
                            pass
                        case _:
                            assert_never(event)
            finally:
                await close_stream(stream)
        more = all(self._emit(queue, s) for s in segmenter.flush())
        return "".join(parts), calls, more

    async def _run_tool(self, call: ToolCall) -> ChatMessage:
        await self._reports.on_hold()  # a tool may act: never on a turn not yet confirmed
        rid = self._handle.response_id
        self._reports.progress(ToolStarted(response_id=rid, name=call.name))
        with stage("tools"):
            context = ToolContext(
                session_id=self._d.session_id,
                turn_id=self._handle.turn_id,
                speaker_id=self._request.speaker_id,
            )
            result = await self._d.tools.call(call, context)
        summary: dict[str, Any] = (
            {"content": result.content}
            if result.ok
            else {"error": result.error_code, "reason": result.reason}
        )
        self._d.bus.publish(
            ToolCallHandled(
                at=self._d.clock.monotonic(),
                session_id=self._d.session_id,
                turn_id=self._handle.turn_id,
                name=call.name,
                ok=result.ok,
                result=summary,
            )
        )
        self._reports.progress(ToolFinished(response_id=rid, name=call.name, ok=result.ok))
        return ChatMessage(role="tool", content=result.to_json(), tool_call_id=call.id, name=call.name)
