"""One response of the realtime engine: from our ``response.create`` to its final ``response.done``.

A :class:`RealtimeResponse` consumes the provider's events for its response and turns them into what
the cascade's runner produces: 48 kHz stereo frames written through its
:class:`~openab_voice.engine.handle.SpeechHandle`, transcript sentences with the frames they cover
(a piece of transcript belongs to the audio after it; captions are best effort), tool rounds through
the ToolRouter (only :data:`REALTIME_TOOLS`, trusted context from our state, up to
``max_tool_rounds``), and state-machine inputs. In detail: docs/adr/0013-duplex-voice-engine.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.bus import EventBus
from openab_voice.bus.events import LatencyMeasured
from openab_voice.clock import Clock
from openab_voice.engine.claims import Contradiction, SpeechClaims
from openab_voice.engine.events import ToolCallHandled
from openab_voice.engine.handle import SpeechHandle, SpeechOutput, frames_for
from openab_voice.engine.realtime.audio import SpeechAudio
from openab_voice.engine.response import ToolPath
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.engine.state import AudioStarted, DialogueInput, ToolFinished, ToolStarted
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ToolCall
from openab_voice.providers.realtime import PROVIDER_RATE, RealtimeLink
from openab_voice.providers.realtime_openai import server_error
from openab_voice.tools.registry import ToolContext, ToolResult

if TYPE_CHECKING:
    from openai.types.realtime import RealtimeServerEvent

__all__ = ["REALTIME_TOOLS", "AudioItem", "ClaimCut", "RealtimeResponse"]

log = logging.getLogger(__name__)

REALTIME_TOOLS = frozenset({"start_agent_task", "get_agent_task", "cancel_agent_task", "clock_now"})
"""The only tools a realtime provider is offered: semantic action tools and the clock."""


@dataclass(slots=True)
class AudioItem:
    """One assistant audio item of the response and where its audio sits in the utterance."""

    item_id: str
    offset_frames: int
    audio: SpeechAudio
    frames: int = 0
    done: bool = False


class ClaimCut(Exception):  # noqa: N818 - a signal from the response to its engine, never raised further
    """The model began a sentence that claims what the store does not bear out: stop before it plays.

    Attributes:
        contradiction: what was claimed, and what is true.
        kept_frames: the response's frames before the claim (what may still be heard).
        claim_frames: frames of the claim already written to playback (its first words arrived
            before the words that made it a claim): 0 means the claim has no audio out yet.
    """

    def __init__(self, contradiction: Contradiction, *, kept_frames: int, claim_frames: int) -> None:
        super().__init__(contradiction.sentence)
        self.contradiction = contradiction
        self.kept_frames = kept_frames
        self.claim_frames = claim_frames


@dataclass(slots=True)
class _Round:
    calls: list[Any] = field(default_factory=list)
    status: str | None = None
    error: Any = None


class RealtimeResponse:
    """Runs one response; the engine owns its task and routes its events into :attr:`events`.

    Args:
        link: the provider session it was requested on.
        handle: its speech handle.
        prepared: what it answers (user turn) or says again (replay).
        output: playback.
        tools: the tool path.
        bus: for tool and latency observations.
        clock: the injected clock.
        report: the manager's inbox.
        session_id: the voice session.
        max_tool_rounds: tool rounds at most.
        model: for error messages.
        preroll_ms: audio held before the first frame is played (a jitter buffer).
        claims: checks each sentence of the transcript as it arrives, before its audio plays; a
            contradiction ends the response with :class:`ClaimCut` (None: nothing is checked).
    """

    def __init__(
        self,
        *,
        link: RealtimeLink,
        handle: SpeechHandle,
        prepared: PreparedResponse,
        output: SpeechOutput,
        tools: ToolPath,
        bus: EventBus,
        clock: Clock,
        report: Callable[[DialogueInput], None],
        session_id: str | None,
        max_tool_rounds: int,
        model: str,
        preroll_ms: float = 0.0,
        claims: SpeechClaims | None = None,
    ) -> None:
        self.link = link
        self._claims = claims
        self.handle = handle
        self.prepared = prepared
        self.events: asyncio.Queue[RealtimeServerEvent | None] = asyncio.Queue()
        self.provider_ids: list[str] = []
        self.items: list[AudioItem] = []
        self.in_flight = False  # a response.create is outstanding (no response.done yet)
        self._output = output
        self._tools = tools
        self._bus = bus
        self._clock = clock
        self._report = report
        self._session_id = session_id
        self._max_rounds = max_tool_rounds
        self._model = model
        self._segmenter = SentenceSegmenter(labels=prepared.labels, own_name=prepared.own_name)
        self._pending_frames = 0  # written since the last sentence boundary
        self._open: list[int] = []  # sentences whose audio may still be arriving
        self._frames = 0
        self._first_audio = False
        self._preroll_bytes = int(preroll_ms / 20.0) * DISCORD_FRAME_BYTES
        self._held = b""
        self._rolling = False

    # --- the run -------------------------------------------------------------------------------

    async def stream(self) -> None:
        """Consume events until the last round's ``response.done``; tool rounds in between.

        Raises:
            OpenabError: the response failed (a server ``error``, a ``failed`` status).
        """
        for round_no in range(self._max_rounds + 1):
            result = await self._round()
            if result.error is not None:
                raise result.error
            if result.status == "failed":
                raise server_error(
                    kind="server_error",
                    code="response_failed",
                    message="the response failed",
                    model=self._model,
                )
            if not result.calls or result.status != "completed":
                return
            if round_no == self._max_rounds:
                log.warning("response %s: tool round limit reached", self.handle.response_id)
                return
            for call in result.calls:
                await self._run_tool(call)
            self.in_flight = True
            await self.link.send({"type": "response.create"})
        return

    async def _round(self) -> _Round:
        result = _Round()
        while True:
            event = await self.events.get()
            if event is None:  # the engine's reader saw the session end
                raise server_error(
                    kind="server_error", code="connection_lost", message="session ended", model=self._model
                )
            match event.type:
                case "response.created":
                    self.provider_ids.append(event.response.id or "")
                case "response.output_audio.delta":
                    await self._audio(event.item_id, event.delta)
                case "response.output_audio.done":
                    await self._audio_done(event.item_id)
                case "response.output_audio_transcript.delta":
                    self._transcript(event.delta)
                case "response.function_call_arguments.done":
                    result.calls.append(event)
                case "response.done":
                    self.in_flight = False
                    for item in self.items:
                        if not item.done:
                            await self._audio_done(item.item_id)
                    self._end_sentences()
                    result.status = event.response.status
                    return result
                case "error":
                    # Still in flight: what it generates after this is cancelled when it is discarded.
                    err = event.error
                    result.error = server_error(
                        kind=err.type, code=err.code, message=err.message, model=self._model
                    )
                    return result
                case _:
                    pass

    # --- audio and transcript ------------------------------------------------------------------

    def _item(self, item_id: str) -> AudioItem:
        for item in self.items:
            if item.item_id == item_id:
                return item
        item = AudioItem(
            item_id=item_id, offset_frames=self._frames, audio=SpeechAudio(in_rate=PROVIDER_RATE)
        )
        self.items.append(item)
        return item

    async def _audio(self, item_id: str, delta: str) -> None:
        item = self._item(item_id)
        await self._write(item, item.audio.push(delta))

    async def _audio_done(self, item_id: str) -> None:
        item = self._item(item_id)
        if item.done:
            return
        item.done = True
        await self._write(item, item.audio.flush(), last=True)

    async def _write(self, item: AudioItem, pcm: bytes, *, last: bool = False) -> None:
        """Account ``pcm`` to the item and its sentence now; play it once the pre-roll is full."""
        if pcm:
            if self.handle.utterance_id is None:
                self.handle.bind_utterance(self._output.begin())
            frames = frames_for(len(pcm))
            item.frames += frames
            self._frames += frames
            self._pending_frames += frames
        if not self._rolling:
            # A provider that streams as fast as it speaks leaves playback nothing in hand: hold the
            # first ``preroll`` so that a late delta is not a gap (the player restarting on every
            # underrun also jolts the echo canceller's delay estimate).
            self._held += pcm
            if len(self._held) < self._preroll_bytes and not last:
                return
            pcm, self._held, self._rolling = self._held, b"", True
        uid = self.handle.utterance_id
        if not pcm or uid is None:
            return
        await self._output.write(uid, pcm)
        if not self._first_audio:
            self._first_audio = True
            self._report(AudioStarted(response_id=self.handle.response_id))
            if self.prepared.eou_at is not None:
                now = self._clock.monotonic()
                self._bus.publish(
                    LatencyMeasured(
                        at=now,
                        session_id=self._session_id,
                        metric="eou_to_first_audio_ms",
                        value_ms=(now - self.prepared.eou_at) * 1000.0,
                        speaker_id=self.prepared.speaker_id,
                        turn_id=self.handle.turn_id,
                    )
                )

    def _transcript(self, delta: str) -> None:
        # Each piece of transcript arrives with the audio it starts: what was written before it is
        # the audio of the sentences still open (their last words included).
        self._close_sentences()
        sentences = self._segmenter.push(delta)
        self._check_claims(sentences)
        self._open_sentences(sentences)

    def _check_claims(self, sentences: list[str]) -> None:
        """Check the completed sentences and the one still arriving (its audio has not played yet).

        Raises:
            ClaimCut: one of them claims an action status the store does not bear out; the sentences
                before it are kept, it and everything after it are never part of the response.
        """
        if self._claims is None:
            return
        for index, text in enumerate([*sentences, self._segmenter.pending.strip()]):
            if not text:
                continue
            found = self._claims.contradiction(text, session_id=self._session_id)
            if found is not None:
                # Frames since the last boundary belong to the sentences before the claim when this
                # delta completed some, else to the claim's own first words.
                claim_frames = 0 if index else self._pending_frames
                self._open_sentences(sentences[:index])
                if index:
                    self._close_sentences()
                self._segmenter.reset()
                raise ClaimCut(found, kept_frames=self._frames - claim_frames, claim_frames=claim_frames)

    async def release(self) -> None:
        """Write the audio still held back by the pre-roll (the response ends early, nothing cut)."""
        held, self._held, self._rolling = self._held, b"", True
        uid = self.handle.utterance_id
        if held and uid is not None:
            await self._output.write(uid, held)

    def _end_sentences(self) -> None:
        self._open_sentences(self._segmenter.flush())
        self._close_sentences()

    def cut(self) -> None:
        """The output was cut: what the transcript holds beyond the last sentence becomes an
        unheard sentence (a resume says it again; it is never committed)."""
        self._open_sentences(self._segmenter.flush())

    def _open_sentences(self, sentences: Sequence[str]) -> None:
        self._open.extend(self.handle.add_sentence(text) for text in sentences)

    def _close_sentences(self) -> None:
        if not self._open:
            return
        self.handle.add_frames(self._open[-1], self._pending_frames)
        self._pending_frames = 0
        for index in self._open:
            self.handle.complete_sentence(index)
        self._open.clear()

    # --- tools ---------------------------------------------------------------------------------

    async def _run_tool(self, event: Any) -> None:
        call = ToolCall(id=event.call_id, name=event.name, arguments=event.arguments)
        rid = self.handle.response_id
        self._report(ToolStarted(response_id=rid, name=call.name))
        if call.name in REALTIME_TOOLS:
            context = ToolContext(
                session_id=self._session_id,
                turn_id=self.handle.turn_id,
                speaker_id=self.prepared.speaker_id,
            )
            result = await self._tools.call(call, context)
        else:
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                ok=False,
                error_code=ErrorCode.TOOL_UNKNOWN,
                reason=f"{call.name} is not offered to the realtime engine",
            )
        summary: dict[str, Any] = (
            {"content": result.content}
            if result.ok
            else {"error": result.error_code, "reason": result.reason}
        )
        self._bus.publish(
            ToolCallHandled(
                at=self._clock.monotonic(),
                session_id=self._session_id,
                turn_id=self.handle.turn_id,
                name=call.name,
                ok=result.ok,
                result=summary,
            )
        )
        await self.link.send(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": call.id, "output": result.to_json()},
            }
        )
        self._report(ToolFinished(response_id=rid, name=call.name, ok=result.ok))

    # --- truncation ----------------------------------------------------------------------------

    def truncations(self, played_ms: float) -> list[tuple[str, int]]:
        """``(item_id, audio_end_ms)`` for every audio item not fully heard at ``played_ms``."""
        out: list[tuple[str, int]] = []
        for item in self.items:
            start_ms = item.offset_frames * 20.0
            heard_ms = min(max(played_ms - start_ms, 0.0), item.audio.in_ms)
            if heard_ms < item.audio.in_ms or not item.done:
                out.append((item.item_id, int(heard_ms)))
        return out
