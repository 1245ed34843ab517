"""The faster-whisper fast path's guards: how many tokens a greedy decode may produce, where it is cut
when it starts copying itself, and how much the kept tokens are trusted.

A truncated encoder input makes plain greedy decoding loop (the first copy of the text is almost
always right, then the model starts over); :mod:`openab_voice.stt.faster_whisper` decodes
such inputs and keeps only what these functions let through. Pure, apart from reading a CTranslate2
result's logits and scores in :func:`kept_confidence`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardResult:
    """Tokens kept by :func:`guard_tokens` and why it cut (``""`` when nothing was cut)."""

    tokens: tuple[int, ...]
    cut: Literal["", "repetition", "budget"]


def token_budget(audio_s: float, *, per_second: float, margin: int) -> int:
    """Most text tokens a decode of ``audio_s`` seconds may produce."""
    return math.ceil(max(0.0, audio_s) * per_second) + margin


def stage_tokens(audio_s: float, *, per_second: float, margin: int, budget: int) -> int:
    """Tokens the first stage of a staged decode may produce (at most ``budget``; 0: not staged)."""
    if per_second <= 0:
        return budget
    return min(budget, math.ceil(max(0.0, audio_s) * per_second) + margin)


def loop_cut(tokens: Sequence[int], *, ngram: int = 3, max_run: int = 3) -> int | None:
    """Where a decode that has not ended yet already shows a repetition loop (None: no loop yet).

    The two signatures of :func:`guard_tokens` that a longer decode keeps once they appear: one
    token ``max_run`` times in a row, or a tail of ``ngram`` or more tokens copying, with a fixed
    period, what came before it (the text restarted). A longer greedy decode of the same input starts
    with these very tokens and goes on copying, so :func:`guard_tokens` would cut it at the same place.
    """
    cut = guard_tokens(tokens, budget=len(tokens) + 1, ngram=ngram, max_run=max_run)
    return len(cut.tokens) if cut.cut == "repetition" else None


def guard_tokens(tokens: Sequence[int], *, budget: int, ngram: int = 3, max_run: int = 3) -> GuardResult:
    """Cut a greedy decode at the start of a repetition loop, and at the token budget.

    Everything from the first repeat on goes when the decode shows a loop's signature:

    * one token ``max_run`` times in a row ("pass pass pass");
    * an output that ends copying itself: its last ``ngram`` or more tokens repeat what came just
      before with a fixed period (the text restarted; the model then ended mid-copy or ran out);
    * an output that never ended (it used the whole budget) repeating a token ``ngram``: a loop
      that drifted. Outputs that ended by themselves keep such repeats, because speech does say
      "one of the" twice in twenty seconds.
    """
    seq = list(tokens[:budget])
    cut = len(seq)
    for i in range(max_run - 1, len(seq)):
        if len(set(seq[i + 1 - max_run : i + 1])) == 1:
            cut = i + 2 - max_run
            break
    for period in range(1, len(seq) - ngram + 1):
        start = len(seq)
        while start - period > 0 and seq[start - 1] == seq[start - 1 - period]:
            start -= 1
        if len(seq) - start >= ngram:
            cut = min(cut, start)
    if len(tokens) >= budget:
        seen: set[tuple[int, ...]] = set()
        for i in range(min(cut, len(seq) - ngram + 1)):
            gram = tuple(seq[i : i + ngram])
            if gram in seen:
                cut = i
                break
            seen.add(gram)
    if cut < len(seq):
        return GuardResult(tokens=tuple(seq[:cut]), cut="repetition")
    return GuardResult(tokens=tuple(seq), cut="budget" if len(tokens) >= budget else "")


def kept_confidence(result: Any, kept: Sequence[int], *, complete: bool, eot: int) -> float | None:
    """exp(mean log-probability) of the kept tokens (and of the end token when the text ended).

    Falls back to CTranslate2's length-normalised score when the per-step logits are missing.
    """
    logits = result.logits[0] if getattr(result, "logits", None) else None
    if not kept:
        return None
    steps = len(kept) + (1 if complete else 0)
    if logits is None or len(logits) < steps:
        return float(math.exp(result.scores[0])) if result.scores else None
    wanted = [*kept, eot][:steps]
    total = 0.0
    for step, token in enumerate(wanted):
        row = np.asarray(logits[step], dtype=np.float64).reshape(-1)
        top = float(row.max())
        total += float(row[token]) - (top + math.log(float(np.exp(row - top).sum())))
    return float(math.exp(total / steps))
