"""A deterministic chat model for end-to-end tests and benchmarks: scripted replies streamed word by
word on the injected clock, with a configurable time to first token, optional failures and a record
of every request. It stands in for the LLM only; STT, TTS and Discord stay real around it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, ProviderRequestFailed
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolSpec,
)

Reply = str | Callable[[Sequence[ChatMessage]], str]


class ScriptedChatModel:
    """Answers each request with the next scripted reply (the last one repeats).

    Args:
        clock: paces the stream.
        replies: text, or a function of the request's messages returning text. A reply of
            ``"!fail"`` raises a retryable ``LLM_FAILED`` error after the first token.
        ttft_s: time to first token.
        token_s: time between words after the first.
    """

    def __init__(
        self, clock: Clock, replies: Sequence[Reply], *, ttft_s: float = 0.2, token_s: float = 0.02
    ) -> None:
        if not replies:
            raise ValueError("at least one reply")
        self._clock = clock
        self._replies = list(replies)
        self.ttft_s = ttft_s
        self.token_s = token_s
        self.requests: list[tuple[ChatMessage, ...]] = []
        self.completed = 0
        self.cancelled = 0

    @property
    def capabilities(self) -> ChatCapabilities:
        return ChatCapabilities(name="scripted", streaming=True, tools=False, model="scripted")

    async def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        self.requests.append(tuple(messages))
        reply = self._replies[min(len(self.requests) - 1, len(self._replies) - 1)]
        text = reply(messages) if callable(reply) else reply
        fail = text == "!fail"
        words = ["Let"] if fail else text.split(" ")
        finished = False
        try:
            await self._clock.sleep(self.ttft_s)
            for i, word in enumerate(words):
                if i:
                    await self._clock.sleep(self.token_s)
                yield TextDelta(text=word if i == 0 else " " + word)
                if fail:
                    raise ProviderRequestFailed("scripted failure", code=ErrorCode.LLM_FAILED)
            finished = True
            self.completed += 1
            yield ChatDone(finish_reason="stop")
        finally:
            if not finished and not fail:
                self.cancelled += 1

    async def aclose(self) -> None:
        return None
