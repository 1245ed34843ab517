"""A speech-to-speech provider's answer as it plays: audio deltas into playback, the transcript into
sentences (each accounted the frames it was spoken in, so the handle knows what was heard), and each
sentence checked for claims before its audio plays. Shared by the realtime and the live engines'
responses, which differ in how a response is requested, ends and is taken back.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.bus import EventBus
from openab_voice.bus.events import LatencyMeasured
from openab_voice.clock import Clock
from openab_voice.engine.claims import Contradiction, SpeechClaims
from openab_voice.engine.handle import SpeechHandle, SpeechOutput, frames_for
from openab_voice.engine.realtime.audio import SpeechAudio
from openab_voice.engine.segmenter import SentenceSegmenter
from openab_voice.engine.state import AudioStarted, DialogueInput
from openab_voice.engine.supervisor import PreparedResponse

__all__ = ["AudioItem", "ClaimCut", "ProviderSpeech"]


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


class ProviderSpeech(abc.ABC):
    """One response's provider speech (see the module docstring).

    Args:
        handle: its speech handle.
        prepared: what it answers (user turn) or says again (replay).
        output: playback.
        bus: for latency observations.
        clock: the injected clock.
        report: the manager's inbox.
        session_id: the voice session.
        in_rate: the provider's audio rate.
        preroll_ms: audio held before the first frame is played (a jitter buffer).
        claims: checks each sentence of the transcript as it arrives, before its audio plays; a
            contradiction ends the response with :class:`ClaimCut` (None: nothing is checked).
    """

    def __init__(
        self,
        *,
        handle: SpeechHandle,
        prepared: PreparedResponse,
        output: SpeechOutput,
        bus: EventBus,
        clock: Clock,
        report: Callable[[DialogueInput], None],
        session_id: str | None,
        in_rate: int,
        preroll_ms: float = 0.0,
        claims: SpeechClaims | None = None,
    ) -> None:
        self.handle = handle
        self.prepared = prepared
        self.items: list[AudioItem] = []
        self._claims = claims
        self._output = output
        self._bus = bus
        self._clock = clock
        self._report = report
        self._session_id = session_id
        self._in_rate = in_rate
        self._segmenter = SentenceSegmenter(labels=prepared.labels, own_name=prepared.own_name)
        self._pending_frames = 0  # written since the last sentence boundary
        self._open: list[int] = []  # sentences whose audio may still be arriving
        self._frames = 0
        self._first_audio = False
        self._preroll_bytes = int(preroll_ms / 20.0) * DISCORD_FRAME_BYTES
        self._held = b""
        self._rolling = False

    @abc.abstractmethod
    async def stream(self) -> None:
        """Consume the provider's events until the answer ends (the engine's own protocol).

        Raises:
            OpenabError: the answer failed.
            ClaimCut: a sentence claimed what the store does not bear out.
        """

    # --- audio and transcript ------------------------------------------------------------------

    def _item(self, item_id: str) -> AudioItem:
        for item in self.items:
            if item.item_id == item_id:
                return item
        item = AudioItem(
            item_id=item_id, offset_frames=self._frames, audio=SpeechAudio(in_rate=self._in_rate)
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
