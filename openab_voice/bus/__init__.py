"""Typed event bus: components publish frozen event dataclasses; reporters, the demo report and
tests subscribe by type. Events carry time from the injected clock and never raw audio or secrets."""

from openab_voice.bus.bus import EventBus, EventStream, Subscription
from openab_voice.bus.events import Event, sanitize

__all__ = ["Event", "EventBus", "EventStream", "Subscription", "sanitize"]
