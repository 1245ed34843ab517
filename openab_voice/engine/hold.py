"""A response prepared ahead of its turn, and what it reports while it waits.

Preemptive generation runs a response before its turn is confirmed. :class:`Hold` keeps it from
being heard or acting until :meth:`Hold.release`; :class:`ResponseReports` is how a response tells
the conversation manager its progress (state-machine inputs) and the bus its latency figures, and
while its hold is held both wait, to go out in order under the turn's ids once it is released.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TypeAlias

from openab_voice.bus.events import LatencyMeasured
from openab_voice.engine.handle import SpeechHandle
from openab_voice.engine.response import ResponseDeps
from openab_voice.engine.state import (
    AudioStarted,
    DialogueInput,
    ResponseFailed,
    ResponseFinished,
    ToolFinished,
    ToolStarted,
)

__all__ = ["Hold", "Progress", "ResponseReports"]

Progress: TypeAlias = AudioStarted | ToolStarted | ToolFinished | ResponseFinished | ResponseFailed
"""What a response reports to its manager."""


class Hold:
    """Holds a response prepared ahead of its turn (preemptive generation) until it is released.

    While held, the response generates and synthesizes, but nothing reaches the output, no tool
    runs, and its reports and latency figures wait; :meth:`release` (the turn was confirmed) lets
    them all through in order. A hold never released is dropped with its task: nothing was said.
    """

    def __init__(self) -> None:
        self._released = asyncio.Event()
        self._on_release: list[Callable[[], None]] = []
        self.eou_at: float | None = None

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def release(self, *, eou_at: float | None) -> None:
        """The turn is confirmed: ``eou_at`` is the end of the speech it answers."""
        if self._released.is_set():
            return
        self.eou_at = eou_at
        callbacks, self._on_release = self._on_release, []
        for callback in callbacks:
            callback()
        self._released.set()

    def on_release(self, callback: Callable[[], None]) -> None:
        self._on_release.append(callback)

    async def wait(self) -> None:
        await self._released.wait()


class ResponseReports:
    """One response's progress reports and latency figures, kept back while its hold is held.

    Args:
        deps: the bus and clock (and the session stamped on each figure).
        handle: the response's handle; its ids are read when a report goes out.
        speaker_id: the user who asked.
        eou_at: end of the user's speech (None for a resume); a hold's own once released.
        send: puts a state-machine input in the manager's inbox.
        hold: set for a response prepared ahead of its turn.
    """

    def __init__(
        self,
        *,
        deps: ResponseDeps,
        handle: SpeechHandle,
        speaker_id: str | None,
        eou_at: float | None,
        send: Callable[[DialogueInput], None],
        hold: Hold | None,
    ) -> None:
        self._d = deps
        self._handle = handle
        self._speaker_id = speaker_id
        self._eou_at = eou_at
        self._send = send
        self._hold = hold
        self._held: list[Progress | tuple[str, float, float]] = []  # waiting for the release
        if hold is not None:
            hold.on_release(self._released)

    @property
    def eou_at(self) -> float | None:
        return self._eou_at if self._hold is None else self._hold.eou_at

    async def on_hold(self) -> None:
        """Before the first audio or tool call of a held response: wait for its release."""
        if self._hold is not None:
            await self._hold.wait()

    def progress(self, item: Progress) -> None:
        if self._hold is not None and not self._hold.released:
            self._held.append(item)
        else:
            self._send(item)

    def latency(self, metric: str, since: float) -> None:
        now = self._d.clock.monotonic()
        if self._hold is not None and not self._hold.released:
            self._held.append((metric, (now - since) * 1000.0, now))  # published with the turn's id
        else:
            self._publish_latency(metric, (now - since) * 1000.0, now)

    def _released(self) -> None:
        """The hold was released and the handle renamed: what waited goes out under the turn's ids."""
        held, self._held = self._held, []
        for item in held:
            if isinstance(item, tuple):
                self._publish_latency(*item)
            else:
                self._send(dataclasses.replace(item, response_id=self._handle.response_id))

    def _publish_latency(self, metric: str, value_ms: float, at: float) -> None:
        self._d.bus.publish(
            LatencyMeasured(
                at=at,
                session_id=self._d.session_id,
                metric=metric,
                value_ms=value_ms,
                speaker_id=self._speaker_id,
                turn_id=self._handle.turn_id,
            )
        )
