"""Per-speaker recordings of what the bot heard, placed on a common timeline."""

from __future__ import annotations

import wave
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_RATE, AudioFrame


class Recorder:
    """Collects received frames per speaker; sample positions come from frame timestamps relative to ``origin``."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self._chunks: dict[str, list[tuple[int, bytes]]] = {}

    def add(self, frame: AudioFrame) -> None:
        if frame.speaker_id is None or frame.sample_rate != DISCORD_RATE:
            return
        offset = max(0, round((frame.timestamp - self.origin) * DISCORD_RATE))
        self._chunks.setdefault(frame.speaker_id, []).append((offset, frame.pcm))

    def clear(self) -> None:
        """Forget everything recorded so far (a long run that keeps only counters, e.g. the soak)."""
        self._chunks.clear()

    async def consume(self, frames: AsyncIterator[AudioFrame]) -> None:
        async for frame in frames:
            self.add(frame)

    def speakers(self) -> list[str]:
        return sorted(self._chunks)

    def track(self, speaker_id: str) -> npt.NDArray[np.int16]:
        """The speaker's audio as ``(samples, 2)`` int16, silence where nothing was heard."""
        chunks = self._chunks.get(speaker_id, [])
        if not chunks:
            return np.zeros((0, DISCORD_CHANNELS), dtype=np.int16)
        end = max(off + len(pcm) // (2 * DISCORD_CHANNELS) for off, pcm in chunks)
        out = np.zeros((end, DISCORD_CHANNELS), dtype=np.int16)
        for off, pcm in chunks:
            samples = np.frombuffer(pcm, dtype="<i2").reshape(-1, DISCORD_CHANNELS)
            out[off : off + len(samples)] = samples
        return out

    def write(self, directory: Path) -> list[Path]:
        """Write ``directory/<speaker id>.wav`` (48 kHz stereo 16-bit) for every speaker heard."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for speaker_id in self.speakers():
            path = directory / f"{speaker_id}.wav"
            with wave.open(str(path), "wb") as w:
                w.setnchannels(DISCORD_CHANNELS)
                w.setsampwidth(2)
                w.setframerate(DISCORD_RATE)
                w.writeframes(self.track(speaker_id).astype("<i2").tobytes())
            paths.append(path)
        return paths
