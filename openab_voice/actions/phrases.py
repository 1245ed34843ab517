"""The deterministic task phrase: "start a task ..." proposes an action with any model, or none.

The phrase addresses the bot by itself, so no wake name is needed even with several people in the
channel; a wake name in front ("Jarvis, start a task ...") is allowed. Matching is on words, not
characters, so STT punctuation and capitals do not matter. The goal is the rest of the utterance, as
transcribed: the operator reads exactly that in the proposal before confirming it.
"""

from __future__ import annotations

import re

from openab_voice.engine.turns import addresses

_WORD = re.compile(r"[A-Za-z0-9']+")
PHRASE = ("start", "a", "task")
_LEADING_FILLER = frozenset({"hey", "ok", "okay", "please", "so", "um", "uh"})
_MAX_PREFIX_WORDS = 5  # wake name (possibly split by STT into words) plus fillers


def task_goal(text: str, *, wake_name: str | None = None) -> str | None:
    """The goal when ``text`` is a task request, else None.

    >>> task_goal("Start a task: write the release notes.")
    'write the release notes.'
    >>> task_goal("Jarvis, please start a task to fix the build", wake_name="Jarvis")
    'to fix the build'
    >>> task_goal("could you start a task") is None
    True
    """
    words = [(m.group(0).lower(), m.end()) for m in _WORD.finditer(text)]
    for i in range(min(len(words), _MAX_PREFIX_WORDS) + 1):
        if tuple(w for w, _ in words[i : i + len(PHRASE)]) != PHRASE:
            continue
        prefix = [w for w, _ in words[:i] if w not in _LEADING_FILLER]
        if prefix and not (wake_name and addresses(" ".join(prefix), wake_name)):
            return None  # "could you start a task" is talk about tasks, not the phrase
        goal = text[words[i + len(PHRASE) - 1][1] :].strip().lstrip(":,;.-–— ").strip()
        return goal if any(ch.isalnum() for ch in goal) else None
    return None
