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
# What the speech recognizer makes of the phrase (measured with tiny.en on the demo's lossy audio:
# "Jarvis started task ..."): the verb with an ending, the article dropped or changed.
_STARTS = frozenset({"start", "started", "starts", "starting"})
_ARTICLES = frozenset({"a", "the", "an", "one"})
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
    >>> task_goal("Jarvis started task, add a file", wake_name="Jarvis")
    'add a file'
    """
    words = [(m.group(0).lower(), m.end()) for m in _WORD.finditer(text)]
    for i in range(min(len(words), _MAX_PREFIX_WORDS) + 1):
        end = _phrase_end(words, i)
        if end is None:
            continue
        prefix = [w for w, _ in words[:i] if w not in _LEADING_FILLER]
        if prefix and not (wake_name and addresses(" ".join(prefix), wake_name)):
            return None  # "could you start a task" is talk about tasks, not the phrase
        goal = text[end:].strip().lstrip(":,;.-–— ").strip()
        return goal if any(ch.isalnum() for ch in goal) else None
    return None


def _phrase_end(words: list[tuple[str, int]], i: int) -> int | None:
    """Where the phrase ends in the text if it starts at word ``i`` ("start [a] task")."""
    if i >= len(words) or words[i][0] not in _STARTS:
        return None
    j = i + 1 + (i + 1 < len(words) and words[i + 1][0] in _ARTICLES)
    if j < len(words) and words[j][0] in ("task", "tasks"):
        return words[j][1]
    return None


# Words that ask for commands to be run: the proposal then offers the workspace_exec button.
_RUN_WORDS = frozenset(
    {"run", "runs", "running", "test", "tests", "testing", "build", "compile", "execute", "pytest", "lint"}
)
_RUN_TOOLS = frozenset({"npm", "make", "cargo", "go", "tox", "pip", "uv"})


def asks_to_run(goal: str) -> bool:
    """Whether ``goal`` asks for something to be run (tests, a build, a command).

    >>> asks_to_run("fix the parser and run the tests")
    True
    >>> asks_to_run("write the release notes")
    False
    """
    words = {word.lower() for word in _WORD.findall(goal)}
    return bool(words & _RUN_WORDS or words & _RUN_TOOLS)
