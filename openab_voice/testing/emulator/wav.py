"""Load a WAV file as Discord-ready audio (48 kHz, stereo, signed 16-bit little-endian).

The RIFF chunks are parsed here rather than with :mod:`wave`, which on Python 3.11 rejects
``WAVE_FORMAT_EXTENSIBLE`` (the header most tools write for 24-bit and multi-channel files).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soxr

from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_RATE
from openab_voice.errors import EmulatorError, ErrorCode

_FORMAT_PCM = 0x0001
_FORMAT_FLOAT = 0x0003
_FORMAT_EXTENSIBLE = 0xFFFE


@dataclass(frozen=True, slots=True, kw_only=True)
class _WavFormat:
    code: int
    channels: int
    rate: int
    bits: int


def _bad(path: str | Path, why: str) -> EmulatorError:
    return EmulatorError(f"cannot read WAV {path}: {why}", code=ErrorCode.EMULATOR_BAD_AUDIO)


def _parse(path: str | Path, blob: bytes) -> tuple[_WavFormat, bytes]:
    if len(blob) < 12 or blob[:4] != b"RIFF" or blob[8:12] != b"WAVE":
        raise _bad(path, "not a RIFF/WAVE file")
    fmt: _WavFormat | None = None
    data: bytes | None = None
    pos = 12
    while pos + 8 <= len(blob):
        chunk_id, size = struct.unpack_from("<4sI", blob, pos)
        body = blob[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            if len(body) < 16:
                raise _bad(path, "fmt chunk too short")
            code, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<HHIIHH", body)
            if code == _FORMAT_EXTENSIBLE:
                if len(body) < 26:
                    raise _bad(path, "extensible fmt chunk too short")
                code = struct.unpack_from("<H", body, 24)[0]  # first two bytes of the SubFormat GUID
            fmt = _WavFormat(code=code, channels=channels, rate=rate, bits=bits)
        elif chunk_id == b"data":
            data = body  # a truncated last chunk keeps what is there
        pos += 8 + size + (size & 1)  # chunks are word-aligned
    if fmt is None or data is None:
        raise _bad(path, "missing fmt or data chunk")
    if fmt.channels < 1 or fmt.rate < 1:
        raise _bad(path, "no channels or no sample rate")
    return fmt, data


def _to_float(path: str | Path, fmt: _WavFormat, raw: bytes) -> npt.NDArray[np.float32]:
    """Samples -> float32 in [-1, 1), shape (frames, channels)."""
    width = fmt.bits // 8
    if fmt.bits % 8 or width < 1:
        raise _bad(path, f"unsupported sample size {fmt.bits} bits")
    raw = raw[: len(raw) - len(raw) % (width * fmt.channels)]
    if fmt.code == _FORMAT_FLOAT and width == 4:
        data = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif fmt.code != _FORMAT_PCM:
        raise _bad(path, f"unsupported format code {fmt.code:#06x}")
    elif width == 1:  # 8-bit WAV is unsigned, centred on 128
        data = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        data = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        triples = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
        ints = np.where(ints & 0x800000, ints - (1 << 24), ints)
        data = ints.astype(np.float32) / float(1 << 23)
    elif width == 4:
        data = (np.frombuffer(raw, dtype="<i4").astype(np.float64) / float(1 << 31)).astype(np.float32)
    else:
        raise _bad(path, f"unsupported sample size {fmt.bits} bits")
    return data.reshape(-1, fmt.channels)


def _to_stereo(data: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    channels = data.shape[1]
    if channels == DISCORD_CHANNELS:
        return data
    if channels == 1:
        return np.repeat(data, 2, axis=1)
    # More than two channels: keep the first two (front left/right in WAVE's channel order).
    return np.ascontiguousarray(data[:, :2])


def load_wav_48k_stereo(path: str | Path) -> bytes:
    """Read a WAV file: integer PCM of 8, 16, 24 or 32 bits (or 32-bit float), any rate and channels.

    Mono is duplicated to both channels; more than two channels keep the first two. Other rates are
    resampled with soxr to 48 kHz.

    Returns:
        Interleaved 48 kHz stereo s16le PCM.

    Raises:
        EmulatorError: ``EMULATOR_BAD_AUDIO`` if the file is missing or not a supported WAV.
    """
    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        raise _bad(path, str(exc)) from exc
    fmt, raw = _parse(path, blob)
    data = _to_stereo(_to_float(path, fmt, raw))
    if fmt.rate != DISCORD_RATE and len(data):
        data = np.asarray(soxr.resample(data, fmt.rate, DISCORD_RATE), dtype=np.float32)
    ints = np.clip(np.round(data * 32768.0), -32768, 32767).astype("<i2")
    return ints.tobytes()
