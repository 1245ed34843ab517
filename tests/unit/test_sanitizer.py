"""speakable(): what reaches TTS is words and punctuation, never markup, code, links, ids or emoji."""

from __future__ import annotations

import pytest

from openab_voice.engine.sanitizer import speakable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Plain text stays.", "Plain text stays."),
        ("**Bold**, *italic*, ***both***, __under__ and _single_.", "Bold, italic, both, under and single."),
        ("~~old~~ new ||secret||", "old new secret"),
        ("# Title", "Title"),
        ("### Section ###", "Section"),
        ("> quoted line", "quoted line"),
        ("- first\n* second\n+ third\n1. fourth\n2) fifth", "first second third fourth fifth"),
        ("- [x] done task", "done task"),
        ("See [the docs](https://example.com/docs) now.", "See the docs now."),
        ("![a diagram](https://x.test/a.png) here", "a diagram here"),
        ("Visit https://example.com/a?b=1&c=2 today.", "Visit today."),
        ("Or www.example.org, maybe.", "Or, maybe."),
        ("Link <https://example.com> inline.", "Link inline."),
        ("Run `rm -rf /tmp/x` carefully.", "Run carefully."),
        ("Before\n```python\nprint('hi.')\n```\nAfter", "Before After"),
        ("Unclosed ```js\nconsole.log(1)", "Unclosed"),
        ("| Name | Role |\n|------|:----:|\n| Ana | lead |", "Name, Role Ana, lead"),
        ("Above\n---\nBelow", "Above Below"),
        ("Great job 🎉🎉 team 👍🏽!", "Great job team!"),
        ("Flags 🇫🇷 and keycaps 1️⃣ and family 👨‍👩‍👧", "Flags and keycaps 1 and family"),
        ("Stars ⭐ and arrows ➡️ go.", "Stars and arrows go."),
        ("<:blobwave:123456789012345678> hi <a:party:123456789012345678>", "hi"),
        (":thumbsup: sounds good :sticker_name:", "sounds good"),
        ("Thanks <@123456789012345678> and <@!123456789012345678>", "Thanks someone and someone"),
        ("Ping <@&123456789012345678> in <#123456789012345678>", "Ping a role in a channel"),
        ("Due <t:1700000000:R> today", "Due today"),
        ("Use </deploy:123456789012345678> now", "Use deploy now"),
        ("Meet at 10:30:45 sharp", "Meet at 10:30:45 sharp"),
        ("snake_case_name and C# and #general", "snake_case_name and C# and general"),
        ("Line<br>break", "Line break"),
        ("Really?!?! Yes!!!", "Really? Yes!"),
        ("Spaces   and\ttabs\n\nnewlines", "Spaces and tabs newlines"),
        ("Déjà vu… naïve café", "Déjà vu… naïve café"),
        ("3.5 times 2 = 7", "3.5 times 2 = 7"),
    ],
)
def test_speakable(text: str, expected: str) -> None:
    assert speakable(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "🎉👍", "!!!", "---", "```\ncode only\n```", "`x`", "| --- |"])
def test_nothing_sayable_becomes_empty(text: str) -> None:
    assert speakable(text) == ""


def test_no_markup_characters_survive_a_noisy_reply() -> None:
    reply = (
        "## Summary 🎯\n"
        "**Build** failed on `main` — see [CI](https://ci.example/run/42) or <https://x.y>.\n"
        "| step | status |\n|---|---|\n| test | ❌ |\n"
        "```bash\nmake test\n```\n"
        "Thanks <@123456789012345678> :tada:"
    )
    spoken = speakable(reply)
    for forbidden in (
        "*",
        "`",
        "#",
        "|",
        "[",
        "](",
        "http",
        "<",
        ">",
        ":tada:",
        "123456789012345678",
        "🎯",
        "❌",
    ):
        assert forbidden not in spoken, (forbidden, spoken)
    assert spoken.startswith("Summary Build failed on")
    assert spoken.endswith("Thanks someone")


NAMES = ("alice", "Bob Smith", "Zoë")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bob smith: I'm glad you found the right story.", "I'm glad you found the right story."),
        ("alice: Paris.", "Paris."),
        ("ALICE : Paris.", "Paris."),
        ("Zoë: oui.", "Oui."),
        ("Jarvis: The capital is Paris.", "The capital is Paris."),
        ("assistant: user: hello there", "Hello there"),
        ("**Alice:** hi there", "Hi there"),
        ("Jarvis says: Paris.", "Paris."),
        ("Jarvis, the capital is Paris.", "The capital is Paris."),
        ("Jarvis: alice: Jarvis, hi.", "Hi."),
    ],
)
def test_a_leading_label_is_stripped(text: str, expected: str) -> None:
    assert speakable(text, labels=NAMES, own_name="Jarvis") == expected


@pytest.mark.parametrize(
    "text",
    [
        "Note: it is late.",  # not a name the caller gave, not a role
        "Answer: Paris.",
        "Meet at 10:30 sharp.",
        "Alice, the answer is four.",  # a speaker addressed by name is kept; only the bot's own name goes
        "I am Jarvis.",
        "Tell alice: hi.",  # a label only counts at the start
    ],
)
def test_text_that_only_looks_like_a_label_stays(text: str) -> None:
    assert speakable(text, labels=NAMES, own_name="Jarvis") == text


@pytest.mark.parametrize(
    "text", ["Jarvis.", "jarvis!", "Jarvis", "**Jarvis**", "user:", "Assistant.", "Jarvis: Jarvis."]
)
def test_only_the_bots_name_or_a_label_says_nothing(text: str) -> None:
    assert speakable(text, labels=NAMES, own_name="Jarvis") == ""


def test_without_names_only_role_labels_go() -> None:
    assert speakable("assistant: Paris.") == "Paris."
    assert speakable("Jarvis: Paris.") == "Jarvis: Paris."  # the bot's name was not given
    assert speakable("Alice.", labels=NAMES) == "Alice."  # a speaker's name alone may be the answer
