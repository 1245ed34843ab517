"""Multi-speaker turn policy: which final transcripts are turns addressed to the bot.

* The speaker must be a human in the channel (the roster decides; bots never count and their speech
  is neither a turn nor context).
* With one human in the channel, every final transcript of theirs is a turn.
* With two or more, a turn must address the bot by its wake name at its start ("Jarvis, what
  time is it?", "hey Jarvis what time is it", "贾维斯今天天气怎么样") or at its end ("what time is
  it, Jarvis?"). Everything else is kept as channel context only.

A configured wake name may list several names, separated by commas ("Jarvis, 賈維斯, 贾维斯": one per
script, since nothing converts traditional to simplified); any of them addresses the bot.

Matching ignores case, accents and punctuation, and tolerates STT splitting or joining the name's
words ("Open AB" matches "OpenAB") and, in a Latin name, a misheard letter or two. Chinese and
Japanese are written without spaces: each of their characters is a word of its own, and a name in
them matches by its characters exactly. A final that misheard the name its utterance's stable
partials agreed on gets the name back (:func:`name_as_heard_early`, :class:`EarlyNames`). Pure: no I/O.
"""

from __future__ import annotations

import collections
import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol

from openab_voice.engine.name_sounds import same_sound, sounds_like
from openab_voice.providers.scripts import CJK_CHARS, has_cjk, is_cjk

__all__ = [
    "LEADING_VOCATIVES",
    "EarlyNames",
    "FloorLog",
    "Roster",
    "TurnDecision",
    "TurnPolicy",
    "addresses",
    "is_preamble",
    "name_as_heard_early",
    "name_tokens",
    "only_address",
    "opens_with_name",
    "wake_names",
    "without_address",
]

LEADING_VOCATIVES = frozenset(
    {"hey", "hi", "hello", "ok", "okay", "yo", "oi", "so"}
    | {"嘿", "喂", "嗨", "哎", "你好", "您好", "哈喽", "哈囉"}
)
"""Words allowed before the wake name at the start of a turn ("hey Jarvis, ...", "嘿，贾维斯…")."""

_WORD = re.compile(f"[{CJK_CHARS}]|(?:(?![{CJK_CHARS}])[^\\W_])+")  # a CJK character is a word
_NAME_SEPARATORS = re.compile("[,\uff0c\u3001]")  # ",", "，" and "、"
# What goes with the name taken off a turn: the marks around it, and at the start a sentence's end too.
_AROUND_END = " \t,;:-\u2013\u2014\u3000\uff0c\uff1b\uff1a\u3001"  # and "　，；：、"
_AFTER_NAME = _AROUND_END + ".!?\u3002\uff01\uff1f"  # and "。！？"


