"""OpenAI-compatible chat against a fake server on 127.0.0.1 that speaks the streaming protocol (SSE)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from openab_voice.errors import ProviderRequestFailed, ProviderRequestRejected
from openab_voice.providers.chat import (
    ChatConfig,
    ChatDone,
    ChatEvent,
    ChatMessage,
    ChatModel,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
    chat_registry,
)
from openab_voice.providers.chat_openai import OpenAiChat
from tests.fakes.http import serve_post
from tests.fakes.waiting import cancel_once_started


@dataclass
class FakeChatServer:
    """Serves /v1/chat/completions from a script: SSE chunks, an HTTP error, or an endless stream."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    endless: bool = False  # keep sending deltas until the client goes away
    cut_short: bool = False  # drop the connection after the chunks, without finish_reason or [DONE]
    requests: list[dict[str, Any]] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        if self.status != 200:
            return web.json_response(
                {"error": {"message": "scripted failure", "type": "server_error"}}, status=self.status
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for chunk in self.chunks:
                await response.write(_sse(chunk))
            while self.endless:
                await response.write(_sse(_chunk(content="more ")))
                await asyncio.sleep(0.01)  # real time: the endless stream is paced as a server's is
            if self.cut_short:
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        return response


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _chunk(
    *, content: str | None = None, tool_calls: list[dict[str, Any]] | None = None, finish: str | None = None
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeChatServer, str]]:
    fake = FakeChatServer()
    async with serve_post("/chat/completions", fake.handle) as base_url:
        yield fake, base_url


@pytest.fixture
async def chat(server: tuple[FakeChatServer, str]) -> AsyncIterator[OpenAiChat]:
    _, base_url = server
    provider = chat_registry().create(
        "openai", ChatConfig(model="fake", base_url=base_url, api_key="sk-test")
    )
    assert isinstance(provider, OpenAiChat)
    yield provider
    await provider.aclose()


async def _collect(chat: ChatModel, **kwargs: Any) -> list[ChatEvent]:
    return [event async for event in chat.stream([ChatMessage(role="user", content="hi")], **kwargs)]


async def test_text_streams_as_deltas_then_one_done(
    server: tuple[FakeChatServer, str], chat: OpenAiChat
) -> None:
    fake, _ = server
    fake.chunks = [_chunk(content="Hello"), _chunk(content=" there."), _chunk(finish="stop")]
    events = await _collect(chat)
    assert events == [TextDelta(text="Hello"), TextDelta(text=" there."), ChatDone(finish_reason="stop")]
    assert isinstance(chat, ChatModel)
    assert chat.capabilities.tools and chat.capabilities.streaming
    assert fake.requests[0]["stream"] is True
    assert fake.requests[0]["model"] == "fake"
    assert "tools" not in fake.requests[0]


async def test_tool_call_split_across_deltas_is_assembled(
    server: tuple[FakeChatServer, str], chat: OpenAiChat
) -> None:
    fake, _ = server
    fake.chunks = [
        _chunk(content="Let me check."),
        _chunk(tool_calls=[{"index": 0, "id": "call_a", "type": "function", "function": {"name": "clock_now", "arguments": ""}}]),
        _chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"time'}}]),
        _chunk(tool_calls=[{"index": 1, "id": "call_b", "type": "function", "function": {"name": "other", "arguments": "{}"}}]),
        _chunk(tool_calls=[{"index": 0, "function": {"arguments": 'zone": "Europe/Paris"}'}}]),
        _chunk(finish="tool_calls"),
    ]  # fmt: skip
    tool = ToolSpec(
        name="clock_now",
        description="time",
        parameters={"type": "object", "properties": {"timezone": {"type": "string"}}},
    )
    events = await _collect(chat, tools=[tool])
    assert events == [
        TextDelta(text="Let me check."),
        ToolCallRequested(
            call=ToolCall(id="call_a", name="clock_now", arguments='{"timezone": "Europe/Paris"}')
        ),
        ToolCallRequested(call=ToolCall(id="call_b", name="other", arguments="{}")),
        ChatDone(finish_reason="tool_calls"),
    ]
    sent = fake.requests[0]["tools"]
    assert sent == [
        {
            "type": "function",
            "function": {"name": "clock_now", "description": "time", "parameters": tool.parameters},
        }
    ]


async def test_history_with_tool_round_trip_is_sent_in_wire_form(
    server: tuple[FakeChatServer, str], chat: OpenAiChat
) -> None:
    fake, _ = server
    fake.chunks = [_chunk(content="It is noon."), _chunk(finish="stop")]
    call = ToolCall(id="call_a", name="clock_now", arguments="{}")
    history = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What time is it?", name="Zoë the 2nd!"),
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(role="tool", content='{"utc": "2024-01-01T12:00:00Z"}', tool_call_id="call_a"),
    ]
    events = [event async for event in chat.stream(history)]
    assert events[-1] == ChatDone(finish_reason="stop")
    assert fake.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What time is it?", "name": "Zo_the_2nd"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "clock_now", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": '{"utc": "2024-01-01T12:00:00Z"}', "tool_call_id": "call_a"},
    ]


async def test_cancelling_the_consumer_closes_the_stream(
    server: tuple[FakeChatServer, str], chat: OpenAiChat
) -> None:
    fake, _ = server
    fake.chunks = [_chunk(content="Start. ")]
    fake.endless = True
    first = asyncio.Event()
    received: list[ChatEvent] = []

    async def consume() -> None:
        async for event in chat.stream([ChatMessage(role="user", content="talk forever")]):
            received.append(event)
            first.set()

    await cancel_once_started(asyncio.create_task(consume()), first, within_s=5)
    # The server sees the connection go away: generation stops on its side.
    await asyncio.wait_for(fake.disconnected.wait(), 5)
    assert received[0] == TextDelta(text="Start. ")
    assert not any(isinstance(event, ChatDone) for event in received)


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [
        (503, ProviderRequestFailed, True),
        (429, ProviderRequestFailed, True),
        (401, ProviderRequestRejected, False),
    ],
)
async def test_http_errors_become_structured_errors(
    server: tuple[FakeChatServer, str], chat: OpenAiChat, status: int, error: type[Exception], retryable: bool
) -> None:
    fake, _ = server
    fake.status = status
    with pytest.raises(error) as caught:
        await _collect(chat)
    exc = caught.value
    assert getattr(exc, "retryable") is retryable  # noqa: B009
    assert getattr(exc, "details")["status"] == status  # noqa: B009
    assert "sk-test" not in str(exc)
    assert len(fake.requests) == 1  # no hidden client retries


async def test_stream_cut_short_is_a_retryable_error(
    server: tuple[FakeChatServer, str], chat: OpenAiChat
) -> None:
    fake, _ = server
    fake.chunks = [_chunk(content="Half a")]
    fake.cut_short = True
    received: list[ChatEvent] = []
    with pytest.raises(ProviderRequestFailed) as caught:
        async for event in chat.stream([ChatMessage(role="user", content="hi")]):
            received.append(event)
    assert caught.value.retryable
    assert received == [TextDelta(text="Half a")]


async def test_connection_refused_is_retryable() -> None:
    provider = OpenAiChat(ChatConfig(model="fake", base_url="http://127.0.0.1:9/v1", api_key="sk-test"))
    try:
        with pytest.raises(ProviderRequestFailed) as caught:
            await _collect(provider)
        assert caught.value.details["status"] is None
    finally:
        await provider.aclose()
