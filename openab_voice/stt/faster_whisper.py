"""Local speech-to-text: Whisper through faster-whisper's CTranslate2 model, with a fast path.

faster-whisper pads every encoder input to 30 s. The **fast path** feeds the encoder only the real
frames plus ``tail_pad_ms`` of silence and decodes greedily, guarded against the loops a truncated
input causes (:mod:`~openab_voice.stt.whisper_guards`): a token budget bounded by the audio length,
repetition truncation (:func:`guard_tokens`), confidence from the kept tokens' log-probabilities, and
the model's ``no_speech_prob``. A single utterance is decoded in stages (:meth:`FasterWhisperStt._generate`);
a batch in one stage. Finals (``final_mode="auto"``) use the fast path too and fall back to the padded
decode only when the guarded result looks wrong (``min_tokens_per_second``, ``fallback_confidence``).

Weights never download; :mod:`~openab_voice.stt.whisper_models` finds them in installed packages.
Measurements and history: docs/adr/0012-answer-while-the-end-is-confirmed.md
("Measurements moved from stt/faster_whisper.py").
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctranslate2
import numpy as np
import numpy.typing as npt
from faster_whisper import WhisperModel
from faster_whisper.audio import pad_or_trim
from faster_whisper.tokenizer import Tokenizer

from openab_voice.lifecycle import Lifecycle
from openab_voice.stt.base import Hypothesis, SttCapabilities, SttConfig
from openab_voice.stt.whisper_guards import (
    GuardResult,
    guard_tokens,
    kept_confidence,
    loop_cut,
    stage_tokens,
    token_budget,
)
from openab_voice.stt.whisper_models import resolve_model_dir, unavailable

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
MAX_AUDIO_S = 30.0  # Whisper's window: the encoder has 1500 positions of 20 ms
_MAX_LENGTH = 448  # the decoder's context (prompt + generated tokens)
_TIMESTAMP_TOKENS = 1501  # <|0.00|> to <|30.00|>: the vocabulary's last tokens


class FasterWhisperStt:
    """:class:`~openab_voice.stt.base.SpeechToText` on faster-whisper / CTranslate2.

    Thread-safe: the transcriber calls :meth:`transcribe` from worker threads.

    Args:
        config: provider settings.
        model_dir: a resolved model directory (default: :func:`resolve_model_dir` of ``config``).

    Raises:
        ProviderUnavailable: the weights are missing or CTranslate2 cannot load them.
    """

    def __init__(self, config: SttConfig, *, model_dir: Path | None = None) -> None:
        self.config = config
        path = model_dir or resolve_model_dir(config)
        try:
            self._model = WhisperModel(
                str(path),
                device=config.device,
                compute_type=config.compute_type,
                cpu_threads=config.cpu_threads,
                local_files_only=True,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise unavailable(
                f"cannot load the Whisper model from {path}: {exc}", model_path=str(path)
            ) from exc
        self._ct2: Any = self._model.model
        multilingual = bool(self._ct2.is_multilingual)
        if not multilingual and config.language not in (None, "en"):
            raise unavailable(f"{path.name} is English-only; language {config.language!r} unsupported")
        self._tokenizers: dict[str | None, Tokenizer] = {}
        # What the decoder may not say: the default non-speech symbols (-1) and every control token
        # after end-of-text (the same for every language of the model; see _after_stage).
        tokenizer = self._tokenizer(config.language)
        self._not_text = [-1, *range(tokenizer.eot + 1, tokenizer.timestamp_begin + _TIMESTAMP_TOKENS)]
        self._lock = threading.Lock()  # stats
        self._decoding = threading.Lock()
        self._life = Lifecycle("speech-to-text provider", started=True)
        # Decode counts by path and guard outcome, for the benchmark and the self-test.
        self.stats: dict[str, int] = {
            "fast": 0,
            "padded": 0,
            "fallbacks": 0,
            "doubtful": 0,  # quick finals returned doubtful instead of falling back
            "repetition": 0,
            "budget": 0,
            "staged": 0,
            "stalled": 0,  # decodes ended because a stage added no text (see _after_stage)
        }
        languages = tuple(self._model.supported_languages) if config.language is None else (config.language,)
        self._caps = SttCapabilities(
            name="faster-whisper",
            streaming=True,
            sample_rate=SAMPLE_RATE,
            languages=languages,
            model=config.model_path or config.model,
            batch=True,
        )

    @property
    def capabilities(self) -> SttCapabilities:
        return self._caps

    def transcribe(
        self, samples: npt.NDArray[np.int16], *, final: bool, quick: bool = False, prompt: str | None = None
    ) -> Hypothesis:
        """Decode one utterance from its start (16 kHz mono int16; at most 30 s are used).

        A ``quick`` final gets no padded fallback: a first pass the guards doubt comes back marked
        ``doubtful`` (the fallback is a 30 s encoder pass, 300 ms idle and over a second on a busy
        machine, which a speculative final that is never used would hold the decoder for).

        Raises:
            ProviderUnavailable: the provider was closed.
        """
        audio = np.asarray(samples).reshape(-1)[: int(MAX_AUDIO_S * SAMPLE_RATE)]
        waveform = audio.astype(np.float32) * (1.0 / 32768.0)
        mode = self.config.final_mode if final else "fast"
        # CTranslate2 runs one decode at a time on its single replica anyway; holding the lock
        # for the decode costs no throughput and lets close() wait instead of unloading under it.
        with self._decoding:
            if self._life.closed:
                raise unavailable("the speech-to-text provider is closed")
            if audio.size < SAMPLE_RATE // 100:
                return Hypothesis(text="", confidence=None, no_speech_prob=None)
            result = self._decode(waveform, padded=mode == "padded", prompt=prompt)
            if final and mode == "auto" and self._suspicious(result, waveform.size / SAMPLE_RATE):
                if quick:
                    self._count("doubtful")
                    return dataclasses.replace(result[0], doubtful=True)
                self._count("fallbacks")
                result = self._decode(waveform, padded=True, prompt=prompt)
        return result[0]

    def transcribe_batch(
        self, requests: Sequence[tuple[npt.NDArray[np.int16], bool, bool]]
    ) -> list[Hypothesis | Exception]:
        """Decode several utterances in one encoder and decoder pass (the fast path, each padded with
        silence to the longest; each guarded with its own token budget); a final the guards find
        suspicious is decoded again alone, padded, or for a ``quick`` one marked ``doubtful``, as in
        :meth:`transcribe`.

        On two cores, ten 2-4 s utterances take about a third of their sequential time.

        Raises:
            ProviderUnavailable: the provider was closed.
        """
        waves = [
            (np.asarray(s).reshape(-1)[: int(MAX_AUDIO_S * SAMPLE_RATE)].astype(np.float32) * (1.0 / 32768.0))
            for s, _, _ in requests
        ]
        out: list[Hypothesis | Exception] = [Hypothesis(text="", confidence=None, no_speech_prob=None)] * len(
            waves
        )
        with self._decoding:
            if self._life.closed:
                raise unavailable("the speech-to-text provider is closed")
            todo = [i for i, w in enumerate(waves) if w.size >= SAMPLE_RATE // 100]
            if not todo:
                return out
            try:
                results = self._decode_many([waves[i] for i in todo])
            except Exception as exc:  # the whole pass failed: every request in it did
                for i in todo:
                    out[i] = exc
                return out
            for i, result in zip(todo, results, strict=True):
                _, final, quick = requests[i]
                mode = self.config.final_mode
                redo = (
                    final
                    and mode != "fast"
                    and (mode == "padded" or self._suspicious(result, waves[i].size / SAMPLE_RATE))
                )
                if redo and quick and mode == "auto":  # doubtful: said so, not decoded again
                    self._count("doubtful")
                    out[i] = dataclasses.replace(result[0], doubtful=True)
                    continue
                if redo:
                    if mode == "auto":
                        self._count("fallbacks")
                    try:
                        result = self._decode(waves[i], padded=True, prompt=None)
                    except Exception as exc:
                        out[i] = exc
                        continue
                out[i] = result[0]
        return out

    def close(self) -> None:
        """Free the model's memory (idempotent; waits for a decode in progress).

        Later decodes raise ProviderUnavailable.
        """
        with self._decoding:
            if self._life.begin_close():
                self._ct2.unload_model()
                self._life.finish_close()

    # --- decoding -------------------------------------------------------------------------------

    def _decode(
        self, waveform: npt.NDArray[np.float32], *, padded: bool, prompt: str | None
    ) -> tuple[Hypothesis, GuardResult]:
        cfg = self.config
        audio_s = waveform.size / SAMPLE_RATE
        extractor = self._model.feature_extractor
        if padded:
            features = pad_or_trim(extractor(waveform))
        else:
            pad = min(
                int(cfg.tail_pad_ms * SAMPLE_RATE / 1000), int(MAX_AUDIO_S * SAMPLE_RATE) - waveform.size
            )
            features = extractor(np.pad(waveform, (0, max(0, pad))))
            # The encoder's first convolution has stride 2; at most 3000 frames fit its positions.
            frames = min(features.shape[-1] // 2 * 2, 3000)
            features = features[:, :frames]
        self._count("padded" if padded else "fast")
        encoded = self._model.encode(features)
        tokenizer = self._tokenizer(self._language(encoded))
        context = self._prompt_tokens(tokenizer, prompt)
        budget = min(
            token_budget(audio_s, per_second=cfg.max_tokens_per_second, margin=cfg.token_margin),
            _MAX_LENGTH // 2 - 1,
        )
        # A padded decode sees the whole 30 s window and ends by itself: one stage.
        stage = budget if padded else self._first_stage(audio_s, budget)
        ((result, tokens, looped),) = self._generate(encoded, [context], [budget], [stage], eot=tokenizer.eot)
        return self._hypothesis(result, tokens, looped, tokenizer=tokenizer, budget=budget)

    def _decode_many(self, waves: list[npt.NDArray[np.float32]]) -> list[tuple[Hypothesis, GuardResult]]:
        """The fast path for several utterances in one pass (features padded to the longest)."""
        cfg = self.config
        extractor = self._model.feature_extractor
        pad = int(cfg.tail_pad_ms * SAMPLE_RATE / 1000)
        feats = [
            extractor(np.pad(w, (0, max(0, min(pad, int(MAX_AUDIO_S * SAMPLE_RATE) - w.size)))))
            for w in waves
        ]
        frames = min(max(f.shape[-1] for f in feats) // 2 * 2, 3000)
        batch = np.stack([np.pad(f[:, :frames], ((0, 0), (0, max(0, frames - f.shape[-1])))) for f in feats])
        for _ in waves:
            self._count("fast")
        encoded = self._ct2.encode(ctranslate2.StorageView.from_array(batch.astype(np.float32)), to_cpu=False)
        languages = self._languages(encoded, len(waves))
        tokenizers = [self._tokenizer(lang) for lang in languages]
        contexts = [self._prompt_tokens(t, None) for t in tokenizers]
        budgets = [
            min(
                token_budget(
                    w.size / SAMPLE_RATE, per_second=cfg.max_tokens_per_second, margin=cfg.token_margin
                ),
                _MAX_LENGTH // 2 - 1,
            )
            for w in waves
        ]
        # One stage: a batch steps until its longest item is done, so stopping one item's loop early
        # saves nothing while another goes on, and each extra stage is another pass over the batch.
        generated = self._generate(encoded, contexts, budgets, budgets, eot=tokenizers[0].eot)
        return [
            self._hypothesis(result, tokens, looped, tokenizer=tokenizer, budget=budget)
            for (result, tokens, looped), tokenizer, budget in zip(
                generated, tokenizers, budgets, strict=True
            )
        ]

    def _first_stage(self, audio_s: float, budget: int) -> int:
        cfg = self.config
        return stage_tokens(
            audio_s, per_second=cfg.stage_tokens_per_second, margin=cfg.stage_margin, budget=budget
        )

    def _generate(
        self, encoded: Any, contexts: list[list[int]], budgets: list[int], stages: list[int], *, eot: int
    ) -> list[tuple[Any, list[int], int | None]]:
        """Greedy decodes of a batch, in stages; per item its last result, text tokens and loop cut.

        On the fast path's truncated encoder input the model often does not end: it starts the text
        over and copies it until the token budget runs out, and every copied token costs a decoder
        step (most of a short utterance's decode). So each item first gets ``stages[i]`` tokens (about
        what speech says in that time); an item that neither ended nor shows a loop there
        (:func:`loop_cut`) goes on from what it said, its tokens given back as the prompt's prefix,
        with twice the room, up to its budget. Greedy decoding is deterministic, so every stage
        starts with the tokens and scores of the one before: the result is the unstaged decode's,
        cut where :func:`guard_tokens` would cut it. A batch is given its budgets as its stages
        (one pass), so only a single decode ever goes on to a second stage. Every stage must add
        text, so a decode always ends (:meth:`_after_stage`).
        """
        assert len(contexts) == 1 or stages == budgets, "only a single decode is staged"
        cfg = self.config
        out: list[tuple[Any, list[int], int | None] | None] = [None] * len(contexts)
        prefixes: list[list[int]] = [[] for _ in contexts]
        limits = list(stages)
        todo = list(range(len(contexts)))
        while todo:
            prompts = [contexts[i] + prefixes[i] for i in todo]
            longest = max(limits[i] for i in todo)
            results = self._ct2.generate(
                encoded,
                prompts,
                beam_size=cfg.beam_size,
                # CTranslate2 generates at most min(max_length / 2, max_length - len(prompt)) tokens,
                # the prefix included (measured), so ask for room for the stage under both bounds.
                max_length=min(_MAX_LENGTH, max(2 * longest, longest + max(len(p) for p in prompts))),
                return_scores=True,
                return_no_speech_prob=True,
                return_logits_vocab=True,
                suppress_blank=True,
                suppress_tokens=self._not_text,
            )
            going: list[int] = []
            for i, result in zip(todo, results, strict=True):
                tokens, looped, done = self._after_stage(result, prefixes[i], budgets[i], eot)
                if done:
                    out[i] = (result, tokens, looped)
                    continue
                prefixes[i] = tokens
                limits[i] = min(budgets[i], max(2 * limits[i], len(tokens) + cfg.stage_margin))
                going.append(i)
            todo = going
        return [item for item in out if item is not None]

    def _after_stage(
        self, result: Any, prefix: list[int], budget: int, eot: int
    ) -> tuple[list[int], int | None, bool]:
        """One item after a stage: its text tokens, where a loop in them starts, and whether it is done.

        The control tokens after end-of-text (start, language, task, no-speech, timestamps) are
        suppressed, as the reference decoders do. Left free, the multilingual base answered 0.3 s of
        Chinese with eight ``<|zh|>`` and no text; a stage that gives back what it was given asks the
        same question again, for ever (one such decode held a test run's decode thread until CI gave
        up). So a control token that still comes ends the text where it stands, and a stage that
        adds no text ends the decode.
        """
        sequence = result.sequences_ids[0]
        tokens = list(itertools.takewhile(lambda t: t < eot, sequence))
        # It ran an end step, or said a control token: the text is over.
        if len(result.logits[0]) > len(sequence) or len(tokens) < len(sequence) or len(tokens) >= budget:
            return tokens, None, True
        if len(tokens) <= len(prefix):  # nothing new: the next stage would be this one
            self._count("stalled")
            return tokens, None, True
        looped = loop_cut(tokens)
        if looped is not None:
            self._count("staged")
            return tokens, looped, True
        return tokens, None, False

    def _hypothesis(
        self, result: Any, tokens: list[int], looped: int | None, *, tokenizer: Tokenizer, budget: int
    ) -> tuple[Hypothesis, GuardResult]:
        if looped is not None:
            guarded = GuardResult(tokens=tuple(tokens[:looped]), cut="repetition")
        else:
            guarded = guard_tokens(tokens, budget=budget)
        if guarded.cut:
            self._count(guarded.cut)
        text = tokenizer.decode(list(guarded.tokens)).strip()
        confidence = kept_confidence(result, guarded.tokens, complete=not guarded.cut, eot=tokenizer.eot)
        return (
            Hypothesis(text=text, confidence=confidence, no_speech_prob=float(result.no_speech_prob)),
            guarded,
        )

    def _languages(self, encoded: Any, n: int) -> list[str | None]:
        if not self._ct2.is_multilingual:
            return [None] * n
        if self.config.language is not None:
            return [self.config.language] * n
        return [str(item[0][0])[2:-2] for item in self._ct2.detect_language(encoded)]

    def _suspicious(self, result: tuple[Hypothesis, GuardResult], audio_s: float) -> bool:
        hyp, guarded = result
        cfg = self.config
        speech = hyp.no_speech_prob is None or hyp.no_speech_prob < 0.5
        if guarded.cut and len(guarded.tokens) < cfg.min_tokens_per_second * audio_s:
            return speech
        return speech and hyp.confidence is not None and hyp.confidence < cfg.fallback_confidence

    def _language(self, encoded: Any) -> str | None:
        if not self._ct2.is_multilingual:
            return None
        if self.config.language is not None:
            return self.config.language
        # detect_language returns, per batch item, ("<|en|>", p) pairs best first.
        best = self._ct2.detect_language(encoded)[0][0][0]
        return str(best)[2:-2]

    def _tokenizer(self, language: str | None) -> Tokenizer:
        tokenizer = self._tokenizers.get(language)
        if tokenizer is None:
            tokenizer = Tokenizer(
                self._model.hf_tokenizer,
                bool(self._ct2.is_multilingual),
                task="transcribe",
                language=language or "en",
            )
            self._tokenizers[language] = tokenizer
        return tokenizer

    @staticmethod
    def _prompt_tokens(tokenizer: Tokenizer, prompt: str | None) -> list[int]:
        context: list[int] = []
        if prompt and prompt.strip():
            previous = tokenizer.encode(" " + prompt.strip())[-(_MAX_LENGTH // 4) :]
            context = [tokenizer.sot_prev, *previous]
        return [*context, *tokenizer.sot_sequence, tokenizer.no_timestamps]

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1


def create(config: SttConfig) -> FasterWhisperStt:
    """Registry factory for ``"faster-whisper"``."""
    return FasterWhisperStt(config)
