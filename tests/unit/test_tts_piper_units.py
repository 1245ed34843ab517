"""Where Piper's first unit of a sentence ends, and how its audio joins the rest (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from openab_voice.providers.tts_piper_units import (
    JOIN_QUIET_MS,
    MIN_REST_WORDS,
    full_scale_gain,
    quiet_edges,
    rest_gain,
    split_first_unit,
    trim_head,
    trim_tail,
)

RATE = 22_050


def _ph(text: str) -> list[str]:
    """Phonemes as espeak gives them: one character each, words separated by spaces."""
    return list(text)


def _words(phonemes: list[str]) -> str:
    return "".join(phonemes)


def test_the_first_unit_is_the_first_words_at_a_word_boundary() -> None:
    split = split_first_unit(_ph("ðə kwˈɪkɪst wˈeɪ tə fˈɪks ðɪs ɪz tə ɹɪstˈɑːɹt ðə sˈɜːvɪs."), 4)
    assert split is not None
    assert (_words(split.first), _words(split.rest), split.at_clause) == (
        "ðə kwˈɪkɪst wˈeɪ tə",
        "fˈɪks ðɪs ɪz tə ɹɪstˈɑːɹt ðə sˈɜːvɪs.",
        False,
    )


def test_an_earlier_clause_mark_ends_the_first_unit_where_the_speaker_pauses_anyway() -> None:
    split = split_first_unit(_ph("wˈeɪt, stˈɑːp plˈiːz, aɪ wˈɑːnt tʊ ˈæsk juː sˈʌmθɪŋ ˈɛls."), 4)
    assert split is not None
    assert (_words(split.first), _words(split.rest), split.at_clause) == (
        "wˈeɪt, stˈɑːp plˈiːz,",
        "aɪ wˈɑːnt tʊ ˈæsk juː sˈʌmθɪŋ ˈɛls.",
        True,
    )
    # Never a lone word: "Jarvis," alone was heard as "service,". The cut falls after four words.
    named = split_first_unit(_ph("dʒˈɑːɹvɪs, tˈɛl miː əbˌaʊt ðɪ ˈaɪfəl tˈaʊɚ ænd ɪts hˈɪstɚɹi."), 4)
    assert named is not None and _words(named.first) == "dʒˈɑːɹvɪs, tˈɛl miː əbˌaʊt" and not named.at_clause
    # One word past the word count still counts ("To answer your question, ..."): 4 words + the mark.
    late = split_first_unit(_ph("tʊ ˈænsɚ jʊɹ kwˈɛstʃən, ðə bˈɪld tˈeɪks fˈɔːɹ mˈɪnɪts."), 3)
    assert late is not None and _words(late.first) == "tʊ ˈænsɚ jʊɹ kwˈɛstʃən," and late.at_clause


def test_a_short_sentence_or_zero_words_is_not_split() -> None:
    assert split_first_unit(_ph("ðə kˈæpɪɾəl ʌv fɹˈæns ɪz pˈæɹɪs."), 0) is None
    # Fewer than MIN_REST_WORDS after the fourth word: quick to synthesize whole, and heard better so.
    assert MIN_REST_WORDS == 4
    assert split_first_unit(_ph("wʌt ɪz ðə kˈæpɪɾəl ʌv fɹˈæns?"), 4) is None
    assert split_first_unit(_ph("ɪt lˈaɪz ɔnðə ɹˈɪvɚ sˈeɪn ɪn pˈæɹɪs."), 4) is None
    assert split_first_unit(_ph("ˌæbsəlˈuːtli."), 1) is None
    # A clause mark too close to the end is no cut either.
    assert split_first_unit(_ph("jˈɛs, aɪ θˈɪŋk sˈoʊ."), 4) is None


def _tone(seconds: float, amplitude: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * 200 * t)).astype(np.float32)


def test_the_join_keeps_only_a_short_quiet_on_each_side() -> None:
    quiet = np.zeros(int(0.2 * RATE), dtype=np.float32)
    first = np.concatenate([_tone(0.5, 0.5), quiet])
    rest = np.concatenate([quiet, _tone(0.5, 0.5)])
    assert quiet_edges(first, RATE)[1] == pytest.approx(0.2 * RATE, abs=RATE // 200)
    kept_tail = quiet_edges(trim_tail(first, RATE), RATE)[1]
    kept_lead = quiet_edges(trim_head(rest, RATE), RATE)[0]
    assert kept_tail == pytest.approx(JOIN_QUIET_MS * RATE // 1000, abs=RATE // 200)
    assert kept_lead == pytest.approx(JOIN_QUIET_MS * RATE // 1000, abs=RATE // 200)
    # Only quiet is cut: the speech on each side is whole.
    assert np.array_equal(trim_tail(first, RATE)[: int(0.5 * RATE)], first[: int(0.5 * RATE)])
    assert np.array_equal(trim_head(rest, RATE)[-int(0.5 * RATE) :], rest[-int(0.5 * RATE) :])


def test_the_rest_keeps_the_first_units_gain_unless_it_would_clip() -> None:
    first = full_scale_gain(0.5)
    assert first == 2.0
    assert rest_gain(first, 0.25) == 2.0  # quieter rest: not boosted above the words before it
    assert rest_gain(first, 0.8) == pytest.approx(1.25)  # louder rest: brought to full scale, no clip
    assert full_scale_gain(0.0) == 0.0 and rest_gain(0.0, 0.5) == 2.0  # a silent first unit
