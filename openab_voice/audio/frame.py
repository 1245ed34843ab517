"""``AudioFrame``: one chunk of PCM with the metadata every stage needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DISCORD_RATE = 48_000
DISCORD_CHANNELS = 2
DISCORD_FRAME_SAMPLES = 960  # 20 ms at 48 kHz, per channel
DISCORD_FRAME_BYTES = DISCORD_FRAME_SAMPLES * DISCORD_CHANNELS * 2


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioFrame:
    """Interleaved signed 16-bit little-endian PCM.

    Attributes:
        pcm: the samples, ``samples_per_channel * channels * 2`` bytes.
        sample_rate: Hz.
        channels: 1 or 2.
        timestamp: monotonic seconds (injected clock) at which the frame's first sample was captured
            (or, for the render reference, handed to Discord).
        frame_id: per-stream counter, strictly increasing.
        speaker_id: the Discord user id; ``None`` for the bot's own playback (render reference).
        concealed: True when the samples were synthesized by Opus FEC/PLC rather than received.
        end_of_transmission: decoded from an Opus silence frame (``F8 FF FE``): a Discord client
            sends five when it stops transmitting, and nothing after them until it talks again.
    """

    pcm: bytes
    sample_rate: int
    channels: int
    timestamp: float
    frame_id: int
    speaker_id: str | None
    concealed: bool = False
    end_of_transmission: bool = False

    @property
    def samples_per_channel(self) -> int:
        return len(self.pcm) // (2 * self.channels)

    @property
    def duration(self) -> float:
        """Seconds of audio in this frame."""
        return self.samples_per_channel / self.sample_rate

    def samples(self) -> npt.NDArray[np.int16]:
        """A read-only ``(samples, channels)`` view of the PCM."""
        return np.frombuffer(self.pcm, dtype="<i2").reshape(-1, self.channels)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessedFrame:
    """Processed capture for STT.

    Attributes:
        frame: mono internal-rate audio after APM; ``frame_id`` and ``concealed`` come from the input
            frame, ``timestamp`` is the first output sample's capture time.
        speech: the VAD's hysteresis state after this frame (echo included).
        user_speech: inside a speech segment the echo gate accepted as the user's.
        speech_probability: the latest VAD score.
        bot_speaking: the render reference was active within the gate window.
        apm_ok: False when the APM failed on part of this frame and silence replaced it.
        degraded: the APM is ``disabled`` or re-converging after a failure.
        speech_end: on the frame where the user's speech ended (``user_speech`` turned False),
            the capture time it ended at: the VAD's first silent window, a minimum silence before
            this frame. None on every other frame.
    """

    frame: AudioFrame
    speech: bool
    user_speech: bool
    speech_probability: float
    bot_speaking: bool
    apm_ok: bool
    degraded: bool
    speech_end: float | None = None
