"""One bot response as a handle: its sentences, their audio, ``interrupt()``, and what was heard.

The response writes all its audio into one output utterance, sentence after sentence, in whole
20 ms frames (only a sentence's last frame may be short, and the output pads it), so each sentence
covers an exact run of frames. The output reports how many frames of the utterance it played; a
sentence was *heard* when it was fully synthesized and its last frame is within that count. That is
the only assistant text the conversation commits.

``interrupt()`` is idempotent: the first call stops the output (sound stops within one frame) and
cancels the response task; later calls return the same position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from openab_voice.audio.frame import DISCORD_FRAME_BYTES
from openab_voice.clock import Clock, first_done
from openab_voice.providers.scripts import join_sentences

__all__ = ["FRAME_MS", "PlayedPosition", "SpeechHandle", "SpeechOutput", "frames_for"]

FRAME_MS = 20.0


class PlayedPosition(Protocol):
    """How much of an utterance reached the listeners (``discord.playback.PlaybackResult``)."""

    @property
    def utterance_id(self) -> str: ...

    @property
    def played_ms(self) -> float: ...

    @property
    def interrupted(self) -> bool: ...


class SpeechOutput(Protocol):
    """The part of :class:`openab_voice.discord.wire.playback.Playback` a response needs."""

    def begin(self) -> str:
        """Open an utterance; returns its id."""
        ...

    async def write(self, utterance_id: str, pcm: bytes) -> None:
        """Queue 48 kHz stereo s16le; a partial last frame is padded; waits while the buffer is full."""
        ...

    def finish(self, utterance_id: str) -> Awaitable[PlayedPosition]:
        """No more audio; resolves once all of it was played (or it was interrupted)."""
        ...

    def interrupt(self) -> PlayedPosition | None:
        """Drop everything queued; sound stops within one frame. The current utterance's position."""
        ...


def frames_for(nbytes: int) -> int:
    """Output frames that ``nbytes`` of PCM occupy (the last one padded)."""
    return -(-nbytes // DISCORD_FRAME_BYTES)


@dataclass(slots=True)
class _Sentence:
    text: str
    frames: int = 0
    complete: bool = False


class SpeechHandle:
    """The state of one response's speech.

    Args:
        response_id: the response.
        turn_id: the user turn it answers.
        output: where its audio goes (interrupted through here).
    """

    def __init__(self, *, response_id: str, turn_id: str, output: SpeechOutput) -> None:
        self.response_id = response_id
        self.turn_id = turn_id
        self._output = output
        self._sentences: list[_Sentence] = []
        self._utterance_id: str | None = None
        self._played_ms: float | None = None
        self._interrupted = False
        self._generation_done = False
        self._task: asyncio.Task[None] | None = None

    # --- written by the response runner -------------------------------------------------------

    def add_sentence(self, text: str) -> int:
        """Register a generated sentence (before it is synthesized); returns its index."""
        self._sentences.append(_Sentence(text))
        return len(self._sentences) - 1

    def sentence(self, index: int) -> str:
        return self._sentences[index].text

    def add_frames(self, index: int, frames: int) -> None:
        self._sentences[index].frames += frames

    def complete_sentence(self, index: int) -> None:
        """All of the sentence's audio was written."""
        self._sentences[index].complete = True

    def generation_done(self) -> None:
        """The model finished (no more sentences will be added)."""
        self._generation_done = True

    def bind_utterance(self, utterance_id: str) -> None:
        self._utterance_id = utterance_id

    def bind_task(self, task: asyncio.Task[None]) -> None:
        self._task = task

    def assign(self, *, response_id: str, turn_id: str) -> None:
        """Name a response prepared ahead of its turn once the turn is decided (before any audio)."""
        if self._utterance_id is not None:
            raise RuntimeError(f"response {self.response_id} already speaks: it cannot be renamed")
        self.response_id = response_id
        self.turn_id = turn_id

    def mark_played(self, position: PlayedPosition) -> None:
        """The output finished the utterance (normally, or cut by someone else)."""
        self._played_ms = position.played_ms
        if position.interrupted:
            self._interrupted = True

    # --- read by the manager -------------------------------------------------------------------

    @property
    def utterance_id(self) -> str | None:
        return self._utterance_id

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    @property
    def played_ms(self) -> float:
        return self._played_ms or 0.0

    @property
    def is_generation_done(self) -> bool:
        return self._generation_done

    @property
    def text(self) -> str:
        """Everything the response meant to say (generated sentences)."""
        return join_sentences(s.text for s in self._sentences)

    def heard_sentences(self) -> tuple[str, ...]:
        """Sentences fully played, in order."""
        return tuple(self._sentences[i].text for i in self._heard_indices()[0])

    def heard_text(self) -> str:
        return join_sentences(self.heard_sentences())

    def unheard_sentences(self) -> tuple[str, ...]:
        """The cut sentence and every generated one after it."""
        return tuple(s.text for s in self._sentences[self._heard_indices()[1] :])

    def _heard_indices(self) -> tuple[list[int], int]:
        """Indices of the heard sentences, and the index of the first one not heard.

        A sentence the TTS made no audio for was not heard, but does not stop later ones from being
        heard; one still being synthesized, or past the played position, ends the heard prefix.
        """
        heard: list[int] = []
        end_frames = 0
        played_frames = int(self.played_ms / FRAME_MS + 1e-6)  # whole frames only
        for i, s in enumerate(self._sentences):
            end_frames += s.frames
            if not s.complete or end_frames > played_frames:
                return heard, i
            if s.frames:
                heard.append(i)
        return heard, len(self._sentences)

    def interrupt(self) -> float:
        """Stop the output and cancel the response; idempotent. Returns the played position (ms)."""
        if self._interrupted and self._played_ms is not None:
            return self._played_ms
        played_ms = self.stop()
        if self._task is not None:
            self._task.cancel()
        return played_ms

    def stop(self) -> float:
        """Stop the output but not the response task (a response cutting itself short calls this
        from inside its task); idempotent. Returns the played position (ms)."""
        self._interrupted = True
        if self._utterance_id is not None and self._played_ms is None:
            position = self._output.interrupt()
            # The output reports the utterance it was playing; ours is the only one it holds.
            if position is not None and position.utterance_id == self._utterance_id:
                self._played_ms = position.played_ms
        if self._played_ms is None:
            self._played_ms = 0.0
        return self._played_ms

    async def wait_closed(self, clock: Clock, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s`` on ``clock``) for the response task to end; True if it did."""
        task = self._task
        if task is None or task.done():
            return True
        return await first_done(clock, timeout_s, task) is not None
