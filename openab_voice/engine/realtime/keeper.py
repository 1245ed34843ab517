"""One speech-to-speech provider session kept alive for a conversation: open, read, and reconnect
after a loss (the realtime and the live engines' common loop).

:class:`SessionKeeper` opens a session (:meth:`~SessionKeeper._open`: the engine's own greeting and
seeding), hands every server event to :meth:`~SessionKeeper._dispatch`, and when the session goes
reports ``ProviderLost`` once (``recovering``), waits with bounded backoff (doubling to
``reconnect_max_s``, for as long as the call lasts) and reports ``Recovered`` when a new one is ready.
A failure that is not retried (a refused key, an unknown model) leaves it down: :attr:`failure`
says why.
"""

from __future__ import annotations

import abc
import enum
import logging
from collections.abc import AsyncIterator
from typing import Any, Generic, Protocol, TypeVar

from openab_voice.bus.events import ErrorRaised
from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.state import ProviderLost, Recovered
from openab_voice.errors import OpenabError

__all__ = ["Link", "LinkPhase", "SessionKeeper"]

log = logging.getLogger(__name__)

E = TypeVar("E")
E_co = TypeVar("E_co", covariant=True)


class Link(Protocol[E_co]):
    """An open provider session, as the keeper reads and closes it."""

    def events(self) -> AsyncIterator[E_co]: ...

    async def close(self) -> None: ...


L = TypeVar("L", bound=Link[Any])


class LinkPhase(enum.Enum):
    """Where a :class:`SessionKeeper` is: ``connecting`` -> ``up`` <-> ``down``, then ``failed``
    (a failure that is not retried) or ``closed``."""

    CONNECTING = "connecting"  # the first session is being opened: nothing was lost yet
    UP = "up"  # a session is open (:attr:`SessionKeeper.link`)
    DOWN = "down"  # ProviderLost was reported; reconnecting with backoff, Recovered owed
    FAILED = "failed"  # not retried (:attr:`SessionKeeper.failure`): the session stays down
    CLOSED = "closed"  # close() was called


class SessionKeeper(abc.ABC, Generic[L, E]):
    """Keeps one provider session up (see the module docstring); subclasses open and dispatch.

    Args:
        binding: the conversation (its inbox gets the reports, its bus the errors).
        engine: the engine's name in logs and error details.
        reconnect_initial_s: the first wait before reconnecting; doubled per failure ...
        reconnect_max_s: ... up to this bound.
    """

    def __init__(
        self, *, binding: EngineBinding, engine: str, reconnect_initial_s: float, reconnect_max_s: float
    ) -> None:
        self._b = binding
        self._engine = engine
        self._initial_s = reconnect_initial_s
        self._max_s = reconnect_max_s
        self.link: L | None = None
        """The session now (None while down)."""
        self.phase = LinkPhase.CONNECTING
        self.failure: OpenabError | None = None
        """A failure that is not retried (auth, unknown model): the session stays down."""

    # --- what an engine's session does --------------------------------------------------------

    @property
    @abc.abstractmethod
    def model(self) -> str: ...

    @abc.abstractmethod
    async def _open(self) -> L:
        """A fresh session, greeted and seeded (closed again when that fails).

        Raises:
            OpenabError: why there is none.
        """

    @abc.abstractmethod
    def _dispatch(self, event: E) -> OpenabError | None:
        """Handle one server event; an error that ends the session."""

    @abc.abstractmethod
    def _lost(self, exc: BaseException) -> OpenabError:
        """Our error for a session that broke with ``exc``."""

    def _fresh(self) -> None:
        """A new session is up: forget what belonged to the old one."""

    # --- the loop ------------------------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """``ProviderLost`` was reported and ``Recovered`` has not followed (it never does once failed)."""
        return self.phase in (LinkPhase.DOWN, LinkPhase.FAILED)

    @property
    def closed(self) -> bool:
        """:meth:`close` was called (read after each await: it may come while a session opens)."""
        return self.phase is LinkPhase.CLOSED

    async def run(self) -> None:
        """Keep a session up until :meth:`close` (or a failure that is not retried)."""
        delay = self._initial_s
        while not self.closed:
            try:
                link = await self._open()
            except OpenabError as exc:
                if not self._down(exc):
                    return
                await self._b.clock.sleep(delay)
                delay = min(delay * 2, self._max_s)
                continue
            self._fresh()
            if self.closed:  # closed while it opened: nobody reads it
                await link.close()
                return
            self.link = link
            recovered = self.phase is LinkPhase.DOWN
            self.phase = LinkPhase.UP
            if recovered:
                self._b.report(Recovered())
            try:
                error = await self._read(link)
            finally:
                if self.link is link:
                    self.link = None
                await link.close()
            if self.closed:
                return
            delay = self._initial_s
            if not self._down(error):
                return

    async def close(self) -> None:
        """Close the session now (the task running :meth:`run` is the owner's to cancel)."""
        self.phase = LinkPhase.CLOSED
        link, self.link = self.link, None
        if link is not None:
            await link.close()

    def _down(self, error: OpenabError) -> bool:
        """The session is gone (or never came): report it; False when it must not be retried."""
        log.warning("%s session down: %s", self._engine, error)
        if self.closed:
            return False  # closed while a session opened or was read: nothing to report or retry
        if self.phase is not LinkPhase.DOWN:
            self._b.report(ProviderLost(code=error.code, message=error.message, retryable=error.retryable))
        self.phase = LinkPhase.DOWN
        self._publish(error, model=True)
        if not error.retryable:
            self.failure = error
            self.phase = LinkPhase.FAILED
            return False
        return True

    async def _read(self, link: L) -> OpenabError:
        """Route the session's events until it ends; the error it ended with."""
        try:
            async for event in link.events():
                failure = self._dispatch(event)
                if failure is not None:
                    return failure
        except Exception as exc:  # anything unexpected ends this session; a fresh one follows
            return self._lost(exc)
        return self._lost(ConnectionError("the provider closed the session"))

    def _publish(self, error: OpenabError, *, model: bool) -> None:
        details: dict[str, Any] = {"engine": self._engine}
        if model:
            details["model"] = self.model
        self._b.bus.publish(
            ErrorRaised(
                at=self._b.clock.monotonic(),
                session_id=self._b.session_id,
                code=error.code,
                message=error.message,
                retryable=error.retryable,
                details=details,
            )
        )
