"""Chat on any OpenAI-compatible server: streaming chat completions with tool calls.

Works with api.openai.com and with local servers that speak the same protocol (llama.cpp server,
vLLM, Ollama ...) through ``base_url``. Text deltas are yielded as they arrive. Tool calls arrive as
fragments spread over many chunks (the id and name first, then the JSON arguments a few characters
at a time, keyed by ``index``); they are accumulated and yielded whole, in index order, once the
stream ends, followed by exactly one :class:`~openab_voice.providers.chat.ChatDone`.

Failures become :class:`~openab_voice.errors.ProviderRequestFailed` (retryable:
connection, timeout, 408/409/429, 5xx, a stream cut short) or ``ProviderRequestRejected`` (other
4xx). Client-level retries are off by default: mid-conversation, the engine decides whether a retry
is still worth its latency. Cancelling the consumer (or ``aclose`` on the iterator) closes the HTTP
response, which stops generation on the server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatConfig,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.providers.request_errors import request_error

__all__ = ["ChatConfig", "OpenAiChat", "create", "openai_client", "to_wire_messages", "to_wire_tools"]

PROVIDER: Final = "openai"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class OpenAiChat:
    """:class:`~openab_voice.providers.chat.ChatModel` over ``openai.AsyncOpenAI``.

    Args:
        config: model, server and sampling settings.
        client: an existing client (tests, connection sharing); built from ``config`` when None.
    """

    def __init__(self, config: ChatConfig, *, client: openai.AsyncOpenAI | None = None) -> None:
        self._config = config
        self._client = client or openai_client(
            config.base_url, config.api_key, config.timeout_s, config.max_retries
        )
        self._owns_client = client is None
        self._capabilities = ChatCapabilities(name=PROVIDER, streaming=True, tools=True, model=config.model)

    @property
    def capabilities(self) -> ChatCapabilities:
        return self._capabilities

    async def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        """Yield text deltas and tool calls, then exactly one ``ChatDone``.

        Raises:
            ProviderRequestFailed: retryable failure (before or during the stream).
            ProviderRequestRejected: the server refused the request.
        """
        cfg = self._config
        try:
            response = await self._client.chat.completions.create(
                model=cfg.model,
                messages=to_wire_messages(messages),
                stream=True,
                temperature=cfg.temperature,
                tools=to_wire_tools(tools) if tools else openai.omit,
                max_tokens=openai.omit if cfg.max_tokens is None else cfg.max_tokens,
            )
        except openai.APIError as exc:
            raise request_error("chat", PROVIDER, exc) from exc
        calls: dict[int, _PartialCall] = {}
        finish: str | None = None
        try:
            async for chunk in response:
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue  # n=1 is requested; ignore anything else a server sends
                    if choice.delta.content:
                        yield TextDelta(text=choice.delta.content)
                    for fragment in choice.delta.tool_calls or ():
                        _accumulate(calls, fragment)
                    if choice.finish_reason is not None:
                        finish = choice.finish_reason
        except openai.APIError as exc:
            raise request_error("chat", PROVIDER, exc) from exc
        finally:
            # Also on cancellation: closing the response aborts the request so the server stops.
            await response.close()
        for index in sorted(calls):
            yield ToolCallRequested(call=calls[index].build(index))
        # A connection cut mid-stream raises above (openai wraps it as APIConnectionError); a body
        # that ended cleanly without a finish_reason is a lax server, not a failure.
        yield ChatDone(finish_reason=finish or ("tool_calls" if calls else "stop"))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it. Idempotent."""
        if self._owns_client:
            await self._client.close()


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def build(self, index: int) -> ToolCall:
        # Some compatible servers omit the id; a stable stand-in keeps the tool message pairable.
        return ToolCall(id=self.id or f"call_{index}", name=self.name, arguments="".join(self.arguments))


def _accumulate(calls: dict[int, _PartialCall], fragment: ChoiceDeltaToolCall) -> None:
    call = calls.setdefault(fragment.index, _PartialCall())
    if fragment.id:
        call.id = fragment.id
    function = fragment.function
    if function is None:
        return
    if function.name:
        # Servers send the name once; a few repeat it in every fragment. Never concatenate it.
        call.name = function.name
    if function.arguments:
        call.arguments.append(function.arguments)


def to_wire_messages(messages: Iterable[ChatMessage]) -> list[ChatCompletionMessageParam]:
    """Our messages as OpenAI chat-completion message params."""
    wire: list[ChatCompletionMessageParam] = []
    for message in messages:
        if message.role == "system":
            wire.append(ChatCompletionSystemMessageParam(role="system", content=message.content))
        elif message.role == "user":
            user = ChatCompletionUserMessageParam(role="user", content=message.content)
            name = _wire_name(message.name)
            if name:
                user["name"] = name
            wire.append(user)
        elif message.role == "assistant":
            assistant = ChatCompletionAssistantMessageParam(role="assistant", content=message.content or None)
            if message.tool_calls:
                assistant["tool_calls"] = [
                    ChatCompletionMessageFunctionToolCallParam(
                        id=call.id, type="function", function={"name": call.name, "arguments": call.arguments}
                    )
                    for call in message.tool_calls
                ]
            wire.append(assistant)
        else:
            wire.append(
                ChatCompletionToolMessageParam(
                    role="tool", content=message.content, tool_call_id=message.tool_call_id or ""
                )
            )
    return wire


def to_wire_tools(tools: Iterable[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """Our tool specs as OpenAI function tools."""
    return [
        ChatCompletionFunctionToolParam(
            type="function",
            function={"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        )
        for tool in tools
    ]


def _wire_name(name: str | None) -> str | None:
    """A speaker name the API accepts (``^[A-Za-z0-9_-]{1,64}$``); Discord names often are not."""
    if not name:
        return None
    return _NAME_UNSAFE.sub("_", name).strip("_")[:64] or None


def openai_client(
    base_url: str | None, api_key: str | None, timeout_s: float, max_retries: int
) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client; a missing key is a start-up error naming the setting.

    Shared with :mod:`.tts_openai`. None falls back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
    """
    try:
        return openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries
        )
    except openai.OpenAIError as exc:
        raise ProviderUnavailable(
            "OpenAI-compatible provider needs an API key: set OPENAI_API_KEY (any value for a local server)",
            kind="openai",
            setting="OPENAI_API_KEY",
        ) from exc


def create(config: ChatConfig) -> OpenAiChat:
    """Registry factory (no network traffic until the first request)."""
    return OpenAiChat(config)
