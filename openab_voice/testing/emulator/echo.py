"""The bot's playback as it sounds in a speaker's room, so fake speakers can carry its echo.

:class:`RoomAudio` lays the bot's decoded frames on a timeline as a listener's client would play
them: contiguously within a talk spurt, the spurt anchored on the arrival of its first packet.
:class:`EchoRenderer` turns that into what a speaker's microphone picks up: delayed, attenuated
and reverberated (an exponentially decaying noise tail), frame by frame, with the reverb tail carried
across frames. A speaker can send this echo mixed with its own voice (double talk) or instead of it
(echo only), which is how the echo-cancellation tests run end to end through Discord.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_FRAME_SAMPLES, DISCORD_RATE
from openab_voice.errors import EmulatorError, ErrorCode

_SPURT_GAP_S = 0.06  # a longer pause between bot frames starts a new spurt
_HISTORY_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EchoPath:
    """How the bot's playback reaches a speaker's microphone.

    Attributes:
        delay_ms: acoustic + client delay (at least one frame, 20 ms: the echo of a frame cannot be
            sent before that frame arrived).
        gain_db: attenuation of the echo (negative).
        reverb_ms: length of the reverberation tail (0: none).
        reverb_db: level of the tail's first reflection relative to the direct echo.
        seed: seeds the tail's noise, for reproducible rooms.
    """

    delay_ms: float = 80.0
    gain_db: float = -6.0
    reverb_ms: float = 40.0
    reverb_db: float = -12.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 20.0 <= self.delay_ms <= 1000.0:
            raise EmulatorError("echo delay_ms must be within 20..1000", code=ErrorCode.EMULATOR_BAD_CONFIG)
        if not -60.0 <= self.gain_db <= 12.0 or not 0.0 <= self.reverb_ms <= 500.0:
            raise EmulatorError("echo gain_db or reverb_ms out of range", code=ErrorCode.EMULATOR_BAD_CONFIG)

    def impulse_response(self) -> npt.NDArray[np.float64]:
        n = int(self.reverb_ms * DISCORD_RATE / 1000)
        ir = np.zeros(max(1, n + 1))
        ir[0] = 1.0
        if n:
            rng = np.random.default_rng(self.seed)
            k = np.arange(1, n + 1)
            tail = rng.standard_normal(n) * np.exp(-5.0 * k / n)  # ~43 dB of decay over the tail
            ir[1:] = tail * 10 ** (self.reverb_db / 20) / np.sqrt(max(1, n) / 48)
        return ir * 10 ** (self.gain_db / 20)


class RoomAudio:
    """The bot's playback on a timeline of monotonic time (mono, float, 48 kHz)."""

    def __init__(self) -> None:
        self._spurts: collections.deque[tuple[float, list[npt.NDArray[np.float64]]]] = collections.deque()
        self._end: float | None = None  # time the last frame finishes playing

    def add(self, pcm: bytes, arrival: float) -> None:
        """One decoded 48 kHz stereo frame of the bot's, received at ``arrival``."""
        mono = np.frombuffer(pcm, dtype="<i2").reshape(-1, DISCORD_CHANNELS).mean(axis=1)
        if self._end is None or arrival - self._end > _SPURT_GAP_S:
            self._spurts.append((arrival, [mono]))
            self._end = arrival + len(mono) / DISCORD_RATE
        else:
            self._spurts[-1][1].append(mono)
            self._end += len(mono) / DISCORD_RATE
        while self._spurts and self._spurts[0][0] < arrival - _HISTORY_S and len(self._spurts) > 1:
            self._spurts.popleft()

    def read(self, start: float, samples: int) -> npt.NDArray[np.float64]:
        """What played during ``[start, start + samples / 48 kHz)``; zeros where the bot was silent."""
        out = np.zeros(samples)
        for spurt_start, frames in self._spurts:
            offset = round((start - spurt_start) * DISCORD_RATE)
            length = sum(len(f) for f in frames)
            if offset >= length or offset + samples <= 0:
                continue
            audio = np.concatenate(frames)
            lo, hi = max(0, offset), min(length, offset + samples)
            out[lo - offset : hi - offset] += audio[lo:hi]
        return out


class EchoRenderer:
    """Stateful echo of :class:`RoomAudio` through one :class:`EchoPath`, 20 ms at a time."""

    def __init__(self, room: RoomAudio, path: EchoPath) -> None:
        self._room = room
        self._delay = path.delay_ms / 1000
        self._ir = path.impulse_response()
        self._tail = np.zeros(len(self._ir) - 1)

    def frame(self, at: float) -> npt.NDArray[np.float64]:
        """The echo captured during the 20 ms frame starting at ``at`` (mono float samples)."""
        dry = self._room.read(at - self._delay, DISCORD_FRAME_SAMPLES)
        wet = np.convolve(dry, self._ir)
        wet[: len(self._tail)] += self._tail
        out = wet[:DISCORD_FRAME_SAMPLES]
        rest = wet[DISCORD_FRAME_SAMPLES:]
        self._tail = np.zeros(len(self._ir) - 1)
        self._tail[: len(rest)] = rest
        return out


def mix_frame(own: bytes | None, echo: npt.NDArray[np.float64] | None) -> bytes:
    """Own 48 kHz stereo frame (or silence) plus a mono echo, clipped to 16 bits."""
    if own is None:
        base = np.zeros((DISCORD_FRAME_SAMPLES, DISCORD_CHANNELS))
    else:
        padded = own.ljust(DISCORD_FRAME_SAMPLES * DISCORD_CHANNELS * 2, b"\x00")
        base = np.frombuffer(padded, dtype="<i2").reshape(-1, DISCORD_CHANNELS).astype(np.float64)
    if echo is not None:
        base += echo[:, None]
    return np.clip(np.rint(base), -32768, 32767).astype("<i2").tobytes()
