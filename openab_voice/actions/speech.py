"""Action speech that is still true when it is said.

A spoken acknowledgment waits its turn behind whatever the bot is saying; meanwhile the operator may
confirm, the task may run and finish. "The task is waiting for confirmation" is then a lie, and said
before "The task is done." it tells the story backwards. So an acknowledgment carries a
:class:`~openab_voice.engine.expiry.SpeechCause` that the speaking path checks right before it is
started, synthesized and played: the action's status must still be the one the line describes. It
is also followed while the line plays, so a click that lands mid-sentence cuts it.

Each line is said in the language of what it answers (:func:`language_of`): a task asked for in
Chinese is acknowledged, and its result announced, in Chinese (docs/adr/0023).

The status comes from :class:`ActionStatusView`, which follows ``ActionChanged`` on the bus (every
transition is published right after its compare-and-set write), so the check reads memory, never the
database, and is as fresh as the last write.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection
from typing import Literal

from openab_voice.actions.events import ActionChanged
from openab_voice.bus import EventBus
from openab_voice.engine.expiry import SpeechCause
from openab_voice.jobs import AWAITING_CONFIRMATION, JobStatus
from openab_voice.providers.scripts import has_cjk

__all__ = [
    "NO_TASK_LINE",
    "STATUS_LINES",
    "STATUS_LINES_ZH",
    "ActionStatusView",
    "Language",
    "language_of",
    "status_line",
    "while_status",
]

Language = Literal["en", "zh"]

STATUS_LINES: dict[JobStatus, str] = {
    JobStatus.PROPOSED: "The task is in the text channel, waiting for confirmation.",
    JobStatus.DELIVERED: "The task is in the text channel, waiting for confirmation.",
    JobStatus.DELIVERY_FAILED: "I could not post the task to the text channel, so it will not run.",
    JobStatus.CONFIRMED: "The task is confirmed and about to start.",
    JobStatus.REJECTED: "The task was rejected.",
    JobStatus.EXPIRED: "The task expired before anyone confirmed it.",
    JobStatus.RUNNING: "The task is running.",
    JobStatus.SUCCEEDED: "The task is done.",
    JobStatus.FAILED: "The task failed.",
    JobStatus.CANCELLED: "The task was cancelled.",
    JobStatus.OUTCOME_UNKNOWN: "The task ended without a known outcome.",
}
"""The one spoken line per status: short (they are spoken) and never more than the status says."""

STATUS_LINES_ZH: dict[JobStatus, str] = {
    JobStatus.PROPOSED: "任务已经发到文字频道，等待确认。",
    JobStatus.DELIVERED: "任务已经发到文字频道，等待确认。",
    JobStatus.DELIVERY_FAILED: "我没能把任务发到文字频道，所以它不会运行。",
    JobStatus.CONFIRMED: "任务已经确认，马上开始。",
    JobStatus.REJECTED: "任务被拒绝了。",
    JobStatus.EXPIRED: "任务在有人确认之前过期了。",
    JobStatus.RUNNING: "任务正在运行。",
    JobStatus.SUCCEEDED: "任务完成了。",
    JobStatus.FAILED: "任务失败了。",
    JobStatus.CANCELLED: "任务被取消了。",
    JobStatus.OUTCOME_UNKNOWN: "任务结束了，但结果未知。",
}
"""The same lines in Chinese (simplified), said for a task asked for in Chinese."""

NO_TASK_LINE = "I have not started any task."
NO_TASK_LINE_ZH = "我还没有开始任何任务。"


def language_of(text: str) -> Language:
    """The language to answer ``text`` in: Chinese when it is written in CJK characters."""
    return "zh" if has_cjk(text) else "en"


def status_line(status: JobStatus | None, language: Language = "en") -> str:
    """The canonical spoken line for an action in ``status`` (None: the session has no action)."""
    if language == "zh":
        return NO_TASK_LINE_ZH if status is None else STATUS_LINES_ZH[status]
    return NO_TASK_LINE if status is None else STATUS_LINES[status]


class ActionStatusView:
    """The latest status of recent actions, as ``ActionChanged`` reported it.

    Args:
        bus: where transitions are published.
        keep: actions remembered (the oldest is forgotten first).
    """

    def __init__(self, bus: EventBus, *, keep: int = 256) -> None:
        self._keep = keep
        self._status: collections.OrderedDict[str, JobStatus] = collections.OrderedDict()
        self._watchers: dict[str, list[Callable[[], None]]] = {}
        self._sub = bus.subscribe(ActionChanged, self._on_changed)

    def status(self, action_id: str) -> JobStatus | None:
        """The action's status as last published; None when no transition was seen."""
        return self._status.get(action_id)

    def watch(self, action_id: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each transition of ``action_id``; returns the unwatch function."""
        self._watchers.setdefault(action_id, []).append(callback)

        def unwatch() -> None:
            callbacks = self._watchers.get(action_id, [])
            if callback in callbacks:
                callbacks.remove(callback)
            if not callbacks:
                self._watchers.pop(action_id, None)

        return unwatch

    def _on_changed(self, event: ActionChanged) -> None:
        self._status[event.action_id] = JobStatus(event.status)
        self._status.move_to_end(event.action_id)
        while len(self._status) > self._keep:
            self._status.popitem(last=False)
        for callback in tuple(self._watchers.get(event.action_id, ())):
            callback()

    def close(self) -> None:
        """Stop following the bus (idempotent)."""
        self._sub.close()


def while_status(
    view: ActionStatusView,
    action_id: str,
    *,
    now: JobStatus,
    statuses: Collection[JobStatus] = AWAITING_CONFIRMATION,
    describes: str = "awaiting confirmation",
) -> SpeechCause:
    """A cause that holds while the action is in one of ``statuses``.

    Args:
        view: the live statuses.
        action_id: the action the line is about.
        now: its status as the speaker last read it (counts until the view has seen a transition).
        statuses: where the line is true (default: still waiting for the operator).
        describes: what the line says about the action, for the cause's name.
    """

    def expired() -> str | None:
        status = view.status(action_id) or now
        return None if status in statuses else f"the action is {status.value}"

    def watch(callback: Callable[[], None]) -> Callable[[], None]:
        return view.watch(action_id, callback)

    return SpeechCause(name=f"action {action_id} {describes}", expired=expired, watch=watch)
