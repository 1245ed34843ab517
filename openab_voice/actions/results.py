"""The canonical text of an action's result, split for Discord, and the short spoken status.

Text is the audit record: the full agent output is posted (split under Discord's 2,000-character
message limit, or attached as a file when it would take more than a few messages) before any speech.
The voice says only the status unless every listener is trusted.

Both are honest about refusals: when the fail-closed resolver refused some of the agent's
permission requests, the text names each one (tool, what it needed, the ceiling) and the voice says
"done, but 1 of its 2 permission requests was refused"; a turn whose every request was refused is
never a plain "done" (the agent ended its turn, but nothing it asked to do was allowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openab_voice.acp.types import PermissionDecision
from openab_voice.actions.speech import STATUS_LINES, STATUS_LINES_ZH, Language
from openab_voice.engine.sanitizer import speakable
from openab_voice.jobs import JobStatus

_EXECUTIONS = frozenset(status.value for status in JobStatus)

MESSAGE_LIMIT = 2000
_PART_LIMIT = 1900  # room for the "(2/3)" marker
MAX_PARTS = 4  # beyond this the full text goes as a file, with the head inline

_HEADLINES = {
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "was cancelled",
    "outcome_unknown": "ended with an UNKNOWN outcome (the workspace is quarantined until reconciled)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultText:
    """Messages to post in order, and the full text as a file when it did not fit."""

    parts: tuple[str, ...]
    attachment: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusals:
    """The agent's permission requests that were not granted, out of how many it made.

    Attributes:
        asked: How many permission requests the agent made.
        refused: One line per request that was not granted (``reject_once`` or a no-choice answer).
        ceiling: The confirmed effect ceiling they were judged against.
    """

    asked: int
    refused: tuple[str, ...]
    ceiling: str

    @property
    def any(self) -> bool:
        """Whether at least one request was refused."""
        return bool(self.refused)

    @property
    def all(self) -> bool:
        """Whether the agent asked and every request was refused."""
        return self.asked > 0 and len(self.refused) == self.asked


NO_REFUSALS = Refusals(asked=0, refused=(), ceiling="")
_MAX_REFUSAL_LINES = 10


def refusals(decisions: Sequence[PermissionDecision], ceiling: str) -> Refusals:
    """Summarise ``decisions`` (in order) against the confirmed ``ceiling``."""
    refused = tuple(
        f"{(d.title or d.tool_call_id)[:120]!r} ({d.kind or 'no kind'}, needs {d.needed.value}): {d.reason[:200]}"
        for d in decisions
        if d.option_kind != "allow_once"
    )
    return Refusals(asked=len(decisions), refused=refused, ceiling=ceiling)


def headline(action_id: str, execution: str, refused: Refusals = NO_REFUSALS) -> str:
    """One line naming the action and how it ended (and, after a success, what was refused)."""
    if execution == "succeeded" and refused.all:
        return (
            f"Action `{action_id}` ended its turn, but {_refused_phrase(refused)} refused under the "
            f"{refused.ceiling} ceiling: nothing it asked to do was allowed."
        )
    line = f"Action `{action_id}` {_HEADLINES.get(execution, execution)}"
    if refused.any:
        line += f", but {_refused_phrase(refused)} refused (ceiling {refused.ceiling})"
    return line + "."


def result_text(
    *,
    action_id: str,
    goal: str,
    execution: str,
    output: str,
    detail: str = "",
    refused: Refusals = NO_REFUSALS,
) -> ResultText:
    """The result message(s): headline, goal, what was refused, then everything the agent said."""
    body = [headline(action_id, execution, refused), f"Goal: {goal}"]
    if detail:
        body.append(f"Detail: {detail}")
    shown = refused.refused[:_MAX_REFUSAL_LINES]
    body += [f"Refused: {line}" for line in shown]
    if len(refused.refused) > len(shown):
        body.append(f"Refused: ... and {len(refused.refused) - len(shown)} more (see the audit log)")
    body.append("Agent output:\n" + (output.strip() or "(no output)"))
    full = "\n".join(body)
    chunks = _split(full, _PART_LIMIT)
    if len(chunks) <= MAX_PARTS:
        if len(chunks) == 1:
            return ResultText(parts=(chunks[0],), attachment=None)
        n = len(chunks)
        return ResultText(parts=tuple(f"{c}\n({i}/{n})" for i, c in enumerate(chunks, 1)), attachment=None)
    head = chunks[0] + "\n(full output attached)"
    return ResultText(parts=(head,), attachment=full)


@dataclass(frozen=True, slots=True, kw_only=True)
class _ResultWords:
    """How a result is announced in one language (``{status}``, ``{first}``, ``{refused}`` filled in)."""

    statuses: dict[JobStatus, str]
    ended: str
    all_refused: str
    some_refused: str
    detailed: str
    plain: str


_RESULT_WORDS: dict[Language, _ResultWords] = {
    "en": _ResultWords(
        statuses=STATUS_LINES,
        ended="The task ended.",
        all_refused=(
            "The task ended, but {refused} refused, so nothing it asked to do was allowed. "
            "The result is in the text channel."
        ),
        some_refused="The task is done, but {refused} refused.",
        detailed="{status} {first} The full result is in the text channel.",
        plain="{status} The result is in the text channel.",
    ),
    "zh": _ResultWords(
        statuses=STATUS_LINES_ZH,
        ended="任务结束了。",
        all_refused="任务结束了，但{refused}被拒绝了，所以它要做的事都没有被允许。结果在文字频道里。",
        some_refused="任务完成了，但{refused}被拒绝了。",
        detailed="{status}{first} 完整结果在文字频道里。",
        plain="{status}结果在文字频道里。",
    ),
}


def spoken_status(
    *,
    execution: str,
    output: str,
    all_trusted: bool,
    refused: Refusals = NO_REFUSALS,
    language: Language = "en",
) -> str:
    """What the voice says once the text is posted: the status, or a short summary for trusted rooms,
    in ``language`` (the one the task was asked in)."""
    words = _RESULT_WORDS[language]
    ended = execution in _EXECUTIONS and JobStatus(execution).terminal
    status = words.statuses[JobStatus(execution)] if ended else words.ended
    if execution == "succeeded" and refused.all:
        return words.all_refused.format(refused=_refused_phrase(refused, language))
    if execution == "succeeded" and refused.any:
        status = words.some_refused.format(refused=_refused_phrase(refused, language))
    if all_trusted and execution == "succeeded" and not refused.any:
        first = speakable(output.strip().split("\n", 1)[0])[:200].strip()
        if first:
            return words.detailed.format(status=status, first=first)
    return words.plain.format(status=status)


def _refused_phrase(refused: Refusals, language: Language = "en") -> str:
    """E.g. "1 of its 2 permission requests was", "2 of its 3 permission requests were";
    "它的3个权限请求中有2个", "它的2个权限请求都"."""
    if language == "zh":
        if refused.asked == 1:
            return "它的权限请求"
        if refused.all:
            return f"它的{refused.asked}个权限请求都"
        return f"它的{refused.asked}个权限请求中有{len(refused.refused)}个"
    if refused.asked == 1:
        return "its permission request was"
    if refused.all:
        return f"all {refused.asked} of its permission requests were"
    verb = "was" if len(refused.refused) == 1 else "were"
    return f"{len(refused.refused)} of its {refused.asked} permission requests {verb}"


def _split(text: str, limit: int) -> list[str]:
    """Chunks of at most ``limit`` characters, cut at line ends where possible."""
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        chunks.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    chunks.append(rest)
    return chunks
