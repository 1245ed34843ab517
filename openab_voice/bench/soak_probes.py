"""What the soak samples: resident memory, every queue's depth against its bound, the event loop's
lag, and exceptions nobody handled.

The queue probe does not know the bot's parts in advance: it walks a voice session's object graph
(our own objects only, a few levels deep) and measures every bounded or unbounded container it finds
there by shape (a ``deque``, an ``asyncio.Queue``, the receive inbox, a frame ring, a processed
capture stream, the playback buffer), named by its attribute path. A part added later is measured
without changing the soak; one that holds its items some other way is not, and says nothing.
"""

from __future__ import annotations

import asyncio
import collections
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from openab_voice.clock import Clock

__all__ = ["ExceptionCounter", "LoopLagMonitor", "QueueDepth", "queue_depths", "rss_bytes"]

_MAX_DEPTH = 4
_OUR_PACKAGE = "openab_voice."


def rss_bytes() -> int:
    """This process's resident set size (``VmRSS`` of ``/proc/self/status``; 0 where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """One container: how many items it held, and its bound (None: unbounded)."""

    depth: int
    bound: int | None


def queue_depths(root: object, prefix: str) -> dict[str, QueueDepth]:
    """Every container reachable from ``root`` through our own objects, by attribute path."""
    found: dict[str, QueueDepth] = {}
    _walk(root, prefix, 0, set(), found)
    return found


def _measure(value: object) -> QueueDepth | None:
    match value:
        case collections.deque():
            return QueueDepth(len(value), value.maxlen)
        case asyncio.Queue():
            return QueueDepth(value.qsize(), value.maxsize or None)
    kind = type(value).__name__
    if kind == "Inbox":  # discord.inbox: droppable packets against max_packets
        return QueueDepth(int(value._packets), int(value._max_packets))  # type: ignore[attr-defined]
    if kind == "FrameRing":
        return QueueDepth(len(value), int(value.capacity))  # type: ignore[arg-type, attr-defined]
    if kind == "ProcessedCaptureStream":
        return QueueDepth(len(value), int(value.maxsize))  # type: ignore[arg-type, attr-defined]
    if kind == "FrameSubscription":
        frames = value._frames  # type: ignore[attr-defined]
        return QueueDepth(len(frames), frames.maxlen)
    if kind == "Playback":
        return QueueDepth(len(value._frames), int(value._max_frames))  # type: ignore[attr-defined]
    return None


def _children(value: object) -> Iterator[tuple[str, object]]:
    if isinstance(value, dict):
        for key, item in list(value.items())[:64]:
            yield f"[{key}]", item
        return
    if isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(list(value)[:64]):
            yield f"[{index}]", item
        return
    if not type(value).__module__.startswith(_OUR_PACKAGE):
        return
    names: list[str] = list(getattr(value, "__dict__", {}))
    for cls in type(value).__mro__:
        names += [n for n in getattr(cls, "__slots__", ()) if isinstance(n, str)]
    for name in dict.fromkeys(names):
        try:
            yield f".{name.lstrip('_')}", getattr(value, name)
        except AttributeError:
            continue


def _walk(value: object, path: str, depth: int, seen: set[int], found: dict[str, QueueDepth]) -> None:
    if id(value) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(value))
    measured = _measure(value)
    if measured is not None:
        found[path] = measured
        if not type(value).__module__.startswith(_OUR_PACKAGE):
            return  # a deque's items are not containers of ours
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return
    for name, child in _children(value):
        _walk(child, path + name, depth + 1, seen, found)


@dataclass(slots=True)
class LoopLagMonitor:
    """Sleeps ``interval_s`` over and over on the loop and records how late each wake-up was."""

    clock: Clock
    interval_s: float = 0.05
    samples_ms: list[float] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            before = self.clock.monotonic()
            await self.clock.sleep(self.interval_s)
            self.samples_ms.append(max(0.0, (self.clock.monotonic() - before - self.interval_s) * 1000.0))

    def take(self) -> list[float]:
        """The samples since the last call."""
        taken, self.samples_ms = self.samples_ms, []
        return taken


class ExceptionCounter:
    """Counts exceptions that reached the event loop's exception handler (a task's exception never
    retrieved, a failing callback) or a thread's ``excepthook``; keeps the first few messages.

    ``install`` on the running loop; ``uninstall`` restores what was there.
    """

    def __init__(self, keep: int = 10) -> None:
        self.count = 0
        self.messages: list[str] = []
        self._keep = keep
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_hook = threading.excepthook

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.set_exception_handler(self._on_loop)
        self._previous_hook = threading.excepthook
        threading.excepthook = self._on_thread

    def uninstall(self) -> None:
        if self._loop is not None:
            self._loop.set_exception_handler(None)
        threading.excepthook = self._previous_hook

    def _note(self, message: str) -> None:
        self.count += 1
        if len(self.messages) < self._keep:
            self.messages.append(message[:500])

    def _on_loop(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self._note(
            f"{context.get('message', '')}: {type(exc).__name__}: {exc}"
            if exc
            else str(context.get("message"))
        )
        loop.default_exception_handler(context)

    def _on_thread(self, args: threading.ExceptHookArgs) -> None:
        self._note(
            f"thread {args.thread.name if args.thread else '?'}: {args.exc_type.__name__}: {args.exc_value}"
        )
        print(f"unhandled exception in thread: {args.exc_value!r}", file=sys.stderr)
