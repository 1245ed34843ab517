"""``bench stt --language zh``: the character error rate (Chinese compared as simplified), the shipped
Chinese clips and their manifest, and the comparison run on real decodes (one round: the multilingual
base on every Chinese clip, tiny.en and base on the English ones)."""

from __future__ import annotations

import json
import wave

import pytest

from openab_voice.audio import scenes
from openab_voice.bench import stt_languages
from openab_voice.bench.stt import character_error_rate
from openab_voice.errors import ProviderUnavailable


def test_character_error_rate_counts_characters_and_reads_traditional_as_simplified() -> None:
    assert character_error_rate("记住：我们下周五发布新版本。", "記住我們下週五發布新版本") == 0.0
    assert character_error_rate("法国的首都是什么？", "法國的首都是甚") == pytest.approx(
        2 / 8
    )  # ？ is not counted
    assert character_error_rate("你好", "") == 1.0
    # English: letters and the spaces between words, case and punctuation ignored.
    assert character_error_rate("Hello, world.", "hello world") == 0.0
    assert character_error_rate("ab cd", "ab ce") == pytest.approx(1 / 5)


def test_the_chinese_clips_are_shipped_with_their_texts() -> None:
    people, bot = scenes.chinese_clips("people"), scenes.chinese_clips("bot")
    assert people["zh/question"] == "法国的首都是什么？" and "zh/capital" in bot
    assert not people.keys() & bot.keys()
    for name in (*people, *bot):
        path = scenes.ASSETS_DIR / f"{name}.wav"
        with wave.open(str(path), "rb") as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16_000, 1, 2)
            assert wav.getnframes() > 16_000  # at least a second of speech
        lo, hi = scenes.active_span(scenes.load_clip(name))
        assert hi - lo > 0.8, name


def test_the_comparison_runs_every_row_and_chooses_by_target_then_error() -> None:
    try:
        result = stt_languages.run(rounds=1)
    except ProviderUnavailable as exc:
        pytest.skip(f"a model is not installed: {exc}")
    json.dumps(result)
    rows = {(row["language"], row["model"]): row for row in result["rows"]}
    assert list(rows) == list(stt_languages.ROWS)
    zh = rows["zh", "base"]
    assert zh["utterances"] == len(scenes.chinese_clips("people")) and zh["wer"] is None
    assert zh["cer"] <= 0.25, zh["detail"]["per_utterance"]  # measured 0.04-0.05: far from noise
    for row in rows.values():
        first = row["first_stable_partial_ms"]
        assert row["meets_target"] is (first["p95"] <= result["target_first_stable_ms"])
        assert row["utterances"] == zh["utterances"]  # the same count on each row: comparable P95s
    assert result["meets_target"] is all(row["meets_target"] for row in rows.values())
    for language, model in result["choice"].items():
        fit = [r for (lang, _), r in rows.items() if lang == language and r["meets_target"]]
        assert model == (min(fit, key=lambda r: r["cer"])["model"] if fit else None)
