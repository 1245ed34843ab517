"""Resampling to the internal format and cutting the stream into APM-sized chunks.

Discord gives 48 kHz stereo; APM, VAD and STT run on one mono rate (16 kHz by default). Capture and
render reference both pass through :class:`Resampler`, so they reach the APM in the same format by
construction; :func:`check_apm_format` is the guard at the APM's door for anything else and fails
with ``AUDIO_APM_FORMAT_MISMATCH`` instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import soxr

from openab_voice.audio.frame import AudioFrame
from openab_voice.errors import AudioError, ErrorCode

Samples = npt.NDArray[np.int16]


def downmix(frame: AudioFrame) -> Samples:
    """Mono int16 samples of ``frame`` (channel average, computed in int32 so it cannot clip)."""
    data = np.frombuffer(frame.pcm, dtype="<i2")
    if frame.channels == 1:
        return data
    if frame.channels == 2:
        # Strided views and a shift: about half the cost of reshape + sum on a 20 ms frame.
        stereo: Samples = ((data[0::2].astype(np.int32) + data[1::2]) >> 1).astype(np.int16)
        return stereo
    mixed: Samples = (data.reshape(-1, frame.channels).astype(np.int32).sum(axis=1) // frame.channels).astype(
        np.int16
    )
    return mixed


class Resampler:
    """Streaming conversion of frames in any rate / channel count to mono ``out_rate`` int16.

    One instance per stream: soxr keeps filter state between frames, so a stream must not share its
    resampler with another. A change of input format (a source switching rates) starts a fresh soxr
    stream explicitly instead of misreading the samples.

    soxr runs in its variable-rate mode (``vr=True``): the fixed-rate engine works in blocks of
    ~1470 input samples at 48 -> 16 kHz, so 20 ms frames came out as 0 / 490 / 0 / 489 ...
    samples, holding audio back up to 30 ms and breaking the one-output-per-input-frame cadence.
    The variable-rate engine returns exactly 320 samples per 20 ms with a constant 6 ms delay and
    the same response (flat to 7.5 kHz, -87 dB above 8 kHz, measured), for ~40 us more per frame.
    """

    def __init__(self, out_rate: int) -> None:
        self.out_rate = out_rate
        self._in_rate: int | None = None
        self._stream: soxr.ResampleStream | None = None
        self._in_total = 0
        self._out_total = 0

    def process(self, frame: AudioFrame) -> Samples:
        """Resample one frame; the output length varies slightly around ``duration * out_rate``."""
        mono = downmix(frame)
        if frame.sample_rate == self.out_rate:
            self.reset()
            return mono
        tail: Samples | None = None
        if frame.sample_rate != self._in_rate or self._stream is None:
            if self._stream is not None:
                # Flush what the old stream still holds so the switch loses no audio.
                tail = self._stream.resample_chunk(np.zeros(0, dtype=np.int16), last=True)
            self._in_rate = frame.sample_rate
            self._in_total = self._out_total = 0
            self._stream = soxr.ResampleStream(frame.sample_rate, self.out_rate, 1, dtype="int16", vr=True)
        out: Samples = self._stream.resample_chunk(mono)
        self._in_total += mono.size
        self._out_total += out.size
        return out if tail is None or not tail.size else np.concatenate((tail, out))

    @property
    def delay_s(self) -> float:
        """Seconds of input not yet returned (the stream's look-ahead; 0 when passing through).

        Counted from what went in and came out rather than taken from ``ResampleStream.delay()``,
        which reported 100 samples where 200 were held back (measured with an impulse).
        """
        if self._in_rate is None:
            return 0.0
        return self._in_total / self._in_rate - self._out_total / self.out_rate

    def reset(self) -> None:
        """Drop filter state (after a long discontinuity)."""
        self._stream = None
        self._in_rate = None
        self._in_total = self._out_total = 0


@dataclass(frozen=True, slots=True)
class Chunk:
    """``samples`` (exactly one chunk) whose first sample was captured at ``timestamp``.

    ``mean_square`` (relative to full scale) is filled in for render chunks, computed once by the
    front end for all speakers; None when nobody needed it.
    """

    timestamp: float
    samples: Samples
    mean_square: float | None = None


class Chunker:
    """Cuts a resampled stream into fixed-size chunks stamped with their first sample's time.

    Timestamps are derived from the end of the newest input frame, so they re-anchor on every frame
    and a pause in the source (Discord sends nothing while a user is silent) shows up as a jump.
    """

    def __init__(self, size: int, rate: int) -> None:
        self.size = size
        self.rate = rate
        self._pending: Samples = np.zeros(0, dtype=np.int16)

    def push(self, samples: Samples, end_time: float) -> list[Chunk]:
        """Add samples that end at ``end_time``; return every complete chunk."""
        pending = np.concatenate((self._pending, samples)) if self._pending.size else samples
        count = pending.size // self.size
        chunks = []
        for i in range(count):
            start = i * self.size
            remaining_after = pending.size - start
            chunks.append(Chunk(end_time - remaining_after / self.rate, pending[start : start + self.size]))
        self._pending = pending[count * self.size :].copy()
        return chunks

    @property
    def pending(self) -> int:
        """Samples waiting for the next chunk."""
        return int(self._pending.size)


def check_apm_format(
    *,
    capture_rate: int,
    capture_channels: int,
    capture_samples: int,
    render_rate: int,
    render_channels: int,
    render_samples: int,
    apm_rate: int,
) -> None:
    """Fail unless capture and render are both mono 10 ms frames at ``apm_rate``.

    Raises:
        AudioError: code ``AUDIO_APM_FORMAT_MISMATCH``, with both formats in ``details``.
    """
    expected = apm_rate // 100
    capture = (capture_rate, capture_channels, capture_samples)
    render = (render_rate, render_channels, render_samples)
    if capture == render == (apm_rate, 1, expected):
        return
    raise AudioError(
        "capture and render reference must reach the APM as mono 10 ms frames at "
        f"{apm_rate} Hz; got capture {capture} and render {render} (rate, channels, samples)",
        code=ErrorCode.AUDIO_APM_FORMAT_MISMATCH,
        capture={"rate": capture_rate, "channels": capture_channels, "samples": capture_samples},
        render={"rate": render_rate, "channels": render_channels, "samples": render_samples},
        apm={"rate": apm_rate, "channels": 1, "samples": expected},
    )
