"""The canonical text of an action's result, split for Discord, and the short spoken status.

Text is the audit record: the full agent output is posted (split under Discord's 2,000-character
message limit, or attached as a file when it would take more than a few messages) before any speech.
The voice says only the status unless every listener is trusted.
"""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.engine.sanitizer import speakable

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


def headline(action_id: str, execution: str) -> str:
    """One line naming the action and how it ended."""
    return f"Action `{action_id}` {_HEADLINES.get(execution, execution)}."


def result_text(*, action_id: str, goal: str, execution: str, output: str, detail: str = "") -> ResultText:
    """The result message(s): headline, goal, then everything the agent said."""
    body = [headline(action_id, execution), f"Goal: {goal}"]
    if detail:
        body.append(f"Detail: {detail}")
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


def spoken_status(*, execution: str, output: str, all_trusted: bool) -> str:
    """What the voice says once the text is posted: the status, or a short summary for trusted rooms."""
    status = {
        "succeeded": "The task is done.",
        "failed": "The task failed.",
        "cancelled": "The task was cancelled.",
        "outcome_unknown": "The task ended without a known outcome.",
    }.get(execution, "The task ended.")
    if all_trusted and execution == "succeeded":
        first = speakable(output.strip().split("\n", 1)[0])[:200].strip()
        if first:
            return f"{status} {first} The full result is in the text channel."
    return f"{status} The result is in the text channel."


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
