"""``bench stt --language zh``: Chinese beside English, each with the models that can hear it, in one run.

Rows (same process, back to back, same settings and front end): Chinese with the multilingual Whisper
base, English with ``tiny.en`` and with base. Each row is :func:`openab_voice.bench.stt.run` on its
language's shipped clips, said in turn as many times as ``rounds`` rounds of the longest list: the Chinese clips made by
``scripts/make_zh_assets.py`` (``openab_voice/testing/assets/zh/``), the English Piper ones. Accuracy is
the character error rate (Chinese is compared as simplified) and, for English, the word error rate;
latency is the first stable partial and the final, P50 / P95. The target is the one of ``bench stt``:
the P95 first stable partial within :data:`~openab_voice.bench.stt.TARGET_FIRST_STABLE_MS`, per row.
``choice`` names, per language, the row meeting the target with the lowest error (ADR 0023).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from openab_voice.audio import scenes
from openab_voice.bench import stt as stt_bench
from openab_voice.stt.base import SttConfig

__all__ = ["ROWS", "run"]

ROWS: tuple[tuple[str, Literal["tiny.en", "base"]], ...] = (("zh", "base"), ("en", "tiny.en"), ("en", "base"))
"""(language, model) per row, in the order they run."""


def _clips(language: str) -> dict[str, str]:
    return scenes.chinese_clips("people") if language == "zh" else dict(stt_bench.CLIPS)


def run(*, rounds: int = 1, config: SttConfig | None = None) -> dict[str, Any]:
    """Every row of :data:`ROWS` on its clips: ``rounds`` times the longest list's length, each row.

    Returns:
        A JSON-friendly dict: ``rows`` (each a compact line of the table, with the full ``bench stt``
        result under ``detail``), ``choice`` per language, and ``meets_target`` (every row's).

    Raises:
        ProviderUnavailable: a model (tiny.en, the base parts) or OpenCC is not installed.
    """
    if rounds < 1:
        raise ValueError("need at least one round")
    base = config or SttConfig()
    rows = []
    utterances = rounds * max(len(_clips(language)) for language, _ in ROWS)  # the same on every row
    for language, model in ROWS:
        row_config = dataclasses.replace(base, model=model, language=language)
        result = stt_bench.run(
            utterances=utterances, config=row_config, clips=_clips(language), compare_padded=False
        )
        rows.append(_row(language, model, result))
    return {
        "rows": rows,
        "choice": _choice(rows),
        "target_first_stable_ms": stt_bench.TARGET_FIRST_STABLE_MS,
        "target_statistic": "p95",
        "meets_target": all(row["meets_target"] for row in rows),
    }


def _row(language: str, model: str, result: dict[str, Any]) -> dict[str, Any]:
    first, final = result["first_stable_partial_ms"], result["final_latency_ms"]
    return {
        "language": language,
        "model": model,
        "utterances": result["utterances"],
        "cer": result["cer"],
        "wer": result["wer"] if language != "zh" else None,  # Chinese has no spaces: a word is a character
        "first_stable_partial_ms": {"p50": first["p50"], "p95": first["p95"]},
        "final_latency_ms": {"p50": final["p50"], "p95": final["p95"]},
        "meets_target": result["meets_target"],
        "detail": result,
    }


def _choice(rows: list[dict[str, Any]]) -> dict[str, str | None]:
    """Per language, the model meeting the latency target with the lowest CER (None: none meets it)."""
    chosen: dict[str, str | None] = {}
    for language in dict.fromkeys(row["language"] for row in rows):
        fit = [row for row in rows if row["language"] == language and row["meets_target"]]
        chosen[language] = min(fit, key=lambda row: row["cer"])["model"] if fit else None
    return chosen
