"""What the loopback Live server hears: server-owned turn detection over the appended audio.

GPT-Live owns turns: there is no commit and no turn-detection setting. The loopback runs the
realtime loopback's energy VAD (:class:`~openab_voice.testing.realtime.vad.EnergyVad`, fixed at the
``server_vad`` defaults the SDK's ``WakePolicy`` suggests: threshold 0.5, 300 ms of prefix, 500 ms
of silence) over the appended samples, in sample time, not wall time: a client may append a turn's
audio in a burst faster than real time.

Where the audio lies on the session timeline: each append is placed right after the audio before
it, or at the time it arrived when that is later (a burst faster than real time queues up, a gap
leaves a gap). Speech boundaries are mapped through that placement.

``session.input_audio.mute`` "sends silence to the model": while muted, appended audio is heard as
silence, and a speech in progress ends once the VAD's silence duration has passed on the injected
clock after the mute (the silence is then fed to the VAD), so a client that appends a turn in a
burst and mutes gets an answer. A fixture mutes the same way while it plays. Audio that simply
stops arriving is not silence: the speech stays open (an assumption; the SDK does not say).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from openai.types.realtime.realtime_audio_input_turn_detection import ServerVad

from openab_voice.clock import Clock
from openab_voice.tasks import TaskOwner
from openab_voice.testing.realtime.conversation import audio_ms
from openab_voice.testing.realtime.vad import EnergyVad, SpeechStarted

__all__ = ["Floor", "Hearing", "Utterance"]

_BYTES_PER_MS = 48  # 24 kHz mono PCM16


@dataclass(frozen=True, slots=True, kw_only=True)
class Hearing:
    """The server's turn detection (the realtime ``server_vad`` knobs)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_ms: int = 500

    def vad(self) -> ServerVad:
        return ServerVad(
            type="server_vad",
            threshold=self.threshold,
            prefix_padding_ms=self.prefix_padding_ms,
            silence_duration_ms=self.silence_ms,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Utterance:
    """One speech the VAD found: its audio (24 kHz PCM16, prefix included) and where it lies.

    ``start_ms`` / ``end_ms`` are on the session timeline; ``decided_ms`` is where the silence that
    ended it ran out (a reply cannot start before that).
    """

    pcm: bytes
    start_ms: int
    end_ms: int
    decided_ms: int


class _Placement:
    """Sample position (ms since the first audio) -> session timeline ms."""

    def __init__(self) -> None:
        self._marks: list[tuple[float, float]] = []  # (sample ms, timeline ms) where a run starts
        self.sample_end = 0.0
        self.timeline_end = 0.0

    def place(self, duration_ms: float, now_ms: float) -> None:
        start = max(now_ms, self.timeline_end)
        if not self._marks or start > self.timeline_end:
            self._marks.append((self.sample_end, start))
            del self._marks[:-256]
        self.sample_end += duration_ms
        self.timeline_end = start + duration_ms

    def at(self, sample_ms: float) -> int:
        for sample, timeline in reversed(self._marks):
            if sample <= sample_ms:
                return round(timeline + sample_ms - sample)
        return round(sample_ms)


class Floor:
    """Turn detection for one session.

    Args:
        clock: the injected clock (the mute silence runs on it).
        hearing: the VAD's settings.
        timeline: the session timeline now, in ms.
        started: called when speech starts (the session decides whether that is a barge-in).
        ended: called with each speech once it ended.
        tasks: the session's task owner (the mute silence runs in it).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        hearing: Hearing,
        timeline: Callable[[], float],
        started: Callable[[], None],
        ended: Callable[[Utterance], None],
        tasks: TaskOwner,
    ) -> None:
        self._clock = clock
        self._hearing = hearing
        self._detection = hearing.vad()
        self._timeline = timeline
        self._started = started
        self._ended = ended
        self._tasks = tasks
        self._vad = EnergyVad()
        self._placement = _Placement()
        self._audio = bytearray()  # what was fed, from sample position ``_audio_from_ms`` on
        self._audio_from_ms = 0.0
        self._speech_from_ms: int | None = None
        self._mutes: set[str] = set()
        self._silence: asyncio.Task[None] | None = None

    @property
    def muted(self) -> bool:
        return bool(self._mutes)

    @property
    def speaking(self) -> bool:
        """Whether the VAD is inside a speech now."""
        return self._speech_from_ms is not None

    def append(self, pcm: bytes) -> None:
        """Audio from the client (24 kHz PCM16); silence while muted."""
        self._feed(bytes(len(pcm)) if self._mutes else pcm)

    def mute(self, why: str) -> None:
        """Hear silence (``why``: ``"client"`` or ``"fixture"``) until every mute is lifted."""
        if not self._mutes and self.speaking:
            deadline = self._clock.monotonic() + self._hearing.silence_ms / 1000
            self._silence = self._tasks.spawn(self._silence_until(deadline), name="live-mute-silence")
        self._mutes.add(why)

    def unmute(self, why: str) -> None:
        self._mutes.discard(why)
        if not self._mutes and self._silence is not None:
            self._silence.cancel()
            self._silence = None

    async def _silence_until(self, deadline: float) -> None:
        # The deadline is fixed at the mute: a clock advanced before this task ran still counts.
        await self._clock.sleep(deadline - self._clock.monotonic())
        self._silence = None
        if self._mutes:
            self._feed(bytes(self._hearing.silence_ms * _BYTES_PER_MS))

    def _feed(self, pcm: bytes) -> None:
        self._placement.place(audio_ms(pcm), self._timeline())
        self._audio += pcm
        for boundary in self._vad.feed(pcm, self._detection):
            if isinstance(boundary, SpeechStarted):
                self._speech_from_ms = boundary.audio_start_ms
                self._started()
                continue
            begin = self._speech_from_ms if self._speech_from_ms is not None else 0
            self._speech_from_ms = None
            self._ended(
                Utterance(
                    pcm=self._slice(begin, boundary.audio_end_ms),
                    start_ms=self._placement.at(begin),
                    end_ms=self._placement.at(boundary.audio_end_ms),
                    decided_ms=self._placement.at(boundary.audio_end_ms + self._hearing.silence_ms),
                )
            )
        self._trim()

    def _slice(self, start_ms: float, end_ms: float) -> bytes:
        first = max(0, round((start_ms - self._audio_from_ms) * _BYTES_PER_MS) // 2 * 2)
        last = max(first, round((end_ms - self._audio_from_ms) * _BYTES_PER_MS) // 2 * 2)
        return bytes(self._audio[first:last])

    def _trim(self) -> None:
        """Keep only what a speech may still need: from its start, else the last prefix's worth."""
        keep_from = (
            self._speech_from_ms
            if self._speech_from_ms is not None
            else self._placement.sample_end - self._hearing.prefix_padding_ms - 40
        )
        drop = round(max(0.0, keep_from - self._audio_from_ms) * _BYTES_PER_MS) // 2 * 2
        if drop > 0:
            del self._audio[:drop]
            self._audio_from_ms += drop / _BYTES_PER_MS
