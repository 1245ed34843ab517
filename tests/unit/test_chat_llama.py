"""The offline chat model: real llama.cpp with the packaged SmolLM2-135M-Instruct, short generations."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openab_voice.clock import perf_ns
from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.chat import (
    ChatConfig,
    ChatDone,
    ChatEvent,
    ChatMessage,
    ChatModel,
    TextDelta,
    ToolSpec,
    chat_registry,
)
from openab_voice.providers.chat_llama import GGUF_FILE, LlamaChat, default_model_path, load_model
from openab_voice.providers.registry import refuse
from tests.fakes.waiting import cancel_once_started


class CountingLlama:
    """The real model, counting the chunks (about one per token) it actually generates."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.chunks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def create_chat_completion(self, **kwargs: Any) -> Iterator[Any]:
        for chunk in self._llm.create_chat_completion(**kwargs):
            self.chunks += 1
            yield chunk


@pytest.fixture(scope="module")
def llm() -> Iterator[Any]:
    model = load_model(default_model_path(), ChatConfig())
    yield model
    model.close()


async def test_streams_tokens_then_one_done_and_ignores_tools(llm: Any) -> None:
    chat = LlamaChat(ChatConfig(temperature=0.0, max_tokens=24), llm=llm)
    assert isinstance(chat, ChatModel)
    assert chat.capabilities.tools is False and chat.capabilities.streaming
    assert chat.capabilities.model == GGUF_FILE.removesuffix(".gguf")
    tool = ToolSpec(name="clock_now", description="time")
    messages = [
        ChatMessage(role="system", content="You are a friendly voice assistant. Answer in one sentence."),
        ChatMessage(role="user", content="Say hello to the team.", name="Ana"),
    ]
    events: list[ChatEvent] = []
    start = perf_ns()
    first_ns = 0
    async for event in chat.stream(messages, tools=[tool]):
        if not events:
            first_ns = perf_ns()
        events.append(event)
    elapsed_s = (perf_ns() - first_ns) / 1e9
    await chat.aclose()
    deltas = [event for event in events if isinstance(event, TextDelta)]
    assert len(deltas) >= 2  # streamed token by token, not one block
    assert "".join(delta.text for delta in deltas).strip()
    assert isinstance(events[-1], ChatDone) and events[-1].finish_reason in {"stop", "length"}
    assert sum(isinstance(event, ChatDone) for event in events) == 1
    print(
        f"llama: first token {(first_ns - start) / 1e6:.0f} ms, "
        f"{(len(deltas) - 1) / max(elapsed_s, 1e-9):.0f} tokens/s over {len(deltas)} tokens"
    )


async def test_cancelling_stops_generation_between_tokens(llm: Any) -> None:
    counting = CountingLlama(llm)
    chat = LlamaChat(ChatConfig(temperature=0.0, max_tokens=200), llm=counting)  # type: ignore[arg-type]
    got_token = asyncio.Event()

    async def consume() -> None:
        async for event in chat.stream(
            [ChatMessage(role="user", content="Write a long story about a dragon.")]
        ):
            if isinstance(event, TextDelta):
                got_token.set()

    await cancel_once_started(asyncio.create_task(consume()), got_token, within_s=30)
    await chat.aclose()  # returns once the worker has stopped
    assert counting.chunks < 50, counting.chunks  # far short of the 200 it was asked for


async def test_long_history_is_trimmed_to_the_context() -> None:
    config = ChatConfig(temperature=0.0, max_tokens=8, n_ctx=256)
    chat = chat_registry().create("llama", config)
    history = [ChatMessage(role="system", content="You are brief.")]
    for i in range(30):
        history.append(
            ChatMessage(role="user", content=f"Tell me fact number {i} about the ocean and its tides.")
        )
        history.append(
            ChatMessage(role="assistant", content=f"Fact {i}: the ocean covers most of the planet.")
        )
    history.append(ChatMessage(role="user", content="Thanks!"))
    try:
        events = [event async for event in chat.stream(history)]
    finally:
        await chat.aclose()
    assert isinstance(events[-1], ChatDone)


def test_registry_names_the_llm_extra() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        chat_registry().with_importer(refuse({"llama_cpp"})).create("llama", ChatConfig())
    assert caught.value.details["extra"] == "llm"
    with pytest.raises(ProviderUnavailable) as missing:
        chat_registry().create("llama", ChatConfig(model_path=Path("/nonexistent/model.gguf")))
    assert missing.value.details["extra"] == "llm"
