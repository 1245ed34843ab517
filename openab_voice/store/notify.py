"""PostgreSQL ``LISTEN/NOTIFY``: the bot of remote executors hears a result at once, and the worker
holding a job's lease hears a cancel at once.

A transition into a terminal status sends ``NOTIFY openab_actions, '<action id>'`` in its own
transaction (delivered at commit, never for a rolled-back write); a cancel request
(``JobStore.request_cancel``) sends ``NOTIFY openab_cancels, '<action id>'`` the same way.
:class:`SettledListener` listens on one channel on its own connection in a thread and calls back with
each id; the caller still reads the store, so a lost notification (a reconnect, SQLite, which has
none) only costs the polling interval (the remote bot's poll; the worker's heartbeat for a cancel).
Channels are per database, not per schema: a notification from another schema in the same database
only causes a needless read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

CHANNEL = "openab_actions"
CANCEL_CHANNEL = "openab_cancels"
_RECONNECT_S = 1.0
_WAIT_S = 0.5  # how long one wait for notifications blocks: the bound on close()


def notify_settled(session: Session, action_id: str) -> None:
    """Queue the notification of ``action_id``'s settlement in the caller's transaction (PostgreSQL)."""
    _notify(session, CHANNEL, action_id)


def notify_cancel_requested(session: Session, action_id: str) -> None:
    """Queue the notification of a cancel request for ``action_id`` in the caller's transaction."""
    _notify(session, CANCEL_CHANNEL, action_id)


def _notify(session: Session, channel: str, payload: str) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
        )


class SettledListener:
    """Listens on ``channel`` (settled jobs by default) of ``url`` (PostgreSQL) in a daemon thread;
    reconnects on failure.

    Args:
        url: The store's SQLAlchemy URL.
        on_settled: Called from the listener thread with each notified action id.
        channel: :data:`CHANNEL` (settled jobs) or :data:`CANCEL_CHANNEL` (cancel requests).
    """

    def __init__(self, url: URL, on_settled: Callable[[str], None], *, channel: str = CHANNEL) -> None:
        if channel not in (CHANNEL, CANCEL_CHANNEL):  # it is interpolated into LISTEN below
            raise ValueError(f"unknown notification channel {channel!r}")
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_settled = on_settled
        self._channel = channel
        self._stopped = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"openab-listener-{channel}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wait_listening(self, timeout_s: float) -> bool:
        """Whether the LISTEN is in place within ``timeout_s`` (tests, and start-up logging)."""
        return self._listening.wait(timeout_s)

    def close(self) -> None:
        """Stop listening; returns within about one wait. Idempotent."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(_WAIT_S * 4)  # a thread's join: real time, whatever clock the store has

    def _run(self) -> None:
        import psycopg  # the `postgres` extra; only a PostgreSQL store builds a listener

        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {self._channel}")
                    self._listening.set()
                    while not self._stopped.is_set():
                        for notice in connection.notifies(timeout=_WAIT_S):
                            self._on_settled(notice.payload)
            except Exception as exc:  # a restart of the server, a cut connection: listen again
                self._listening.clear()
                log.warning(
                    "listening on %s failed (%s); polling until it is back", self._channel, type(exc).__name__
                )
                self._stopped.wait(_RECONNECT_S)
