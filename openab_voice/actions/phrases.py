"""The deterministic task phrase: "start a task ..." proposes an action with any model, or none.

The phrase addresses the bot by itself, so no wake name is needed even with several people in the
channel; a wake name in front ("Jarvis, start a task ...") is allowed. Matching is on words, not
characters, so STT punctuation and capitals do not matter. The goal is the rest of the utterance, as
transcribed: the operator reads exactly that in the proposal before confirming it.

In Chinese, written without spaces, the phrase is its characters: "开始一个任务：…", "开始任务，…",
"启动任务…", "請開始一個任務：…" (simplified or traditional), with the same rules: only fillers and the
wake name before it, and a goal after it.
"""

from __future__ import annotations

import re

from openab_voice.engine.turns import is_preamble

_WORD = re.compile(r"[A-Za-z0-9']+")
PHRASE = ("start", "a", "task")
# What the speech recognizer makes of the phrase (measured with tiny.en on the demo's lossy audio:
# "Jarvis started task ..."): the verb with an ending, the article dropped or changed.
_STARTS = frozenset({"start", "started", "starts", "starting"})
_ARTICLES = frozenset({"a", "the", "an", "one"})
_LEADING_FILLER = frozenset(
    {"hey", "ok", "okay", "please", "so", "um", "uh"}
    | {"嘿", "好", "好的", "请", "請", "那", "那么", "那麼", "嗯", "呃", "帮我", "幫我"}
)
_MAX_PREFIX_WORDS = 5  # wake name (possibly split by STT into words) plus fillers
# "start (one) task"; a verb with 了 ("started") or a compound noun after 任务 ("task manager",
# "taskbar", "task list") is not the phrase.
_CHINESE_PHRASE = re.compile(
    "(?:开始|開始|启动|啟動)(?:一个|一個|一项|一項|个|個|项|項)?(?:任务|任務)(?!管理|栏|欄|列表|清单|清單)"
)
# Sentence-final particles: "开始一个任务吗？" asks about a task and has no goal.
_PARTICLES = frozenset("吗嗎呢吧啊呀了么麼")
_BEFORE_GOAL = ":,;.-–— \u3000\uff1a\uff0c\uff1b\u3002\u3001"


def task_goal(text: str, *, wake_name: str | None = None) -> str | None:
    """The goal when ``text`` is a task request, else None.

    >>> task_goal("Start a task: write the release notes.")
    'write the release notes.'
    >>> task_goal("Jarvis, please start a task to fix the build", wake_name="Jarvis")
    'to fix the build'
    >>> task_goal("could you start a task") is None
    True
    >>> task_goal("贾维斯，开始一个任务：写发布说明", wake_name="Jarvis, 贾维斯")
    '写发布说明'
    """
    chinese = _CHINESE_PHRASE.search(text)
    found = min(filter(None, (_english_phrase(text), chinese.span() if chinese else None)), default=None)
    if found is None:
        return None
    start, end = found
    if not is_preamble(text[:start], wake_name, fillers=_LEADING_FILLER):
        return None  # "could you start a task" is talk about tasks, not the phrase
    goal = text[end:].strip().lstrip(_BEFORE_GOAL).strip()
    return goal if any(ch.isalnum() and ch not in _PARTICLES for ch in goal) else None


def _english_phrase(text: str) -> tuple[int, int] | None:
    """Where "start [a] task" is in ``text``, if it is among its first words."""
    words = [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    for i in range(min(len(words), _MAX_PREFIX_WORDS) + 1):
        end = _phrase_end(words, i)
        if end is not None:
            return words[i][1], end
    return None


def _phrase_end(words: list[tuple[str, int, int]], i: int) -> int | None:
    """Where the phrase ends in the text if it starts at word ``i`` ("start [a] task")."""
    if i >= len(words) or words[i][0] not in _STARTS:
        return None
    j = i + 1 + (i + 1 < len(words) and words[i + 1][0] in _ARTICLES)
    if j < len(words) and words[j][0] in ("task", "tasks"):
        return words[j][2]
    return None


# Words that ask for commands to be run: the proposal then offers the workspace_exec button.
_RUN_WORDS = frozenset(
    {"run", "runs", "running", "test", "tests", "testing", "build", "compile", "execute", "pytest", "lint"}
)
_RUN_TOOLS = frozenset({"npm", "make", "cargo", "go", "tox", "pip", "uv"})
_CHINESE_RUN_WORDS = ("运行", "運行", "测试", "測試", "构建", "構建", "编译", "編譯", "执行", "執行")


def asks_to_run(goal: str) -> bool:
    """Whether ``goal`` asks for something to be run (tests, a build, a command).

    >>> asks_to_run("fix the parser and run the tests")
    True
    >>> asks_to_run("write the release notes")
    False
    >>> asks_to_run("修复解析器并运行测试")
    True
    """
    words = {word.lower() for word in _WORD.findall(goal)}
    return bool(words & _RUN_WORDS or words & _RUN_TOOLS) or any(w in goal for w in _CHINESE_RUN_WORDS)
