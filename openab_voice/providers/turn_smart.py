"""Smart Turn v3.2: Pipecat's open end-of-turn model (BSD-2), on onnxruntime.

The model file ships inside the ``pipecat-ai`` wheel
(``pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx``, ~8.7 MB int8). That wheel pins
``openai<3`` against our ``openai`` 3.x, so set-up installs it with ``--no-deps`` and this module
only reads the file: pipecat is located with :func:`importlib.util.find_spec`, never imported.

The model's contract, checked when the session loads: input ``input_features`` float32
``[batch, 80, 800]`` (Whisper's 80-bin log-mel of the last 8 s at 16 kHz, 10 ms hop), output
``logits`` ``[batch, 1]``, already a sigmoid probability that the turn is complete. The features are
faster-whisper's Whisper extractor (``chunk_length=8``, no padding) on the waveform left-padded with
zeros (or cut) to 8 s and normalized to zero mean and unit variance, as Pipecat's reference does;
checked against Pipecat's own feature code to 1.3e-7 (docs/adr/0021-semantic-end-of-turn.md).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime
from faster_whisper.feature_extractor import FeatureExtractor

from openab_voice.errors import ProviderUnavailable
from openab_voice.providers.turn import TurnCapabilities, TurnConfig

SAMPLE_RATE = 16_000
SECONDS = 8
_SAMPLES = SAMPLE_RATE * SECONDS
_FRAMES = 800  # 8 s at a 10 ms hop
_MELS = 80
MODEL_IN_WHEEL = "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"


def model_path() -> Path:
    """Where the installed ``pipecat-ai`` wheel keeps the model (pipecat is not imported).

    Raises:
        ProviderUnavailable: pipecat-ai is not installed, or its wheel lacks the model.
    """
    spec = importlib.util.find_spec("pipecat")
    roots = list(spec.submodule_search_locations or ()) if spec is not None else []
    for root in roots:
        path = Path(root) / MODEL_IN_WHEEL
        if path.is_file():
            return path
    raise ProviderUnavailable(
        "Smart Turn v3.2 not found: install the pipecat-ai wheel without its dependencies "
        "(pip install --no-deps 'pipecat-ai==1.14.0'), or set OPENAB_TURN_MODEL_PATH",
        provider="smart-turn",
        missing_file=MODEL_IN_WHEEL,
        setting="turn_model_path",
    )


class SmartTurn:
    """The detector: one onnxruntime session, serialized by a lock (one model run at a time)."""

    def __init__(self, config: TurnConfig) -> None:
        path = Path(config.model_path) if config.model_path else model_path()
        if not path.is_file():
            raise ProviderUnavailable(
                f"end-of-turn model {str(path)!r} does not exist",
                provider="smart-turn",
                setting="turn_model_path",
            )
        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = max(1, config.cpu_threads)
        options.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        _check_contract(self._session, path)
        self._features = FeatureExtractor(feature_size=_MELS, sampling_rate=SAMPLE_RATE, chunk_length=SECONDS)
        self._lock = threading.Lock()
        self._caps = TurnCapabilities(name="smart-turn", sample_rate=SAMPLE_RATE, max_seconds=float(SECONDS))

    @property
    def capabilities(self) -> TurnCapabilities:
        return self._caps

    def features(self, samples: npt.NDArray[np.int16]) -> npt.NDArray[np.float32]:
        """The model's input for ``samples``: ``[1, 80, 800]`` float32."""
        audio = samples.reshape(-1)[-_SAMPLES:].astype(np.float32) / 32768.0
        audio = np.pad(audio, (_SAMPLES - audio.size, 0))
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
        mel = self._features(audio, padding=0)
        return np.ascontiguousarray(mel[:, :_FRAMES][None], dtype=np.float32)

    def completion_probability(self, samples: npt.NDArray[np.int16]) -> float:
        features = self.features(samples)
        with self._lock:
            (logits,) = self._session.run(["logits"], {"input_features": features})
        return float(np.clip(logits.reshape(-1)[0], 0.0, 1.0))

    def close(self) -> None:
        """Nothing to release beyond the session, which the collector frees."""


def _check_contract(session: onnxruntime.InferenceSession, path: Path) -> None:
    inputs = {i.name: i.shape for i in session.get_inputs()}
    outputs = {o.name: o.shape for o in session.get_outputs()}
    shape = inputs.get("input_features")
    if shape is None or list(shape[1:]) != [_MELS, _FRAMES] or "logits" not in outputs:
        raise ProviderUnavailable(
            f"{path.name} is not a Smart Turn v3 model: inputs {inputs}, outputs {outputs}; "
            f"expected input_features [batch, {_MELS}, {_FRAMES}] and logits",
            provider="smart-turn",
            setting="turn_model_path",
        )


def create(config: TurnConfig) -> SmartTurn:
    """Registry factory."""
    return SmartTurn(config)
