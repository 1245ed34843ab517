"""Fakes for the dialogue engine, driven by a :class:`~openab_voice.clock.FakeClock`.

Shipped in the package because ``openab-voice self-test agent`` runs on them (and users testing
their own chat model or TTS against the engine can swap one fake for the real thing):

* :class:`FakeChatModel` streams scripted replies (text deltas, tool calls, failures) with virtual
  delays and records every request and whether each stream was closed early;
* :class:`FakeTextToSpeech` "synthesizes" a sentence as PCM whose every sample is the sentence's tag
  (its 1-based request number), so the output can tell which sentence each frame belongs to;
* :class:`FakeSpeechOutput` behaves like :class:`~openab_voice.discord.wire.playback.Playback` (bounded
  buffer, padded frames, ``finish`` futures, ``interrupt`` returning the position) and plays one
  20 ms frame per 20 ms of virtual time, recording each frame's tag;
* :class:`FakeRoster`.

Virtual time is :class:`~openab_voice.testing.virtual_time.VirtualClock`'s.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.clock import FakeClock
from openab_voice.errors import ErrorCode, VoiceError
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolCall,
    ToolCallRequested,
    ToolSpec,
)
from openab_voice.providers.tts import TtsCapabilities

__all__ = [
    "FakeChatModel",
    "FakeRoster",
    "FakeSpeechOutput",
    "FakeTextToSpeech",
    "PlayedResult",
    "ScriptedReply",
]

FRAME_S = 0.02
_BYTES_PER_MS = 48 * 2 * 2  # 48 kHz, stereo, s16le


# --- chat -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedReply:
    """What one ``stream()`` call produces.

    Attributes:
        events: yielded in order (end with a :class:`ChatDone`).
        delay_s: virtual time before each event.
        fail_after: raise ``error`` after this many events (None: never).
        error: the exception to raise.
    """

    events: tuple[ChatEvent, ...]
    delay_s: float = 0.05
    fail_after: int | None = None
    error: Exception = field(default_factory=lambda: ConnectionError("chat model connection reset"))

    @classmethod
    def text(cls, text: str, *, delay_s: float = 0.05) -> ScriptedReply:
        """A reply streamed word by word."""
        words = text.split(" ")
        deltas = [TextDelta(text=w if i == 0 else " " + w) for i, w in enumerate(words)]
        return cls(events=(*deltas, ChatDone(finish_reason="stop")), delay_s=delay_s)

    @classmethod
    def tool(cls, call: ToolCall, *, delay_s: float = 0.05) -> ScriptedReply:
        return cls(
            events=(ToolCallRequested(call=call), ChatDone(finish_reason="tool_calls")), delay_s=delay_s
        )

    @classmethod
    def failing(
        cls, text: str = "Let me think about that", *, after: int = 0, error: Exception | None = None
    ) -> ScriptedReply:
        """``text`` streamed word by word, raising ``error`` after ``after`` events."""
        err = error if error is not None else ConnectionError("chat model connection reset")
        return cls(events=cls.text(text).events, fail_after=after, error=err)


ReplySource = ScriptedReply | Callable[[Sequence[ChatMessage]], ScriptedReply]


class FakeChatModel:
    """A scripted streaming chat model: each ``stream()`` call takes the next reply.

    A reply may be a function of the request (e.g. to answer from a tool result).
    """

    def __init__(self, clock: FakeClock, replies: Iterable[ReplySource], *, tools: bool = True) -> None:
        self._clock = clock
        self._replies: collections.deque[ReplySource] = collections.deque(replies)
        self._caps = ChatCapabilities(name="fake", streaming=True, tools=tools, model="scripted")
        self.requests: list[tuple[ChatMessage, ...]] = []
        self.offered_tools: list[tuple[str, ...]] = []
        self.completed = 0
        self.closed_early = 0

    @property
    def capabilities(self) -> ChatCapabilities:
        return self._caps

    def add(self, reply: ReplySource) -> None:
        self._replies.append(reply)

    def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        self.requests.append(tuple(messages))
        self.offered_tools.append(tuple(t.name for t in tools))
        if not self._replies:
            raise AssertionError("FakeChatModel has no scripted reply left")
        source = self._replies.popleft()
        reply = source if isinstance(source, ScriptedReply) else source(messages)
        return self._run(reply)

    async def _run(self, reply: ScriptedReply) -> AsyncIterator[ChatEvent]:
        done = False
        try:
            for i, event in enumerate(reply.events):
                if reply.fail_after is not None and i >= reply.fail_after:
                    raise reply.error
                await self._clock.sleep(reply.delay_s)
                yield event
            done = True
        finally:
            if done:
                self.completed += 1
            else:
                self.closed_early += 1

    async def aclose(self) -> None:
        return None


# --- text to speech -------------------------------------------------------------------------------


class FakeTextToSpeech:
    """Tagged PCM at ``ms_per_word`` per word, in ``chunk_ms`` chunks, ``chunk_delay_s`` apart.

    ``fail_on``: a sentence containing this text raises after its first chunk.
    """

    def __init__(
        self,
        clock: FakeClock,
        *,
        ms_per_word: float = 200.0,
        chunk_ms: float = 90.0,
        first_chunk_delay_s: float = 0.08,
        chunk_delay_s: float = 0.01,
        fail_on: str | None = None,
    ) -> None:
        self._clock = clock
        self._ms_per_word = ms_per_word
        self._chunk_bytes = int(chunk_ms * _BYTES_PER_MS)
        self._first_delay = first_chunk_delay_s
        self._chunk_delay = chunk_delay_s
        self._fail_on = fail_on
        self.requested: list[str] = []
        self.completed: list[str] = []
        self.closed_early: list[str] = []

    @property
    def capabilities(self) -> TtsCapabilities:
        return TtsCapabilities(name="fake", streaming=True, voice="tagged", native_rate=48_000)

    def sentence_for(self, tag: int) -> str:
        return self.requested[tag - 1]

    def synthesize(self, text: str) -> AsyncIterator[bytes]:
        self.requested.append(text)
        return self._run(text, len(self.requested))

    async def _run(self, text: str, tag: int) -> AsyncIterator[bytes]:
        # 7 ms extra so a sentence never ends on a frame boundary (the last frame gets padded).
        total = int((len(text.split()) * self._ms_per_word + 7) * _BYTES_PER_MS)
        sample = tag.to_bytes(2, "little", signed=True)
        done = False
        try:
            await self._clock.sleep(self._first_delay)
            sent = 0
            while sent < total:
                size = min(self._chunk_bytes, total - sent)
                yield sample * (size // 2)
                sent += size
                if self._fail_on is not None and self._fail_on in text:
                    raise ConnectionError("tts engine crashed")
                await self._clock.sleep(self._chunk_delay)
            done = True
        finally:
            (self.completed if done else self.closed_early).append(text)

    async def aclose(self) -> None:
        return None


# --- output ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayedResult:
    """Like :class:`~openab_voice.discord.wire.playback.PlaybackResult`."""

    utterance_id: str
    played_ms: float
    interrupted: bool


class _Utterance:
    def __init__(self, uid: str, future: asyncio.Future[PlayedResult]) -> None:
        self.id = uid
        self.future = future
        self.queued = 0
        self.played = 0
        self.finished = False


class FakeSpeechOutput:
    """A virtual-time speaker with :class:`Playback`'s contract. Use as ``async with``."""

    def __init__(self, clock: FakeClock, *, buffer_ms: float = 2000.0) -> None:
        self._clock = clock
        self._max_frames = max(1, int(buffer_ms / 20))
        self._frames: collections.deque[tuple[_Utterance, bytes]] = collections.deque()
        self._utterances: collections.deque[_Utterance] = collections.deque()
        self._space = asyncio.Event()
        self._ids = itertools.count(1)
        self._player: asyncio.Task[None] | None = None
        self.played: list[tuple[str, int, float]] = []  # (utterance id, tag, time) per frame sent
        self.interrupts: list[float] = []

    async def __aenter__(self) -> FakeSpeechOutput:
        self._player = asyncio.create_task(self._play(), name="fake-speech-output")
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.interrupt()
        if self._player is not None:
            self._player.cancel()
            await asyncio.wait({self._player})

    def begin(self) -> str:
        loop = asyncio.get_running_loop()
        utt = _Utterance(f"utt-{next(self._ids)}", loop.create_future())
        self._utterances.append(utt)
        return utt.id

    async def write(self, utterance_id: str, pcm: bytes) -> None:
        utt = self._find(utterance_id)
        for start in range(0, len(pcm), DISCORD_FRAME_BYTES):
            frame = pcm[start : start + DISCORD_FRAME_BYTES].ljust(DISCORD_FRAME_BYTES, b"\0")
            while len(self._frames) >= self._max_frames:
                if utt.future.done():
                    return
                self._space.clear()
                await self._space.wait()
            if utt.future.done():
                return
            self._frames.append((utt, frame))
            utt.queued += 1

    def finish(self, utterance_id: str) -> asyncio.Future[PlayedResult]:
        utt = self._find(utterance_id)
        utt.finished = True
        if utt.played >= utt.queued:
            self._complete(utt, interrupted=False)
        return utt.future

    def interrupt(self) -> PlayedResult | None:
        self.interrupts.append(self._clock.monotonic())
        self._frames.clear()
        current: PlayedResult | None = None
        while self._utterances:
            result = self._complete(self._utterances[0], interrupted=True)
            current = current or result
        self._space.set()
        return current

    @property
    def queued_frames(self) -> int:
        return len(self._frames)

    @property
    def open_utterances(self) -> tuple[str, ...]:
        """Utterances begun and not yet finished playing or interrupted."""
        return tuple(utt.id for utt in self._utterances)

    def tags(self, utterance_id: str | None = None) -> list[int]:
        """The tag of every frame played (of one utterance), in order."""
        return [tag for uid, tag, _ in self.played if utterance_id is None or uid == utterance_id]

    def _find(self, utterance_id: str) -> _Utterance:
        for utt in self._utterances:
            if utt.id == utterance_id:
                return utt
        raise VoiceError(
            f"unknown or finished utterance {utterance_id!r}", code=ErrorCode.VOICE_UTTERANCE_UNKNOWN
        )

    async def _play(self) -> None:
        while True:
            await self._clock.sleep(FRAME_S)
            if not self._frames:
                continue
            utt, frame = self._frames.popleft()
            utt.played += 1
            self.played.append(
                (utt.id, int.from_bytes(frame[:2], "little", signed=True), self._clock.monotonic())
            )
            self._space.set()
            if utt.finished and utt.played >= utt.queued:
                self._complete(utt, interrupted=False)

    def _complete(self, utt: _Utterance, *, interrupted: bool) -> PlayedResult | None:
        if utt in self._utterances:
            self._utterances.remove(utt)
        if utt.future.done():
            return None
        result = PlayedResult(utterance_id=utt.id, played_ms=utt.played * 20.0, interrupted=interrupted)
        utt.future.set_result(result)
        return result


# --- roster ---------------------------------------------------------------------------------------


class FakeRoster:
    """Members of a voice channel: ``names`` maps every user id to a display name."""

    def __init__(self, names: dict[str, str], *, bots: Iterable[str] = ()) -> None:
        self.names = dict(names)
        self.bots = set(bots)

    def humans(self) -> set[str]:
        return set(self.names) - self.bots

    def display_name(self, user_id: str) -> str:
        return self.names.get(user_id, user_id)
