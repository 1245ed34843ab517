"""The ``openai`` chat provider against a real OpenAI-compatible server: ``llama_cpp.server``.

``llama-cpp-python``'s own server (the ``llm-server`` extra) runs as a subprocess on loopback,
serving the shipped SmolLM2-135M-Instruct GGUF. Nothing here is a fake of the server: what the
provider parses is what an independent implementation of the protocol sends (DESIGN decision 15).
The dialogue engine around the provider uses the usual fakes for TTS and playback, on the real
clock, because the server answers in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from openab_voice.audio.events import SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.clock import SystemClock
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged, InterruptionDetected
from openab_voice.engine.settings import DialogueSettings
from openab_voice.engine.state import DialogueState
from openab_voice.errors import ProviderRequestFailed
from openab_voice.providers.chat import ChatConfig, ChatDone, ChatEvent, ChatMessage, TextDelta, ToolSpec
from openab_voice.providers.chat_llama import default_model_path
from openab_voice.providers.chat_openai import OpenAiChat
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.dialogue_fakes import FakeRoster, FakeSpeechOutput, FakeTextToSpeech
from openab_voice.tools import ToolRegistry

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

START_TIMEOUT_S = 90.0
STEP_TIMEOUT_S = 30.0
SYSTEM = ChatMessage(role="system", content="You are a helpful assistant. Answer in plain sentences.")
STORY = ChatMessage(role="user", content="Tell me a long story about a cat who sails around the world.")
SESSION = "s1"


@dataclass
class LlamaServer:
    """One ``python -m llama_cpp.server`` process; its stdout and stderr go to ``log_path``."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the server's process group (uvicorn and its threads): a crash, not a shutdown."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(directory: Path) -> LlamaServer:
    """Start the server and wait until it lists its model; fail with its output if it cannot."""
    port = _free_port()
    log_path = directory / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(default_model_path()),
                "--model_alias",
                "smollm2",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
                # One thread: with two, llama.cpp's OpenMP workers spin at every barrier, and on two
                # cores shared with the test process and other work, decoding fell to 4-9 tokens/s
                # (measured); one thread decoded at 22-48 tokens/s on the same machine.
                "--n_threads",
                "1",
                "--seed",
                "7",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            # Unbuffered: the tests read the server's "Disconnected from client" line as it happens.
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # its own process group: kill() takes every child with it
        )
    server = LlamaServer(process=process, port=port, log_path=log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{server.log()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.base_url}/models", timeout=1.0).status_code == 200:
                return server
        time.sleep(0.2)  # real time: polls a starting server process
    server.kill()
    pytest.fail(f"llama_cpp.server not ready after {START_TIMEOUT_S} s:\n{server.log()[-4000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One server for the module (loading SmolLM2 takes about a second; uvicorn's import longer)."""
    running = start_server(tmp_path_factory.mktemp("llama-server"))
    try:
        yield running
    finally:
        running.kill()


def chat_config(server: LlamaServer, **overrides: Any) -> ChatConfig:
    values: dict[str, Any] = {
        "model": "smollm2",
        "base_url": server.base_url,
        "api_key": "local-server-needs-none",
        "timeout_s": STEP_TIMEOUT_S,
        "temperature": 0.0,
        "max_tokens": 64,
    }
    values.update(overrides)
    return ChatConfig(**values)


async def collect(chat: OpenAiChat, messages: Sequence[ChatMessage]) -> list[tuple[float, ChatEvent]]:
    """Every event of one stream with its arrival time."""
    async with asyncio.timeout(STEP_TIMEOUT_S):
        return [(time.perf_counter(), event) async for event in chat.stream(messages)]


async def poll(predicate: Callable[[], bool], *, within_s: float, step_s: float = 0.02) -> bool:
    """Check ``predicate`` every ``step_s`` of real time (the server runs in real time)."""
    for _ in range(round(within_s / step_s)):
        if predicate():
            return True
        await asyncio.sleep(step_s)  # real time: the server runs in real time
    return predicate()


async def wait_for_log(server: LlamaServer, text: str, *, count: int = 1) -> None:
    assert await poll(lambda: server.log().count(text) >= count, within_s=10.0), server.log()[-2000:]


# --- the provider alone ---------------------------------------------------------------------------


async def test_streams_text_token_by_token(server: LlamaServer) -> None:
    chat = OpenAiChat(chat_config(server, max_tokens=48))
    try:
        arrivals = await collect(chat, [SYSTEM, STORY])
    finally:
        await chat.aclose()
    events = [event for _, event in arrivals]
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert isinstance(events[-1], ChatDone) and events[-1].finish_reason in {"stop", "length"}
    assert sum(isinstance(e, ChatDone) for e in events) == 1
    text = "".join(d.text for d in deltas)
    assert len(text.split()) >= 5, text
    # One delta per generated token: many small pieces, arriving one after another over time.
    assert len(deltas) >= 10 and max(len(d.text) for d in deltas) <= 24, [d.text for d in deltas]
    times = [t for t, e in arrivals if isinstance(e, TextDelta)]
    assert times[-1] - times[0] > 0.05
    assert len(set(times)) > len(times) // 2


async def test_cancelling_the_consumer_stops_the_stream_and_the_server_serves_on(server: LlamaServer) -> None:
    disconnects = server.log().count("Disconnected from client")
    chat = OpenAiChat(chat_config(server, max_tokens=400))
    received: list[str] = []
    enough = asyncio.Event()

    async def consume() -> None:
        async for event in chat.stream([SYSTEM, STORY]):
            if isinstance(event, TextDelta):
                received.append(event.text)
                if len(received) == 5:
                    enough.set()

    try:
        task = asyncio.create_task(consume())
        async with asyncio.timeout(STEP_TIMEOUT_S):
            await enough.wait()
        task.cancel()  # what a barge-in does to the response task
        with pytest.raises(asyncio.CancelledError):
            await task
        assert 5 <= len(received) < 400
        # The server saw the client go away and stopped that generation ...
        await wait_for_log(server, "Disconnected from client", count=disconnects + 1)
        # ... and answers the next request in full.
        arrivals = await collect(chat, [SYSTEM, ChatMessage(role="user", content="Say hello.")])
    finally:
        await chat.aclose()
    assert isinstance(arrivals[-1][1], ChatDone)
    assert "".join(e.text for _, e in arrivals if isinstance(e, TextDelta)).strip()


async def test_server_down_is_a_structured_retryable_error(tmp_path: Path) -> None:
    own = start_server(tmp_path)
    chat = OpenAiChat(chat_config(own, max_tokens=400))
    try:
        # Killed mid-stream: the answer stops with a retryable failure, not a clean end.
        received: list[str] = []
        with pytest.raises(ProviderRequestFailed) as mid_stream:
            async with asyncio.timeout(STEP_TIMEOUT_S):
                async for event in chat.stream([SYSTEM, STORY]):
                    if isinstance(event, TextDelta):
                        received.append(event.text)
                        if len(received) == 3:
                            own.kill()
        assert len(received) >= 3
        # Down before the request: connection refused, also retryable.
        with pytest.raises(ProviderRequestFailed) as refused:
            await collect(chat, [SYSTEM, ChatMessage(role="user", content="Are you there?")])
    finally:
        own.kill()
        await chat.aclose()
    for info in (mid_stream, refused):
        err = info.value
        assert err.code == "PROVIDER_REQUEST_FAILED" and err.retryable
        assert err.details["provider"] == "openai" and err.details["status"] is None
        assert err.to_dict()["retryable"] is True
    assert refused.value.details["failure"] == "APIConnectionError"


# --- through the dialogue engine ------------------------------------------------------------------


class RecordingChat:
    """The real provider, counting streams that ended early (closed before their ``ChatDone``)."""

    def __init__(self, inner: OpenAiChat) -> None:
        self.inner = inner
        self.completed = 0
        self.closed_early = 0

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    async def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        done = False
        try:
            async for event in self.inner.stream(messages, tools=tools):
                yield event
                done = done or isinstance(event, ChatDone)
        finally:
            if done:
                self.completed += 1
            else:
                self.closed_early += 1

    async def aclose(self) -> None:
        await self.inner.aclose()


class Call:
    """A conversation manager on the real provider, real clock, fake TTS and playback."""

    def __init__(self, chat: OpenAiChat) -> None:
        self.clock = SystemClock()
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(Event, self.events.append)
        self.chat = RecordingChat(chat)
        # Fast synthetic speech (50 ms per word) so a long answer is mid-air when the barge-in comes.
        self.tts = FakeTextToSpeech(self.clock, ms_per_word=50.0)  # type: ignore[arg-type]
        self.output = FakeSpeechOutput(self.clock)  # type: ignore[arg-type]
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            chat=self.chat,
            tts=self.tts,
            output=self.output,
            tools=ToolRegistry(self.clock),  # no tools: a 135M model cannot call them reliably
            roster=FakeRoster({"alice": "Alice", "bot": "Jarvis"}, bots=("bot",)),
            settings=DialogueSettings(bot_user_id="bot", max_response_sentences=20),
            session_id=SESSION,
        )
        self.turns = 0

    async def __aenter__(self) -> Call:
        await self.output.__aenter__()
        await self.manager.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.manager.aclose()
        await self.output.aclose()
        await self.chat.aclose()

    def say(self, text: str) -> None:
        self.turns += 1
        now = self.clock.monotonic()
        final = TranscriptFinal(
            at=now,
            session_id=SESSION,
            speaker_id="alice",
            utterance_id=f"u{self.turns}",
            text=text,
            audio_start=now - 1.0,
            audio_end=now,
            partials=1,
        )
        self.bus.publish(final)  # as a session delivers it: observed, then heard
        self.manager.hear(final)

    def barge_in(self) -> None:
        now = self.clock.monotonic()
        started = SpeechStarted(
            at=now,
            session_id=SESSION,
            speaker_id="alice",
            audio_time=now,
            probability=0.95,
            during_playback=True,
            confidence=0.9,
        )
        self.manager.hear(started)  # as the front end's speech sink delivers it
        self.bus.publish(started)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def transitions(self) -> list[str]:
        return [f"{e.previous}->{e.state}" for e in self.of(DialogueStateChanged)]

    async def until(self, predicate: Callable[[], bool], *, within_s: float = STEP_TIMEOUT_S) -> None:
        assert await poll(predicate, within_s=within_s), f"not reached; transitions {self.transitions()}"

    async def answered(self, count: int) -> BotUtteranceFinished:
        await self.until(
            lambda: (
                len(self.of(BotUtteranceFinished)) >= count and self.manager.state is DialogueState.LISTENING
            )
        )
        utterance: BotUtteranceFinished = self.of(BotUtteranceFinished)[count - 1]
        return utterance


async def test_a_turn_whose_chat_server_is_down_recovers_to_listening(tmp_path: Path) -> None:
    own = start_server(tmp_path)
    try:
        async with Call(OpenAiChat(chat_config(own, max_tokens=32))) as call:
            call.say("Hello, how are you today?")
            first = await call.answered(1)
            assert first.spoken_text and not first.interrupted
            rows = call.manager.context.dump()
            own.kill()
            call.say("What is the capital of France?")
            await call.until(
                lambda: call.of(ErrorRaised) != [] and call.manager.state is DialogueState.LISTENING
            )
            failed = await call.answered(2)
            transitions = call.transitions()
    finally:
        own.kill()
    assert transitions[-3:] == ["listening->thinking", "thinking->recovering", "recovering->listening"]
    error = call.of(ErrorRaised)[0]
    assert error.code == "PROVIDER_REQUEST_FAILED" and error.retryable
    assert failed.spoken_text == "" and call.manager.context.dump() == rows  # nothing of it in context


async def test_barge_in_mid_stream_closes_the_model_stream_and_the_next_turn_is_answered(
    server: LlamaServer,
) -> None:
    async with Call(OpenAiChat(chat_config(server, max_tokens=400))) as call:
        call.say("Tell me a long story about a cat who sails around the world.")
        await call.until(
            lambda: call.manager.state is DialogueState.SPEAKING and len(call.output.played) >= 3
        )
        # The model is still writing (400 tokens take seconds) while its first words play.
        assert call.chat.completed == 0
        call.barge_in()
        await call.until(lambda: call.of(InterruptionDetected) != [])
        call.say("Actually, just say hello.")
        cut = await call.answered(1)
        second = await call.answered(2)
    assert cut.interrupted and cut.text.startswith(cut.spoken_text)
    assert [e.state for e in call.of(InterruptionDetected)] == ["speaking"]
    assert "speaking->interrupted" in call.transitions()
    assert call.chat.closed_early == 1  # cancelled mid-stream, not left running on the server
    assert call.chat.completed >= 1 and second.spoken_text and not second.interrupted
    assert call.of(ErrorRaised) == []
