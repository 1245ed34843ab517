"""Speech that is only worth saying while its cause holds.

A status line queued for later ("the task is waiting for confirmation") can stop being true before
the bot gets to say it: the channel was busy, and meanwhile the operator confirmed and the task ran.
Whoever queues such speech attaches a :class:`SpeechCause`; the engine asks it, without knowing what
it is about, right before the response starts, right before each sentence is synthesized, and right
before the utterance's first frame goes to the output. Once it reports a reason the speech is
dropped (``SpeechDropped`` on the bus) and nothing of it is played. A cause that can tell when it
may have changed (``watch``) is also followed while its speech plays: when it expires then, the
output is cut within a frame, as for a barge-in, so a line is never still being said once false.

The engine stays ignorant of actions: the action plane builds the cause from its own state.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.engine.events import SpeechDropped

__all__ = ["Announcement", "AnnouncementQueue", "SpeechCause", "publish_dropped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechCause:
    """Why queued speech is worth saying, and how to tell when it no longer is.

    Attributes:
        name: what queued it and why, for events and reports (``"action 3f2a awaiting confirmation"``).
        expired: None while the speech is still true; otherwise the reason it is not
            (``"action is running"``). Called on the event loop, often: it must be cheap and must
            not block (read in-memory state, never the database).
        watch: optional; registers a callback to run on the event loop whenever the cause may have
            changed, and returns the function that unregisters it. Without it the cause is only
            checked at the points above, and speech already playing plays to its end.
    """

    name: str
    expired: Callable[[], str | None]
    watch: Callable[[Callable[[], None]], Callable[[], None]] | None = None

    def reason(self) -> str | None:
        """The reason the speech expired, or None while it holds (a predicate that raises counts as
        expired: speech whose truth cannot be checked is not said)."""
        try:
            return self.expired()
        except Exception as exc:
            return f"validity check failed: {type(exc).__name__}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Announcement:
    """A status line waiting for the channel to be quiet; ``response_id`` is the response it becomes."""

    response_id: str
    text: str
    cause: SpeechCause | None = None


def publish_dropped(
    bus: EventBus,
    clock: Clock,
    *,
    session_id: str | None,
    turn_id: str,
    text: str,
    cause: SpeechCause | None,
    reason: str,
    point: str,
) -> None:
    """Publish :class:`~openab_voice.engine.events.SpeechDropped`."""
    bus.publish(
        SpeechDropped(
            at=clock.monotonic(),
            session_id=session_id,
            turn_id=turn_id,
            text=text,
            cause=cause.name if cause is not None else "",
            reason=reason,
            point=point,
        )
    )


class AnnouncementQueue:
    """Status lines in the order they were queued; expired ones are dropped when they come up.

    Bounded: past ``maxlen`` the oldest line is dropped, and that is published too (a line is never
    lost silently). Not thread-safe: the conversation manager's loop owns it.
    """

    def __init__(self, *, bus: EventBus, clock: Clock, session_id: str | None, maxlen: int = 8) -> None:
        self._bus = bus
        self._clock = clock
        self._session_id = session_id
        self._maxlen = maxlen
        self._items: collections.deque[Announcement] = collections.deque()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, text: str, cause: SpeechCause | None = None) -> Announcement:
        """Queue ``text``; returns it with the response id it will be spoken as."""
        if len(self._items) >= self._maxlen:
            self._drop(self._items.popleft(), "announcement queue full")
        item = Announcement(response_id=f"announce-{next(self._ids)}", text=text, cause=cause)
        self._items.append(item)
        return item

    def pop(self) -> Announcement | None:
        """The oldest line still true, or None; expired lines before it are dropped (published)."""
        while self._items:
            item = self._items.popleft()
            reason = item.cause.reason() if item.cause is not None else None
            if reason is None:
                return item
            self._drop(item, reason)
        return None

    def _drop(self, item: Announcement, reason: str) -> None:
        publish_dropped(
            self._bus,
            self._clock,
            session_id=self._session_id,
            turn_id=item.response_id,
            text=item.text,
            cause=item.cause,
            reason=reason,
            point="queued",
        )