class Roster(Protocol):
    """Who is in the voice channel (implemented by the Discord side)."""

    def humans(self) -> set[str]:
        """User ids of the humans in the channel now (bots excluded)."""
        ...

    def display_name(self, user_id: str) -> str:
        """The name people see for ``user_id`` (falls back to the id when unknown)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDecision:
    """The policy's verdict on one final transcript.

    Attributes:
        accepted: it is a turn for the bot.
        reason: ``only_human`` | ``addressed`` (accepted); ``not_addressed`` | ``not_human`` |
            ``empty`` (ignored).
        context: an ignored transcript worth keeping as channel context (a human's words).
        humans: how many humans were in the channel.
    """

    accepted: bool
    reason: str
    context: bool
    humans: int


def name_tokens(text: str) -> list[str]:
    """Lower-case words without accents or punctuation; each Chinese or Japanese character is a word.

    >>> name_tokens("Élan, vital!"), name_tokens("嘿贾维斯")
    (['elan', 'vital'], ['嘿', '贾', '维', '斯'])
    """
    folded = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return _WORD.findall(stripped)


def wake_names(wake_name: str) -> tuple[str, ...]:
    """The names a configured wake name lists, separated by commas.

    >>> wake_names("Jarvis, 賈維斯, 贾维斯")
    ('Jarvis', '賈維斯', '贾维斯')
    """
    return tuple(name for part in _NAME_SEPARATORS.split(wake_name) if (name := part.strip()))


@functools.lru_cache(maxsize=32)
def _wakes(wake_name: str) -> tuple[str, ...]:
    """Each name of ``wake_name`` as it is matched: its words run together."""
    folded = ("".join(name_tokens(name)) for name in wake_names(wake_name))
    return tuple(dict.fromkeys(wake for wake in folded if wake))


def addresses(text: str, wake_name: str) -> bool:
    """True when ``text`` starts (after an optional "hey") or ends with one of the ``wake_name``s."""
    words = name_tokens(text)
    return bool(words) and any(
        _leading_name(words, wake) > 0 or _prefix_joins_to(words[::-1], wake, rev=True)
        for wake in _wakes(wake_name)
    )


def opens_with_name(text: str, wake_name: str) -> bool:
    """True when ``text`` starts with one of the ``wake_name``s (after an optional "hey"): the rule for
    a prefix of an utterance (a stable partial), whose last word is not the utterance's end."""
    words = name_tokens(text)
    return any(_leading_name(words, wake) > 0 for wake in _wakes(wake_name))


def only_address(text: str, wake_name: str) -> bool:
    """True when ``text`` is the wake name alone (after an optional "hey"): a vocative, the opening
    of a turn still to be said ("Jarvis, ⟨pause⟩ what is two plus two?"), not a turn of its own.

    >>> only_address("Jarvis.", "Jarvis"), only_address("Hey, Jarvis", "Jarvis")
    (True, True)
    >>> only_address("Thanks, Jarvis.", "Jarvis")
    False
    """
    words = name_tokens(text)
    return bool(words) and any(_leading_name(words, wake) == len(words) for wake in _wakes(wake_name))


def is_preamble(prefix: str, wake_name: str | None, *, fillers: frozenset[str]) -> bool:
    """True when ``prefix``, what was said before a spoken command, is only ``fillers`` and at most
    the wake name: the command is said to the bot ("Jarvis, please", "嗯，贾维斯，请"), not talked
    about ("could you", "你能"). Words are Latin words and single Chinese characters; a Chinese filler
    of several characters ("好的") is one word.

    >>> is_preamble("嗯，贾维斯，请", "Jarvis, 贾维斯", fillers=frozenset({"嗯", "请"}))
    True
    """
    rest = [word.lower() for word in _filler_words(fillers).findall(prefix)]
    rest = [word for word in rest if word not in fillers]
    return not rest or bool(wake_name and addresses(" ".join(rest), wake_name))


@functools.lru_cache(maxsize=8)
def _filler_words(fillers: frozenset[str]) -> re.Pattern[str]:
    chinese = sorted((f for f in fillers if is_cjk(f)), key=len, reverse=True)
    return re.compile("|".join([*map(re.escape, chinese), "[A-Za-z0-9']+", f"[{CJK_CHARS}]"]))


def name_as_heard_early(final: str, early: str, wake_name: str) -> str | None:
    """``final`` with its opening name as ``early`` heard it, or None to leave it as it is.

    ``early`` is a stable partial of the same utterance (a prefix two decodes agreed on) that opened
    with the wake name; the final decode of the whole utterance misheard it past the tolerance
    ("Jervous, tell me about the Eiffel Tower." after "Jarvis, tell me"). Only when the final does not
    address the bot anyway, and only where the two agree again right after the name (the next word or
    two, allowing the final's version of the name one word more or less): otherwise the final heard
    something else and stands.

    >>> name_as_heard_early("Jervous, tell me about the tower.", "Jarvis, tell me", "Jarvis")
    'Jarvis, tell me about the tower.'
    """
    wakes = _wakes(wake_name)
    if not wakes or addresses(final, wake_name):
        return None
    early_spans, final_spans = _spans(early), _spans(final)
    early_words, final_words = [w for w, _, _ in early_spans], [w for w, _, _ in final_spans]
    named = max(_leading_name(early_words, wake) for wake in wakes)
    after = early_words[named : named + 2]
    if not named or not after:
        return None
    for k in dict.fromkeys((named, named - 1, named + 1)):
        if k >= 1 and final_words[k : k + len(after)] == after:
            return early[: early_spans[named - 1][2]] + final[final_spans[k - 1][2] :]
    return None


def _spans(text: str) -> list[tuple[str, int, int]]:
    """(folded word, start, end) of each word of ``text``."""
    spans = [("".join(name_tokens(m.group(0))), m.start(), m.end()) for m in _WORD.finditer(text)]
    return [span for span in spans if span[0]]


def _leading_name(words: list[str], wake: str) -> int:
    """How many opening ``words`` the wake name takes, with a "hey" or "excuse me" before it; 0: none."""
    for skip in (0, *_vocatives(words)):
        count = _run_length(words[skip:], wake)
        if count:
            return skip + count
    return 0


def _prefix_joins_to(words: list[str], wake: str, *, rev: bool = False) -> bool:
    """True when some leading run of ``words`` (reversed runs when ``rev``) spells ``wake``, allowing
    one wrong, missing or extra letter in names of four letters or more, and two in names of six or
    more that start with the same letter: the speech recognizer often gets a name's vowels wrong
    ("Novo" for "Nova", "Jurtis" for "Jarvis") while the rest of the sentence is right."""
    return _run_length(words, wake, rev=rev) > 0


def _run_length(words: list[str], wake: str, *, rev: bool = False) -> int:
    """How many leading ``words`` spell ``wake`` (as :func:`_prefix_joins_to` judges; a CJK name by its
    sound, :mod:`~openab_voice.engine.name_sounds`); 0 if none."""
    if has_cjk(wake):
        run = words[: len(wake)]
        return len(run) if sounds_like("".join(run[::-1] if rev else run), wake) else 0
    allowed = _tolerance(wake)
    joined = ""
    for count, word in enumerate(words, 1):
        if allowed and is_cjk(word):
            return 0  # a Latin name never takes a Chinese character as a misheard letter
        joined = word + joined if rev else joined + word
        if joined == wake or _close(joined, wake, allowed):
            return count
        if len(joined) > len(wake) + allowed:
            return 0
    return 0


def without_address(text: str, wake_name: str) -> str:
    """``text`` without the wake name that addresses the bot at its start or end.

    The model needs the question, not the name: given "Jarvis, what is the capital of France?" a
    135M model answers "Jarvis." The same matching as :func:`addresses` (a leading "hey", misheard
    letters); the rest keeps its own words and final punctuation. Text that is only the name, or does
    not address the bot, comes back unchanged.

    >>> without_address("Hey Jarvis, what is the capital of France?", "Jarvis")
    'What is the capital of France?'
    >>> without_address("what time is it, Jarvis?", "Jarvis")
    'what time is it?'
    """
    wakes = _wakes(wake_name)
    spans = _spans(text)
    if not wakes or not spans:
        return text
    words = [w for w, _, _ in spans]
    for first in dict.fromkeys((max(_vocatives(words), default=0), 0)):
        count = max(_run_length(words[first:], wake) for wake in wakes)
        if count and first + count < len(words):
            rest = text[spans[first + count - 1][2] :].lstrip(_AFTER_NAME)
            return rest[:1].upper() + rest[1:]
    count = max(_run_length(words[::-1], wake, rev=True) for wake in wakes)
    if count and count < len(words):
        head = text[: spans[-count][1]].rstrip(_AROUND_END)
        return head + text[spans[-1][2] :].strip(_AROUND_END)
    return text


@functools.cache
def _vocative_words() -> tuple[tuple[str, ...], ...]:
    return tuple({tuple(name_tokens(v)) for v in (*LEADING_VOCATIVES, "excuse me")})


def _vocatives(words: list[str]) -> list[int]:
    """The lengths of the vocatives ``words`` may open with ("hey", "excuse me", "你好"; a CJK one by its
    reading: "黑" is "嘿" misheard), shortest first."""
    return sorted(
        len(v)
        for v in _vocative_words()
        if tuple(words[: len(v)]) == v or same_sound("".join(words[: len(v)]), "".join(v))
    )


def _close(heard: str, wake: str, allowed: int) -> bool:
    if allowed and _edits(heard, wake, 1):
        return True
    # Two edits only as misheard letters (about the same length, same first letter), not as a longer
    # word that merely starts with the name ("openable" is not "OpenAB").
    return (
        allowed == 2 and heard[:1] == wake[:1] and abs(len(heard) - len(wake)) <= 1 and _edits(heard, wake, 2)
    )


def _tolerance(wake: str) -> int:
    if has_cjk(wake):
        return 0  # a character misheard is another word, not a misspelling
    return 2 if len(wake) >= 6 else 1 if len(wake) >= 4 else 0


def _edits(a: str, b: str, limit: int) -> bool:
    """Levenshtein distance of ``a`` and ``b`` is at most ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


class TurnPolicy:
    """Decides turns from the roster and the wake name.

    Args:
        roster: who is in the channel.
        wake_name: the configured name, or names separated by commas; None to use the bot's display
            name.
        bot_user_id: the bot's user id, for its display name.

    Raises:
        ValueError: neither ``wake_name`` nor ``bot_user_id`` was given.
    """

    def __init__(self, *, roster: Roster, wake_name: str | None, bot_user_id: str | None) -> None:
        if wake_name is None and bot_user_id is None:
            raise ValueError("a wake name or the bot's user id is needed")
        self._roster = roster
        self._wake_name = wake_name
        self._bot_user_id = bot_user_id

    @property
    def wake_name(self) -> str:
        """The name that addresses the bot now (a display name can change while connected)."""
        if self._wake_name is not None:
            return self._wake_name
        assert self._bot_user_id is not None
        # A display name is one name: a comma in it separates nothing (it is dropped as punctuation).
        return _NAME_SEPARATORS.sub(" ", self._roster.display_name(self._bot_user_id))

    def decide(self, *, speaker_id: str, text: str) -> TurnDecision:
        humans = self._roster.humans()
        count = len(humans)
        if speaker_id not in humans:
            return TurnDecision(accepted=False, reason="not_human", context=False, humans=count)
        if not name_tokens(text):
            return TurnDecision(accepted=False, reason="empty", context=False, humans=count)
        if count <= 1:
            return TurnDecision(accepted=True, reason="only_human", context=False, humans=count)
        if addresses(text, self.wake_name):
            return TurnDecision(accepted=True, reason="addressed", context=False, humans=count)
        return TurnDecision(accepted=False, reason="not_addressed", context=True, humans=count)


class FloorLog:
    """When the bot held the floor (a response was running), for half-duplex (turn-based) mode.

    Turn based means capture is ignored while the bot speaks: a final transcript whose speech
    overlaps a floor span is not a turn, even when it arrives after the bot went quiet.
    """

    def __init__(self, *, keep: int = 16) -> None:
        self._since: float | None = None
        self._spans: collections.deque[tuple[float, float]] = collections.deque(maxlen=keep)

    def update(self, busy: bool, now: float) -> None:
        if busy and self._since is None:
            self._since = now
        elif not busy and self._since is not None:
            self._spans.append((self._since, now))
            self._since = None

    def overlaps(self, start: float, end: float) -> bool:
        """True when speech from ``start`` to ``end`` overlaps the floor (now or in a kept span)."""
        if self._since is not None:
            return True
        return any(start < span_end and end > span_start for span_start, span_end in self._spans)


class EarlyNames:
    """What an utterance's partials heard of the wake name at its start, until its final comes.

    Two kinds of evidence are kept per utterance:

    * the latest stable partial that opens with the wake name: two decodes agreed on the name;
    * the latest raw partial that goes on from that stable text: one more decode that heard the
      agreed name *and* words after it. The stable prefix often stops at the name itself ("Jarvis"
      after a pause) when the next two decodes disagree about the name's spelling, and a final is
      only aligned on the words after the name (:func:`name_as_heard_early`); those words come from
      this decode, the name still from the agreed prefix it starts with.

    A raw partial alone counts for nothing: one decode is not agreement.

    Args:
        keep: utterances remembered at most (the oldest is forgotten first).
    """

    def __init__(self, *, keep: int = 32) -> None:
        self._keep = keep
        self._early: dict[str, tuple[str, str | None]] = {}

    def note(self, utterance_id: str, text: str, wake_name: str, *, stable: bool = True) -> None:
        """Remember a partial of ``utterance_id``: a stable one if it opens with ``wake_name``, a raw
        one if it goes on from the stable text kept for the utterance."""
        if not stable:
            kept = self._early.get(utterance_id)
            if kept is not None and _goes_on_from(text, kept[0]):
                self._early[utterance_id] = (kept[0], text)
            return
        if not opens_with_name(text, wake_name):
            return
        kept = self._early.pop(utterance_id, None)
        extension = kept[1] if kept is not None and kept[1] and _goes_on_from(kept[1], text) else None
        self._early[utterance_id] = (text, extension)
        while len(self._early) > self._keep:
            del self._early[next(iter(self._early))]

    def heard(self, utterance_id: str, text: str, wake_name: str, *, final: bool) -> str:
        """``text`` of ``utterance_id`` with the name its partials heard, when the decode of the
        whole misheard it (:func:`name_as_heard_early`); a ``final`` ends the utterance."""
        kept = self._early.pop(utterance_id, None) if final else self._early.get(utterance_id)
        if kept is None:
            return text
        for early in kept:
            if early is not None and (corrected := name_as_heard_early(text, early, wake_name)) is not None:
                return corrected
        return text

    def forget(self, utterance_id: str) -> None:
        """The utterance ended without a final of its own (discarded, or claimed by an intake)."""
        self._early.pop(utterance_id, None)


def _goes_on_from(text: str, stable: str) -> bool:
    """True when ``text`` has words past ``stable`` and starts with all of its words."""
    words, prefix = name_tokens(text), name_tokens(stable)
    return len(words) > len(prefix) and words[: len(prefix)] == prefix
