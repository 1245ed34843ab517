"""The streaming speech-to-text seam: one :class:`RecognizeStream` per voice session (ADR 0014).

Shaped like livekit's ``RecognizeStream``: :meth:`~RecognizeStream.push_frame` (every speaker's frames
on one stream), :meth:`~RecognizeStream.flush` (end a speaker's segment, or everyone's),
:meth:`~RecognizeStream.end_input`, async iteration, :meth:`~RecognizeStream.aclose`, and the hint
:meth:`~RecognizeStream.pause`. It yields :data:`RecognitionEvent` s in order: partials, speculative
finals and their withdrawal, exactly one ``TranscriptFinal`` or ``TranscriptDiscarded`` per
utterance, and observations; a failed decode is yielded, never raised.
:class:`~openab_voice.stt.redecode_stream.RedecodeRecognizer` makes any batch
:class:`~openab_voice.stt.base.SpeechToText` stream; a native streaming provider implements
:class:`Recognizer`. In detail: docs/adr/0014-recognize-stream.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.stt.events import (
    SpeculationWithdrawn,
    SpeechResumed,
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
    TranscriptSpeculative,
    TurnDecided,
)

__all__ = ["RecognitionEvent", "RecognizeStream", "Recognizer"]

RecognitionEvent = (
    TranscriptPartial
    | TranscriptSpeculative
    | SpeculationWithdrawn
    | TranscriptFinal
    | TranscriptDiscarded
    | LatencyMeasured
    | TranscriptionBacklog
    | TurnDecided
    | SpeechResumed
    | ErrorRaised
)


class RecognizeStream(Protocol):
    """Streaming recognition of one session's processed capture."""

    def push_frame(self, frame: ProcessedFrame) -> None:
        """Add one processed frame (mono, at the recognizer's ``sample_rate``, with a speaker id).

        Raises:
            AudioError: the frame is not mono at the recognizer's rate, or has no speaker.
        """
        ...

    def pause(self, speaker_id: str, audio_time: float) -> None:
        """No packet from the speaker since ``audio_time`` while their speech is open (a hint)."""
        ...

    def flush(self, speaker_id: str | None = None, audio_time: float | None = None) -> None:
        """End a segment: ``speaker_id``'s speech ended at ``audio_time`` with no silent frame to
        follow (as soon as their frames up to it are in); without arguments, every open utterance
        ends now."""
        ...

    def end_input(self) -> None:
        """No frame follows: open utterances are finished, then the iteration ends."""
        ...

    def remove_speaker(self, speaker_id: str) -> None:
        """Forget a speaker (they left): their open utterances are discarded."""
        ...

    def __aiter__(self) -> AsyncIterator[RecognitionEvent]: ...

    async def aclose(self) -> None:
        """Stop now (bounded wait for work in flight); what got no final is discarded. Idempotent."""
        ...


class Recognizer(Protocol):
    """A streaming speech-to-text engine: opens one :class:`RecognizeStream` per session."""

    @property
    def sample_rate(self) -> int:
        """The mono rate its streams consume (the front end's internal rate)."""
        ...

    def stream(self, *, session_id: str | None = None) -> RecognizeStream:
        """A new stream; its events carry ``session_id``."""
        ...
