"""One lifecycle for every long-lived object: new → running → closing → closed.

An owner holds a :class:`Lifecycle` (``self._life = Lifecycle("voice session")``) instead of a
``_closed`` flag or a private phase enum. Closing is idempotent: :meth:`Lifecycle.begin_close` is
True only for the first caller. Guards raise :class:`~openab_voice.errors.LifecycleError` with
httpx-style messages ("Cannot send a request, as the client has been closed.").
"""

from __future__ import annotations

from enum import StrEnum

from openab_voice.errors import ErrorCode, LifecycleError


class Phase(StrEnum):
    """Where an object is in its life; it only ever moves forward."""

    NEW = "new"
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


class Lifecycle:
    """The phase of one owner, its transitions and its guards.

    Args:
        owner: What the owner is called in guard messages ("voice session").
        started: Begin in ``RUNNING`` (for objects that work from construction on).
    """

    __slots__ = ("_owner", "_phase")

    def __init__(self, owner: str, *, started: bool = False) -> None:
        self._owner = owner
        self._phase = Phase.RUNNING if started else Phase.NEW

    def __repr__(self) -> str:
        return f"Lifecycle({self._owner!r}, phase={self._phase.value})"

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def new(self) -> bool:
        """Not started and not closed."""
        return self._phase is Phase.NEW

    @property
    def running(self) -> bool:
        return self._phase is Phase.RUNNING

    @property
    def closing(self) -> bool:
        """Close has begun and not finished."""
        return self._phase is Phase.CLOSING

    @property
    def closed(self) -> bool:
        """Close has begun (closing or closed): the owner takes no new work."""
        return self._phase is Phase.CLOSING or self._phase is Phase.CLOSED

    @property
    def finished(self) -> bool:
        """Close has finished."""
        return self._phase is Phase.CLOSED

    def start(self) -> None:
        """NEW → RUNNING; starting twice, or after a close, raises."""
        if self._phase is Phase.NEW:
            self._phase = Phase.RUNNING
            return
        if self.closed:
            raise self._closed_error("start")
        raise self._illegal("start", f"the {self._owner} has already been started")

    def begin_close(self) -> bool:
        """NEW or RUNNING → CLOSING; True only for the first caller, so close is idempotent."""
        if self.closed:
            return False
        self._phase = Phase.CLOSING
        return True

    def finish_close(self) -> None:
        """CLOSING → CLOSED; only the caller that won :meth:`begin_close` finishes it."""
        if self._phase is not Phase.CLOSING:
            raise self._illegal("finish closing", f"the {self._owner} is {self._phase.value}")
        self._phase = Phase.CLOSED

    def close_now(self) -> bool:
        """Any phase → CLOSED in one step (nothing to tear down); True only for the first caller."""
        first = self.begin_close()
        self._phase = Phase.CLOSED
        return first

    def require_running(self, doing: str) -> None:
        """Raise unless RUNNING: ``Cannot {doing}, as the {owner} has not been started.`` / ``… closed.``"""
        if self._phase is Phase.RUNNING:
            return
        if self._phase is Phase.NEW:
            raise LifecycleError(
                f"Cannot {doing}, as the {self._owner} has not been started.",
                code=ErrorCode.LIFECYCLE_NOT_STARTED,
            )
        raise self._closed_error(doing)

    def require_open(self, doing: str) -> None:
        """Raise once close has begun; NEW and RUNNING both pass."""
        if self.closed:
            raise self._closed_error(doing)

    def _closed_error(self, doing: str) -> LifecycleError:
        return LifecycleError(
            f"Cannot {doing}, as the {self._owner} has been closed.", code=ErrorCode.LIFECYCLE_CLOSED
        )

    def _illegal(self, doing: str, because: str) -> LifecycleError:
        return LifecycleError(f"Cannot {doing}, as {because}.", code=ErrorCode.LIFECYCLE_ILLEGAL_TRANSITION)
