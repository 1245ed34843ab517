"""Turn model text into something a TTS voice can say.

:func:`speakable` keeps the words and drops what a voice should not read: code (fenced and inline),
link and image syntax (bare URLs vanish), Markdown marks, Discord markup (emoji, stickers,
timestamps; mentions become "someone" / "a role" / "a channel"), Unicode emoji, leading speaker
labels the caller names and chat role words, and the bot's own name as a leading vocative (a
sentence that is only that name becomes ``""``); whitespace is collapsed and text with no letter or
digit left becomes ``""``. Chinese and Japanese text keeps its characters and its full-width
punctuation (``，。！？：；（）～``); full-width letters, digits and markup symbols (``ＡＢＣ`` ``１２３``
``＊＃｜``) become their ASCII forms and are treated as those; marks and labels are recognized without
the spaces CJK text does not write (``这是__重要__的``, ``Jarvis：你好``), a URL ends where CJK text
starts, and a space between two CJK characters goes (CJK writes none; removed markup leaves one).
Pure and deterministic: no I/O, safe on any thread.
The rules and why: docs/adr/0008-llama-cpp-without-amx.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from openab_voice.engine.turns import name_tokens
from openab_voice.providers.scripts import CJK_CHARS, CJK_PUNCTUATION

__all__ = ["ROLE_LABELS", "speakable"]

ROLE_LABELS = frozenset({"assistant", "user", "system", "bot", "ai", "human", "speaker", "narrator"})
"""Chat role words a model may write as a label: stripped like a name."""

_FENCED_CODE = re.compile(r"(```|~~~).*?(?:\1|\Z)", re.S)
_INLINE_CODE = re.compile(r"`+[^`]*`+|`+")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_REFERENCE_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^>\s]*>", re.I)
# A URL stops at CJK text: Chinese writes no space after one ("访问https://example.com了解更多").
_URL = re.compile(
    f"(?:\\b|(?<=[{CJK_CHARS}]))(?:https?://|ftp://|www\\.)"
    f"[^\\s<>()\\[\\]{CJK_CHARS}{CJK_PUNCTUATION}]*[^\\s<>()\\[\\].,;:!?'\"{CJK_CHARS}{CJK_PUNCTUATION}]",
    re.I,
)

# Discord message markup (https://discord.com/developers/docs/reference#message-formatting).
_CUSTOM_EMOJI = re.compile(r"<a?:\w{1,32}:\d{5,25}>")
_USER_MENTION = re.compile(r"<@!?\d{5,25}>")
_ROLE_MENTION = re.compile(r"<@&\d{5,25}>")
_CHANNEL_MENTION = re.compile(r"<#\d{5,25}>")
_TIMESTAMP = re.compile(r"<t:-?\d+(?::[tTdDfFR])?>")
_SLASH_COMMAND = re.compile(r"</([\w -]{1,64}):\d{5,25}>")
_GUILD_NAV = re.compile(r"<id:\w+>")
# ``:thumbsup:`` / ``:sticker_name:``; at least one letter so clock times like 10:30:45 survive.
_SHORTCODE = re.compile(r"(?<![\w:]):[\w+-]*[A-Za-z][\w+-]*:(?![\w:])")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")

_HEADER = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M)
_HEADER_CLOSING = re.compile(r"[ \t]+#+[ \t]*$", re.M)
_QUOTE = re.compile(r"^[ \t]*>{1,3}[ \t]?", re.M)
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*+\u2022]|\d{1,3}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?", re.M)
_CJK_LIST_MARKER = re.compile(r"^[ \t]*\d{1,3}[\u3001\uff09][ \t]*", re.M)  # "1、" "1）": no space after
_RULE = re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$", re.M)
_TABLE_SEPARATOR = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$", re.M)
_TABLE_ROW = re.compile(r"^[ \t]*\|(.*)\|[ \t]*$", re.M)

_BOLD_ITALIC = re.compile(r"(\*{1,3})(?=\S)(.+?)(?<=\S)\1")
# Underscores against a CJK character are marks, not part of a word: "这是__重要__的" has no spaces.
_NOT_WORD_BEFORE = f"(?:(?<!\\w)|(?<=[{CJK_CHARS}]))"
_NOT_WORD_AFTER = f"(?:(?!\\w)|(?=[{CJK_CHARS}]))"
_UNDERSCORE = re.compile(f"{_NOT_WORD_BEFORE}(_{{1,3}})(?=\\S)(.+?)(?<=\\S)\\1{_NOT_WORD_AFTER}")
_STRIKE = re.compile(r"~~(.+?)~~")
_SPOILER = re.compile(r"\|\|(.+?)\|\|")
_HASHTAG = re.compile(f"(?<![\\w&])#(?=[A-Za-z{CJK_CHARS}])")
_STRAY_MARKS = re.compile(f"[*~|\u2022\u25aa\u25cf\u25e6]|{_NOT_WORD_BEFORE}_+|_+{_NOT_WORD_AFTER}")

# Emoji and pictographs: the emoji blocks, dingbats and misc symbols, regional-indicator flags,
# keycap and variation selectors, zero-width joiners and tag characters (subdivision flags).
_EMOJI = re.compile(
    "["
    "\U0001f000-\U0001faff"
    "\u2600-\u27bf"
    "\u2300-\u23ff"
    "\u2b00-\u2bff"
    "\u2190-\u21ff"
    "\u25a0-\u25ff"
    "\u3030\u303d\u3297\u3299"
    "\ufe0e\ufe0f\u20e3\u200d"
    "\U000e0020-\U000e007f"
    "]+"
)

# Full-width forms of ASCII become ASCII, but for the marks that are Chinese punctuation themselves.
_FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F) if chr(code) not in "！（），．：；？～"}
# Full-width marks (，。；：！？、）」』】》): a space before one goes, and a piece may not start with one.
_CJK_MARKS = "\uff0c\u3002\uff1b\uff1a\uff01\uff1f\u3001\uff09\u300d\u300f\u3011\u300b"
_REPEATING = ",;:!?\uff0c\uff1b\uff1a\uff01\uff1f\u3001"  # ,;:!? and ，；：！？、
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?\u2026)\]}" + _CJK_MARKS + "])")
_REPEATED_PUNCT = re.compile(f"([{_REPEATING}])[{_REPEATING}]*(?:\\s*\\1)*")
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]|\{\s*\}|\"\s*\"")
_EMPTY_CJK_BRACKETS = re.compile(
    "\uff08\\s*\uff09|\u300c\\s*\u300d|\u300e\\s*\u300f|\u3010\\s*\u3011|\u300a\\s*\u300b"
)
_LEADING_JUNK = re.compile(r"^[\s,.;:!?)\]}\-\u2013\u2014'\"\u201d\u2019" + _CJK_MARKS + "]+")
# Spaces between two CJK characters or marks (left by a removed emoji or mark): CJK writes none.
_CJK_TEXT = CJK_CHARS + CJK_PUNCTUATION
_CJK_GAP = re.compile(f"(?<=[{_CJK_TEXT}])[^\\S\n]+(?=[{_CJK_TEXT}])")
_WHITESPACE = re.compile(r"\s+")
_WORD_CHAR = re.compile(r"[^\W_]")
# A label: up to four words (a display name may have spaces) and a colon that is not a clock time.
_LABEL = re.compile(r"^([^\W\d_][\w.'-]*(?: [\w.'-]+){0,3})\s*[:\uff1a](?!\d)\s*")
# "Jarvis says:": the context attributes turns that way when several people talk; a reply may copy it.
_SPEECH_VERB = re.compile(r"\s+(?:says|said|asks|asked|replies|replied|answers|answered)$", re.I)
_VOCATIVE = re.compile(r"^([^\W\d_][\w.'-]*(?: [\w.'-]+){0,3})\s*(?:[,!-]\s+|[\uff0c\uff01]\s*)")


def speakable(text: str, *, labels: Iterable[str] = (), own_name: str | None = None) -> str:
    """Return ``text`` with everything a voice should not read removed.

    Args:
        text: model output, possibly Markdown with Discord markup.
        labels: names that may appear as a leading ``name:`` label (the speakers in the channel).
        own_name: the bot's name (its wake name): stripped as a label or a leading vocative, and a
            text that is only this name says nothing.

    Returns:
        One line of plain words and punctuation, or ``""`` when nothing sayable is left.
    """
    text = text.translate(_FULL_WIDTH)
    text = _FENCED_CODE.sub(" ", text)
    text = _INLINE_CODE.sub(" ", text)
    text = _strip_discord(text)
    text = _strip_links(text)
    text = _strip_blocks(text)
    text = _strip_emphasis(text)
    text = _EMOJI.sub(" ", text)
    text = _tidy(text)
    own = _folded(own_name) if own_name else ""
    known = {_folded(name) for name in labels} | set(ROLE_LABELS) | ({own} if own else set())
    known.discard("")
    return _strip_labels(text, known, own)


def _folded(name: str) -> str:
    """A name as labels are compared: lower case, no accents, punctuation or spaces."""
    return "".join(name_tokens(name))


def _strip_labels(text: str, known: set[str], own: str) -> str:
    """Remove leading ``name:`` labels (and the bot's own name as a vocative); see the module doc."""
    while True:
        match = _LABEL.match(text) or (_VOCATIVE.match(text) if own else None)
        if match is None:
            break
        label = _folded(_SPEECH_VERB.sub("", match.group(1)))
        is_label = match.re is _LABEL and label in known
        if not (is_label or label == own):
            break
        text = _tidy(text[match.end() :])
        text = text[:1].upper() + text[1:]  # what is left starts the sentence
    if _folded(text) in ({own} | ROLE_LABELS):
        return ""  # only the bot's name ("Jarvis.") or a bare role word: nothing worth saying
    return text


def _strip_discord(text: str) -> str:
    text = _CUSTOM_EMOJI.sub(" ", text)
    text = _USER_MENTION.sub("someone", text)
    text = _ROLE_MENTION.sub("a role", text)
    text = _CHANNEL_MENTION.sub("a channel", text)
    text = _TIMESTAMP.sub(" ", text)
    text = _SLASH_COMMAND.sub(r"\1", text)
    text = _GUILD_NAV.sub(" ", text)
    return _SHORTCODE.sub(" ", text)


def _strip_links(text: str) -> str:
    # Images and links first: their URLs must go with them, not be left for _URL to half-match.
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REFERENCE_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(" ", text)
    text = _URL.sub(" ", text)
    return _HTML_TAG.sub(" ", text)


def _strip_blocks(text: str) -> str:
    # Separator rows before rules: "|---|---|" would otherwise be read as a rule or as pipes.
    text = _TABLE_SEPARATOR.sub("", text)
    text = _TABLE_ROW.sub(lambda m: ", ".join(c.strip() for c in m.group(1).split("|") if c.strip()), text)
    text = _RULE.sub("", text)
    text = _HEADER.sub("", text)
    text = _HEADER_CLOSING.sub("", text)
    text = _QUOTE.sub("", text)
    text = _LIST_MARKER.sub("", text)
    return _CJK_LIST_MARKER.sub("", text)


def _strip_emphasis(text: str) -> str:
    text = _SPOILER.sub(r"\1", text)
    text = _STRIKE.sub(r"\1", text)
    text = _BOLD_ITALIC.sub(r"\2", text)
    text = _UNDERSCORE.sub(r"\2", text)
    text = _HASHTAG.sub("", text)
    # Marks left unpaired by streaming or sloppy Markdown; underscores inside words (snake_case)
    # stay, the voice reads them as part of the word.
    return _STRAY_MARKS.sub(" ", text)


def _tidy(text: str) -> str:
    text = _EMPTY_CJK_BRACKETS.sub("", text)  # （）「」...: nothing, as CJK writes no space there
    text = _CJK_GAP.sub("", text)
    text = _WHITESPACE.sub(" ", text)
    text = _EMPTY_BRACKETS.sub(" ", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _REPEATED_PUNCT.sub(r"\1", text)
    text = _WHITESPACE.sub(" ", text)
    text = _LEADING_JUNK.sub("", text).strip()
    return text if _WORD_CHAR.search(text) else ""
