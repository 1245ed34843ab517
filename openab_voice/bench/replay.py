"""Replaying speech through the real transcriber on a fake timeline (``bench stt``, ``bench turns``).

Prepared, not timed: a clip goes through the real audio front end on a fake clock
(:func:`front_end`). Timed: the processed frames go through
:class:`~openab_voice.stt.redecode.RedecodeCore`; every decode and end-of-turn check it asks for runs
for real, and its result lands at its start plus its measured duration (:class:`Replay`).
Method: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable

import numpy as np

from openab_voice.audio import scenes
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock, perf_ns
from openab_voice.providers.turn import TurnDetector
from openab_voice.stt.base import Hypothesis, SpeechToText
from openab_voice.stt.endpointing import TurnCheck
from openab_voice.stt.redecode import RedecodeCore
from openab_voice.stt.utterances import DecodeJob

__all__ = ["SPEAKER", "Replay", "front_end"]

SPEAKER = "bench-speaker"


def front_end(samples: np.ndarray, start: float, settings: FrontEndSettings) -> list[ProcessedFrame]:
    """``samples`` (16 kHz) as Discord frames through the real front end (APM, VAD) on a fake clock."""
    clock = FakeClock(start)
    frontend = FrontEnd(settings, bus=EventBus(), clock=clock)
    out: list[ProcessedFrame] = []
    for frame in scenes.discord_frames(samples, speaker_id=SPEAKER, start_time=start):
        frontend.push_capture(frame)
        out += frontend.process_pending()
        clock.advance(frame.duration)
    frontend.remove_speaker(SPEAKER)
    frontend.process_pending()
    return out


_Work = DecodeJob | TurnCheck


class Replay:
    """Runs what a transcriber asks for and delivers each result at its start + measured duration.

    Args:
        transcriber: the core under test.
        stt: its provider.
        clock: the transcriber's clock, advanced by the replay.
        detector: the end-of-turn detector, when the core has a stage.
    """

    def __init__(
        self,
        transcriber: RedecodeCore,
        stt: SpeechToText,
        clock: FakeClock,
        detector: TurnDetector | None = None,
    ) -> None:
        self._transcriber, self._stt, self._clock, self._detector = transcriber, stt, clock, detector
        self._pending: list[tuple[float, int, _Work, Hypothesis | float | BaseException, float]] = []
        self._order = itertools.count()
        self.decode_ms: dict[str, list[float]] = {"partial": [], "speculative": [], "final": []}
        self.check_ms: list[float] = []

    def run(self, frames: list[ProcessedFrame]) -> None:
        """Push every frame at its time, then end the input and deliver everything still running."""
        for frame in frames:
            self.advance_to(frame.frame.timestamp + frame.frame.duration)
            self.start(self._transcriber.push(frame))
        self.start(self._transcriber.flush())
        self.drain()

    def start(self, jobs: list[DecodeJob]) -> None:
        for check in self._transcriber.take_turn_checks():
            assert self._detector is not None
            self._time(check, self._detector.completion_probability, check.samples, self.check_ms)
        for job in jobs:
            kind = "speculative" if job.speculative else "final" if job.final else "partial"
            decode = functools.partial(self._stt.transcribe, final=job.final, quick=job.quick)
            self._time(job, decode, job.samples, self.decode_ms[kind])

    def _time(
        self,
        work: _Work,
        run: Callable[[np.ndarray], Hypothesis | float],
        samples: np.ndarray,
        into: list[float],
    ) -> None:
        began = perf_ns()
        result: Hypothesis | float | BaseException
        try:
            result = run(samples)
        except Exception as exc:  # delivered to the transcriber, which reports it
            result = exc
        seconds = (perf_ns() - began) / 1e9
        into.append(seconds * 1000.0)
        done = self._clock.monotonic() + seconds
        heapq.heappush(self._pending, (done, next(self._order), work, result, seconds * 1000.0))

    def advance_to(self, when: float) -> None:
        while self._pending and self._pending[0][0] <= when:
            done, _, work, result, ms = heapq.heappop(self._pending)
            self._clock.advance(max(0.0, done - self._clock.monotonic()))
            if isinstance(work, TurnCheck):
                assert not isinstance(result, Hypothesis)
                self.start(self._transcriber.turn_judged(work, result, ms))
            else:
                assert not isinstance(result, float)
                self.start(self._transcriber.complete(work, result))
        self._clock.advance(max(0.0, when - self._clock.monotonic()))

    def drain(self) -> None:
        while self._pending:
            self.advance_to(self._pending[0][0])
