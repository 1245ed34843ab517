"""Cut streamed model text into sentences that TTS can start on while the model is still writing.

:class:`SentenceSegmenter` receives text deltas and returns each sentence as soon as its end is
certain (``.``, ``!``, ``?``, ``…`` and CJK forms followed by whitespace, or a newline; not
abbreviations, initials, decimals, list markers, nor anything in a fenced code block). With
``first_clause_chars`` the first piece ends at the first clause boundary once that long; a long run
without a sentence end is cut at a clause boundary past ``soft_limit`` or a space past ``hard_limit``.
Chinese and Japanese put no space after a sentence or clause end: ``。！？`` end a sentence as they
are (with the quotes and brackets closing right after them), as do ``.!?…`` between two CJK
characters, and ``，、；：`` are clause boundaries; lengths count a CJK character as
:data:`~openab_voice.providers.scripts.CJK_CHAR_WIDTH` characters, and a run without any space may be
cut after a CJK character (:mod:`openab_voice.providers.scripts`).
Every sentence goes through :func:`~openab_voice.engine.sanitizer.speakable`; empty ones are dropped.
Pure: no I/O, no clock. Rationale and figures: docs/adr/0012-answer-while-the-end-is-confirmed.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from openab_voice.engine.sanitizer import speakable
from openab_voice.providers.scripts import (
    CJK_CHARS,
    CJK_CLAUSE_MARKS,
    CJK_CLOSERS,
    CJK_TERMINATORS,
    index_at_width,
    is_cjk,
    width,
)

__all__ = ["ABBREVIATIONS", "SentenceSegmenter"]

ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "mx", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "cf", "approx",
        "dept", "est", "fig", "inc", "ltd", "co", "corp", "no", "vol", "ch", "sec", "gen", "col",
        "lt", "sgt", "capt", "rev", "hon", "gov", "sen", "rep", "jan", "feb", "mar", "apr", "jun",
        "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed", "thu", "fri", "sat",
        "sun", "al", "ca", "min", "max",
    }
)  # fmt: skip
"""Words that end in a period without ending a sentence (compared lower-case, without the dot)."""

_FENCE = re.compile(r"```|~~~")
_TERMINATORS = frozenset(".!?\u2026\u3002\uff01\uff1f")
_CLOSERS = frozenset("\"')]}*_~\u201d\u2019" + CJK_CLOSERS)
# A full-width clause mark needs nothing after it; a half-width one needs a space or a CJK character.
_CLAUSE = re.compile(f"[,;:](?=\\s|[{CJK_CHARS}])|\\s[-\u2013\u2014]{{1,2}}(?=\\s)|[{CJK_CLAUSE_MARKS}]")
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_NUMBER = re.compile(r"\d{1,3}")
_WORD_BEFORE_DOT = re.compile(r"([^\s(\[{\"'*_]*)$")


class SentenceSegmenter:
    """Streaming sentence splitter for model output.

    Args:
        soft_limit: length after which a sentence without an end is cut at a clause boundary.
        hard_limit: length after which it is cut at the last space even without a clause boundary.
        min_chars: a forced cut never leaves a piece shorter than this.
        labels: speaker names a sentence may start with as a ``name:`` label (stripped).
        own_name: the bot's name (stripped as a label or vocative; a sentence of only it is dropped).
        first_clause_chars: the first piece may end at a clause boundary once it is this long
            (None: it ends where a sentence ends, like every other).
    """

    def __init__(
        self,
        *,
        soft_limit: int = 120,
        hard_limit: int = 240,
        min_chars: int = 20,
        labels: Sequence[str] = (),
        own_name: str | None = None,
        first_clause_chars: int | None = None,
    ) -> None:
        if not 0 < min_chars < soft_limit <= hard_limit:
            raise ValueError("need 0 < min_chars < soft_limit <= hard_limit")
        if first_clause_chars is not None and first_clause_chars < 1:
            raise ValueError("first_clause_chars must be positive")
        self._first_clause = first_clause_chars
        self._pieces = 0
        self._labels = tuple(labels)
        self._own_name = own_name
        self._soft = soft_limit
        self._hard = hard_limit
        self._min = min_chars
        self._buffer = ""
        self._in_fence = False
        self._fence = ""

    def push(self, delta: str) -> list[str]:
        """Add streamed text; return the sentences it completed (speakable, non-empty)."""
        self._buffer += delta
        return self._drain(final=False)

    @property
    def pending(self) -> str:
        """Text pushed but not yet part of a returned sentence."""
        return self._buffer

    def flush(self) -> list[str]:
        """End of the stream: return whatever is left, as sentences. The segmenter is then empty."""
        sentences = self._drain(final=True)
        self._buffer = ""
        self._in_fence = False
        return sentences

    def reset(self) -> None:
        """Forget buffered text (the turn was interrupted)."""
        self._buffer = ""
        self._in_fence = False

    def _drain(self, *, final: bool) -> list[str]:
        raw: list[str] = []
        while True:
            if self._in_fence:
                if not self._skip_fence(final=final):
                    break
                continue
            piece = self._next_piece(final=final)
            if piece is None:
                break
            raw.append(piece)
        spoken = (speakable(piece, labels=self._labels, own_name=self._own_name) for piece in raw)
        return [s for s in spoken if s]

    def _skip_fence(self, *, final: bool) -> bool:
        """Drop fenced code; True when the fence closed (the loop continues after it)."""
        end = self._buffer.find(self._fence)
        if end < 0:
            # Keep a possible half-received closing fence ("``") for the next delta.
            self._buffer = "" if final else self._buffer[-2:]
            return False
        rest = self._buffer[end + len(self._fence) :]
        newline = rest.find("\n")
        self._buffer = rest[newline + 1 :] if newline >= 0 else ""
        self._in_fence = False
        return True

    def _next_piece(self, *, final: bool) -> str | None:
        """Cut one sentence (or the text before a code fence) off the buffer, or return None."""
        buf = self._buffer
        fence = _FENCE.search(buf)
        limit = fence.start() if fence else len(buf)
        # "``" at the end may be the start of a fence: undecided until the next delta.
        if fence is None and not final and buf.endswith("`"):
            limit = len(buf.rstrip("`"))
        end = self._sentence_end(buf, limit, final=final, fence_next=fence is not None)
        clause = self._first_clause_end(buf[: limit if end is None else end])
        if clause is not None:
            end = clause
        if end is None and fence is not None:
            end = fence.start()
            self._in_fence = True
            self._fence = fence.group(0)
            self._buffer = buf[fence.end() :]
            self._pieces += 1
            return buf[:end]
        if end is None:
            end = self._forced_cut(buf[:limit])
        if end is None:
            if final and buf:
                self._buffer = ""
                self._pieces += 1
                return buf
            return None
        self._buffer = buf[end:]
        self._pieces += 1
        return buf[:end]

    def _first_clause_end(self, text: str) -> int | None:
        """Where the first piece ends at a clause boundary (``first_clause_chars``), or None.

        Decided on text that is already certain (a boundary needs the space after it), so the cut is
        the same whether the text came token by token or in one delta.
        """
        if self._first_clause is None or self._pieces:
            return None
        for match in _CLAUSE.finditer(text):
            if width(text[: match.end()]) >= self._first_clause:
                return match.end()
        return None

    def _sentence_end(self, buf: str, limit: int, *, final: bool, fence_next: bool) -> int | None:
        """Index just past the first certain sentence end before ``limit``, or None.

        ``fence_next``: a code fence starts at ``limit``, which ends any sentence before it.
        """
        for i in range(limit):
            ch = buf[i]
            if ch == "\n":
                return i + 1
            if ch not in _TERMINATORS:
                continue
            j = i + 1
            while j < limit and (buf[j] in _CLOSERS or buf[j] in _TERMINATORS):
                j += 1
            if j >= limit:
                # The next character decides ("3." -> "3.5"), unless nothing or a fence follows.
                return j if final or fence_next else None
            if _ends_without_space(buf, i, j):
                return j
            if not buf[j].isspace():
                continue
            if ch == "." and buf[i + 1] not in _TERMINATORS and self._dot_continues(buf, i):
                continue
            return j
        return None

    @staticmethod
    def _dot_continues(buf: str, dot: int) -> bool:
        """True when the period at ``dot`` belongs to an abbreviation, initial or list number."""
        line_start = buf.rfind("\n", 0, dot) + 1
        match = _WORD_BEFORE_DOT.search(buf, line_start, dot)
        word = match.group(1) if match else ""
        if not word:
            return False
        if word.lower() in ABBREVIATIONS or _DOTTED.fullmatch(word):
            return True
        if len(word) == 1 and word.isupper():
            return True  # an initial: "J. R. R. Tolkien"
        # "1. First step": a list number when nothing but spaces precedes it on the line.
        return bool(_NUMBER.fullmatch(word)) and not buf[line_start : dot - len(word)].strip()

    def _forced_cut(self, text: str) -> int | None:
        """Where to cut a run with no sentence end, once it is too long to wait for one.

        The same cut whether the text arrived token by token or in one delta: the last clause
        boundary before ``soft_limit``, else the first one after it, else the last space before
        ``hard_limit`` once the text is that long.
        """
        # Widths, not lengths: Latin text is measured as before (width == len), CJK by what it says.
        if width(text) < self._soft:
            return None
        hard = index_at_width(text, self._hard)
        early: int | None = None
        for match in _CLAUSE.finditer(text, 0, hard):
            end = match.end()
            said = width(text[:end])
            if said < self._min:
                continue
            if said <= self._soft:
                early = end
            else:
                return early if early is not None else end
        if early is not None:
            return early
        if width(text) < self._hard:
            return None
        return _last_break(text, index_at_width(text, self._min), hard)


def _ends_without_space(buf: str, start: int, end: int) -> bool:
    """True when the terminators in ``buf[start:end]`` end a sentence with no space after them.

    Chinese writes none: a full-width ``。！？`` ends a sentence as it is, and so does a half-width
    ``.!?…`` (or ``……``) between two CJK characters.
    """
    if any(ch in CJK_TERMINATORS for ch in buf[start:end]):
        return True
    return start > 0 and is_cjk(buf[start - 1]) and is_cjk(buf[end])


def _last_break(text: str, low: int, high: int) -> int:
    """Where to cut ``text`` without a clause boundary: just past its last space in
    ``[low, high)`` or, for text without spaces, its last CJK character before ``high``; else ``high``."""
    for cut in range(high, low, -1):
        if text[cut - 1] == " " or is_cjk(text[cut - 1]):
            return cut
    return high
