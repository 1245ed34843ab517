"""The backchannel classifier: what said over the bot lets it go on."""

from __future__ import annotations

import pytest

from openab_voice.engine.backchannel import MAX_DURATION_S, Verdict, classify, words_of


@pytest.mark.parametrize(
    "text",
    [
        "Yeah.",
        "yeah yeah",
        "Mm-hmm.",
        "Mmm-hmm.",
        "Mhm.",
        "Uh-huh.",
        "Okay.",
        "OK.",
        "Right.",
        "Sure.",
        "Yep.",
        "I see.",
        "Oh, I see.",
        "Got it.",
        "Alright.",
        "All right.",
        "Cool.",
        "Okay, got it.",
        "That's right.",
        "Yes\u2019",
    ],
)
def test_acknowledgements_are_backchannels(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name="Jarvis") is Verdict.BACKCHANNEL


@pytest.mark.parametrize(
    "text",
    [
        "Wait.",
        "Stop.",
        "Wait, stop please.",
        "Hold on.",
        "No.",
        "Yeah, no.",
        "Okay, wait.",
        "Yeah but",
        "Uh-huh, actually.",
        "Jarvis.",
        "Okay Jarvis.",
    ],
)
def test_cut_words_and_the_wake_name_are_commands(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name="Jarvis") is Verdict.COMMAND


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of Italy?",
        "Yeah, tell me more about it.",
        "I",  # a sentence's first word (a partial), not "I see"
        "Uh-uh.",  # a no, spelt like a continuer but not one
        "Um.",  # a speaker holding the floor before speaking
        "Yes yes yes yes yes.",  # more words than a backchannel has
    ],
)
def test_other_words_are_speech(text: str) -> None:
    assert classify(text, duration_s=0.6, wake_name="Jarvis") is Verdict.SPEECH


def test_long_speech_is_no_backchannel_whatever_the_words() -> None:
    assert classify("Okay.", duration_s=MAX_DURATION_S) is Verdict.BACKCHANNEL
    assert classify("Okay.", duration_s=MAX_DURATION_S + 0.1) is Verdict.SPEECH
    assert classify("Okay.") is Verdict.BACKCHANNEL  # no duration known yet (a partial)


def test_no_words_is_empty() -> None:
    assert classify("") is Verdict.EMPTY
    assert classify(" ... ") is Verdict.EMPTY


def test_a_multi_word_wake_name_is_matched_as_a_phrase() -> None:
    assert classify("Okay, open ab.", wake_name="Open AB") is Verdict.COMMAND
    assert classify("Okay, open.", wake_name="Open AB") is Verdict.SPEECH


def test_words_are_spelt_as_whisper_varies_them() -> None:
    assert words_of("Mm-hmm.") == words_of("Mmmm-hmmm") == ("mmhmm",)
    assert words_of("That\u2019s right!") == ("that's", "right")
    assert words_of("'Okay'") == ("okay",)
