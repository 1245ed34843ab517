"""The dialogue benchmark's speaker clips, synthesized by the bot's own TTS, and where the speech
starts and ends in them (their 20 ms RMS envelope), which is where the latencies are measured from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openab_voice.providers.tts import TextToSpeech
from openab_voice.testing.emulator import prepare_speech

QUESTION = "What is the capital of France?"
STOP = "Wait, stop please."
SENTENCES = (
    "The capital of France is Paris.",
    "It lies on the river Seine.",
    "About two million people live there.",
    "It is famous for the Eiffel Tower.",
)
ANSWER = " ".join(SENTENCES)  # about 7 s of Piper speech
_ONSET_DBFS = -40.0  # a 20 ms frame louder than this starts the speech
FRAME_BYTES = 48_000 * 4 // 50  # 20 ms of 48 kHz stereo s16le


@dataclass(frozen=True, slots=True)
class Clips:
    question: bytes
    question_tail_s: float  # trailing silence of ``question``
    stop: bytes
    stop_onset_s: float  # leading silence of ``stop``
    answer_s: float  # how long the bot's answer lasts when spoken


async def synthesize_clips(tts: TextToSpeech) -> Clips:
    async def speak(text: str) -> bytes:
        return b"".join([chunk async for chunk in tts.synthesize(text)])

    stop = await speak(STOP)
    answer_bytes = 0
    for sentence in SENTENCES:  # the bot synthesizes sentence by sentence too
        answer_bytes += len(await speak(sentence))
    question = await speak(QUESTION)
    prepare_speech(question, stop)  # the speaker's client encodes on its own machine
    return Clips(
        question=question,
        question_tail_s=trailing_silence_s(question),
        stop=stop,
        stop_onset_s=leading_silence_s(stop),
        answer_s=answer_bytes / (48_000 * 4),
    )


def leading_silence_s(pcm: bytes, *, threshold_dbfs: float = _ONSET_DBFS) -> float:
    """Seconds before the first 20 ms frame of 48 kHz stereo s16le whose RMS exceeds ``threshold_dbfs``
    (the clip's length when none does)."""
    samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 4], dtype="<i2").astype(np.float64)
    frames = len(pcm) // FRAME_BYTES
    if frames == 0:
        return len(pcm) / (48_000 * 4)
    per_frame = FRAME_BYTES // 2
    rms = np.sqrt(np.mean(samples[: frames * per_frame].reshape(frames, per_frame) ** 2, axis=1))
    loud = np.flatnonzero(rms > 32768.0 * 10 ** (threshold_dbfs / 20))
    return (int(loud[0]) if loud.size else frames) * 0.02


def trailing_silence_s(pcm: bytes, *, threshold_dbfs: float = _ONSET_DBFS) -> float:
    """Seconds after the last 20 ms frame louder than ``threshold_dbfs`` (as :func:`leading_silence_s`)."""
    usable = pcm[: len(pcm) - len(pcm) % FRAME_BYTES]
    frames = np.frombuffer(usable, dtype="<i2").reshape(-1, FRAME_BYTES // 2)[::-1]
    return leading_silence_s(np.ascontiguousarray(frames).tobytes(), threshold_dbfs=threshold_dbfs)
