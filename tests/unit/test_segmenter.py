"""SentenceSegmenter: sentences out as soon as they end, whatever the delta boundaries."""

from __future__ import annotations

import pytest

from openab_voice.engine.segmenter import SentenceSegmenter


def _feed(text: str, step: int, segmenter: SentenceSegmenter | None = None) -> list[str]:
    seg = segmenter or SentenceSegmenter()
    out: list[str] = []
    for i in range(0, len(text), step):
        out += seg.push(text[i : i + step])
    return out + seg.flush()


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
def test_same_sentences_whatever_the_delta_size(step: int) -> None:
    text = (
        "Hello there! I'm Dr. Smith, e.g. a doctor. Pi is 3.14 roughly. Really? Yes… "
        "J. R. R. Tolkien wrote it.\nNew line without stop\nDone."
    )
    assert _feed(text, step) == [
        "Hello there!",
        "I'm Dr. Smith, e.g. a doctor.",
        "Pi is 3.14 roughly.",
        "Really?",
        "Yes…",
        "J. R. R. Tolkien wrote it.",
        "New line without stop",
        "Done.",
    ]


def test_sentence_is_returned_as_soon_as_the_next_delta_confirms_it() -> None:
    seg = SentenceSegmenter()
    assert seg.push("It works") == []
    assert seg.push(".") == []  # "." could still be "works.com" or a decimal
    assert seg.push(" And") == ["It works."]
    assert seg.push(" more\n") == ["And more"]
    assert seg.flush() == []


def test_decimal_split_across_deltas_is_not_a_sentence_end() -> None:
    seg = SentenceSegmenter()
    assert seg.push("It costs 3.") == []
    assert seg.push("50 dollars. Ok") == ["It costs 3.50 dollars."]
    assert seg.flush() == ["Ok"]


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_code_fence_is_skipped_entirely(step: int) -> None:
    text = "Here is the fix:\n```python\nprint('Do not. Say! This?')\nx = 1.5\n```\nThat should work. ~~~\nmore code.\n~~~\nBye."
    assert _feed(text, step) == ["Here is the fix:", "That should work.", "Bye."]


def test_fence_split_between_deltas() -> None:
    seg = SentenceSegmenter()
    out = seg.push("Look. `")
    out += seg.push("`")
    out += seg.push("`sh\nrm -rf build. now\n`")
    out += seg.push("``\nClean")
    assert out + seg.flush() == ["Look.", "Clean"]


def test_unclosed_fence_is_dropped_at_flush() -> None:
    assert _feed("Run this:\n```\nmake all. then", 4) == ["Run this:"]


def test_inline_code_is_not_a_fence() -> None:
    assert _feed("Use `ls` to list. Then stop.", 3) == ["Use to list.", "Then stop."]


def test_numbered_list_markers_are_not_sentences() -> None:
    text = "Steps:\n1. Install it.\n2. Run it\n10. Done\nIn 2024. Then"
    assert _feed(text, 2) == ["Steps:", "Install it.", "Run it", "Done", "In 2024.", "Then"]


def test_markdown_and_emoji_only_pieces_are_dropped() -> None:
    text = "## Result 🎉\n\n---\n**Passed.** 👍\n| a | b |\n|---|---|\n"
    assert _feed(text, 3) == ["Result", "Passed.", "a, b"]


def test_long_run_without_punctuation_is_cut_at_a_clause() -> None:
    seg = SentenceSegmenter(soft_limit=60, hard_limit=120, min_chars=10)
    text = "so we looked at the logs and the traces for a while, then we found the bug in the retry loop, and fixed it"
    out: list[str] = []
    first_at = None
    for i, ch in enumerate(text):
        got = seg.push(ch)
        if got and first_at is None:
            first_at = i
        out += got
    out += seg.flush()
    assert out == [
        "so we looked at the logs and the traces for a while,",
        "then we found the bug in the retry loop, and fixed it",  # short enough to wait for an end
    ]
    assert first_at is not None and first_at < 70  # TTS could start long before the end


def test_long_run_without_any_clause_is_cut_at_a_space() -> None:
    seg = SentenceSegmenter(soft_limit=30, hard_limit=50, min_chars=10)
    words = " ".join(f"word{i}" for i in range(20))
    pieces = _feed(words, 1, seg)
    assert " ".join(pieces) == words
    assert all(len(piece) <= 50 for piece in pieces)
    assert len(pieces) > 1


def test_reset_forgets_the_interrupted_turn() -> None:
    seg = SentenceSegmenter()
    seg.push("Half a sent")
    seg.push("```\ncode")
    seg.reset()
    assert seg.push("Fresh start. ") == ["Fresh start."]


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        SentenceSegmenter(soft_limit=10, hard_limit=5)


def test_labels_are_stripped_per_sentence_and_a_bare_wake_name_is_dropped() -> None:
    seg = SentenceSegmenter(labels=("bob",), own_name="Jarvis")
    out: list[str] = []
    for token in ["Jar", "vis.", " bob", ":", " I'm", " glad.", " Jarvis: Bye", " now."]:
        out += seg.push(token)
    out += seg.flush()
    assert out == ["I'm glad.", "Bye now."]


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_the_first_piece_may_end_at_a_clause_whatever_the_delta_size(step: int) -> None:
    text = "Paris is the capital of France, and it lies on the Seine. It is big, and old."
    seg = SentenceSegmenter(first_clause_chars=16)
    # Only the first piece is cut early: later clauses wait for their sentence's end.
    assert _feed(text, step, seg) == [
        "Paris is the capital of France,",
        "and it lies on the Seine.",
        "It is big, and old.",
    ]


def test_the_first_clause_cut_is_certain_and_never_a_lone_word() -> None:
    seg = SentenceSegmenter(first_clause_chars=16)
    assert seg.push("Well, the capital of France") == []  # "Well," is too short to go alone
    assert seg.push(",") == []  # a comma ends a clause only once a space follows ("5,433")
    assert seg.push(" is Paris.") == ["Well, the capital of France,"]
    assert seg.flush() == ["is Paris."]
    plain = SentenceSegmenter()  # off by default: the realtime engine's transcripts are not cut
    assert plain.push("Paris is the capital of France, and it is old. ") == [
        "Paris is the capital of France, and it is old."
    ]
