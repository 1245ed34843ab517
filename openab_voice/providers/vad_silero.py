"""The default VAD: Silero VAD v6 as ONNX on onnxruntime.

The model file ships inside faster-whisper (``faster_whisper/assets/silero_vad_v6.onnx``), so no
separate download exists. The model scores 512-sample windows at 16 kHz (32 ms) with a 64-sample left
context and a recurrent ``(h, c)`` state that we carry between calls, as faster-whisper's batch
wrapper does inside one call. Measurements: docs/adr/0005-echo-coupling-and-onset-latency.md.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime
from faster_whisper.utils import get_assets_path

from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.vad import VadCapabilities, VadConfig

MODEL_FILE = "silero_vad_v6.onnx"
SAMPLE_RATE = 16_000
WINDOW = 512
CONTEXT = 64
_STATE_SHAPE = (1, 1, 128)


def model_path() -> Path:
    """Where faster-whisper keeps the Silero v6 model."""
    return Path(get_assets_path()) / MODEL_FILE


_sessions: dict[Path, onnxruntime.InferenceSession] = {}
_sessions_lock = threading.Lock()


def _shared_session(path: Path) -> onnxruntime.InferenceSession:
    """One inference session per model file for the whole process.

    The model is stateless (the recurrent state is an input), so every speaker's detector can share
    one session: one copy of the weights in memory and in cache instead of one per speaker
    (measured: in-pipeline window time fell by about a third with 4 speakers), and a new speaker's
    detector starts without another session load.
    """
    with _sessions_lock:
        session = _sessions.get(path)
        if session is None:
            options = onnxruntime.SessionOptions()
            # One thread: the front end scales by speakers, each on the processing thread.
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = 1
            options.log_severity_level = 4
            session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            _sessions[path] = session
        return session


class SileroVad:
    """:class:`~openab_voice.providers.vad.VoiceActivityDetector` running Silero v6."""

    def __init__(self, config: VadConfig, *, path: Path | None = None) -> None:
        if config.sample_rate != SAMPLE_RATE:
            raise ProviderUnavailable(
                f"silero VAD v6 runs at {SAMPLE_RATE} Hz, not {config.sample_rate} Hz",
                kind="vad",
                provider="silero",
                sample_rate=config.sample_rate,
            )
        path = path or model_path()
        if not path.is_file():
            raise ProviderUnavailable(
                f"silero model not found at {path}", kind="vad", provider="silero", extra="audio"
            )
        self._session = _shared_session(path)
        self._input = np.zeros((1, CONTEXT + WINDOW), dtype=np.float32)
        self._h = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._caps = VadCapabilities(name="silero", frame_samples=WINDOW, sample_rate=SAMPLE_RATE)

    @property
    def capabilities(self) -> VadCapabilities:
        return self._caps

    def speech_probability(self, samples: npt.NDArray[np.int16]) -> float:
        if samples.shape != (WINDOW,):
            raise ValueError(f"silero needs exactly {WINDOW} samples, got {samples.shape}")
        buf = self._input
        # Slide the previous window's tail into the context slot, then write the new window.
        buf[0, :CONTEXT] = buf[0, -CONTEXT:]
        buf[0, CONTEXT:] = samples
        buf[0, CONTEXT:] *= 1.0 / 32768.0
        prob, self._h, self._c = self._session.run(None, {"input": buf, "h": self._h, "c": self._c})
        return float(np.asarray(prob).reshape(-1)[0])

    def reset(self) -> None:
        self._input.fill(0.0)
        self._h = np.zeros(_STATE_SHAPE, dtype=np.float32)
        self._c = np.zeros(_STATE_SHAPE, dtype=np.float32)

    def close(self) -> None:
        return None


def create(config: VadConfig) -> SileroVad:
    """Registry factory for ``"silero"``."""
    return SileroVad(config)
