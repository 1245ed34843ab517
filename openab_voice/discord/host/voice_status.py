"""The bot's state as its voice channel's status (``OPENAB_VOICE_STATUS=true``).

``Listening``, ``Thinking``, ``Speaking`` come from the session's
:class:`~openab_voice.engine.events.DialogueStateChanged`; ``Running a task`` from
:class:`~openab_voice.actions.events.ActionChanged`, taking precedence while an action of this channel
runs. :func:`status_for` is the pure mapping; :class:`VoiceStatus` applies it through
``VoiceChannel.edit(status=...)``, coalesced to at most one update per ``interval_s`` per channel
(latest wins, never the same twice). Failures are logged and counted (:attr:`VoiceStatus.failures`),
never raised; closing clears the status at once. Why coalesced: docs/adr/0001-own-voice-receiver.md.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from openab_voice.actions.events import ActionChanged
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, wait_for
from openab_voice.engine.events import DialogueStateChanged
from openab_voice.jobs import JobStatus
from openab_voice.lifecycle import Lifecycle

__all__ = [
    "LISTENING",
    "RUNNING_TASK",
    "SPEAKING",
    "THINKING",
    "SendStatus",
    "VoiceStatus",
    "status_for",
]

log = logging.getLogger(__name__)

LISTENING = "Listening"
THINKING = "Thinking"
SPEAKING = "Speaking"
RUNNING_TASK = "Running a task"

# DialogueState values (engine/state.py); idle is a session without its conversation: no status.
_BY_DIALOGUE_STATE: dict[str, str | None] = {
    "idle": None,
    "listening": LISTENING,
    "thinking": THINKING,
    "tool_running": THINKING,
    "speaking": SPEAKING,
    "interrupted": LISTENING,  # the bot stopped talking to hear the interruption
    "recovering": LISTENING,  # back to listening once the failed response is dropped
}
_SEND_TIMEOUT_S = 10.0  # one update, discord.py's own rate-limit waits included

SendStatus = Callable[[str | None], Awaitable[Any]]
"""Sets the channel's status (None clears it): ``lambda s: channel.edit(status=s)``."""


def status_for(dialogue_state: str, *, task_running: bool) -> str | None:
    """The status to show: a running task first, else the dialogue's state (None: none).

    An unknown dialogue state shows as listening, the state a session rests in.
    """
    if task_running:
        return RUNNING_TASK
    return _BY_DIALOGUE_STATE.get(dialogue_state, LISTENING)


class VoiceStatus:
    """Keeps one voice channel's status in step with its session, rate limited.

    Subscribes on construction (so the conversation's first state is not missed); :meth:`start`
    starts the sender, :meth:`aclose` stops it and clears the status. Handlers run on the event loop.

    Args:
        send: sets the channel's status (None clears it); raises on failure.
        session_id: whose dialogue states and actions count.
        interval_s: least time between two updates.
    """

    def __init__(
        self,
        send: SendStatus,
        *,
        bus: EventBus,
        clock: Clock,
        session_id: str,
        interval_s: float,
    ) -> None:
        self._send = send
        self._clock = clock
        self._session_id = session_id
        self._interval_s = interval_s
        self._dialogue = "listening"  # joined: the bot hears the channel, dialogue or not
        self._running: set[str] = set()
        self._shown: str | None = None  # what we last set (None: nothing, or cleared)
        self._next_at = -math.inf
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._life = Lifecycle("voice status")
        self._failing = False
        self.sent = 0
        """Updates Discord accepted (clears included)."""
        self.failures = 0
        """Updates that failed (logged; the session goes on)."""
        self._subscriptions = [
            bus.subscribe(DialogueStateChanged, self._on_dialogue),
            bus.subscribe(ActionChanged, self._on_action),
        ]

    @property
    def wanted(self) -> str | None:
        """The status the session's state asks for now."""
        return status_for(self._dialogue, task_running=bool(self._running))

    @property
    def shown(self) -> str | None:
        """The status last set successfully."""
        return self._shown

    def start(self) -> None:
        """Start the sender (on the running loop); it shows the current state at once."""
        if self._life.new:
            self._life.start()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="voice-status")
            self._wake.set()

    def snapshot(self) -> dict[str, Any]:
        """For ``/voice status``: what is shown, how many updates were sent and failed."""
        return {"shown": self._shown, "sent": self.sent, "failures": self.failures}

    def _on_dialogue(self, event: DialogueStateChanged) -> None:
        if event.session_id == self._session_id:
            self._dialogue = event.state
            self._wake.set()

    def _on_action(self, event: ActionChanged) -> None:
        if event.session_id != self._session_id:
            return
        if event.status == JobStatus.RUNNING:
            self._running.add(event.action_id)
        else:
            self._running.discard(event.action_id)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            # Wait out the interval first: every change meanwhile lands in the one update after it.
            delay = self._next_at - self._clock.monotonic()
            if delay > 0:
                await self._clock.sleep(delay)
            self._wake.clear()
            wanted = self.wanted
            if wanted != self._shown:
                await self._update(wanted)

    async def _update(self, status: str | None) -> None:
        self._next_at = self._clock.monotonic() + self._interval_s
        try:
            await wait_for(self._clock, _SEND_TIMEOUT_S, self._send(status))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # HTTP, network, timeout: the session goes on without its status
            self.failures += 1
            level = logging.DEBUG if self._failing else logging.WARNING  # once per run of failures
            log.log(level, "voice channel status %r of session %s not set: %r", status, self._session_id, exc)
            self._failing = True
            return
        self._failing = False
        self._shown = status
        self.sent += 1

    async def aclose(self) -> None:
        """Stop following the session and clear the status (bounded). Idempotent."""
        if not self._life.begin_close():
            return
        for subscription in self._subscriptions:
            subscription.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        if self._shown is not None:
            await self._update(None)
        self._life.finish_close()
