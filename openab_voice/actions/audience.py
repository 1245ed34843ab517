"""Who may hear an action's result read aloud, and what happens when that audience changes.

The voice reads the start of a result only when every listener is trusted (a configured trusted
listener who can view the control channel), decided once on the :class:`Audience` at delivery. The
line carries a :class:`~openab_voice.engine.expiry.SpeechCause` that is withdrawn, for good, when
someone new joins, a listener loses view of the control channel, or the bot leaves; leaving, muting
or deafening keeps it. The engine checks the cause before and while the line plays, and the policy
then downgrades to the short status line. The rules in detail: docs/adr/0004-action-plane.md.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable

from openab_voice.actions.ports import Audience, VoiceSide
from openab_voice.bus import EventBus
from openab_voice.bus.events import AudienceChanged
from openab_voice.engine.events import SpeechDropped
from openab_voice.engine.expiry import SpeechCause
from openab_voice.tasks import TaskOwner

__all__ = [
    "Audience",
    "AudienceGuard",
    "audience_cause",
    "cleared_listeners",
    "may_hear_details",
    "withdrawal",
]


def cleared_listeners(audience: Audience, trusted: frozenset[int]) -> frozenset[int]:
    """The listeners before whom a result may be read: configured as trusted and viewing the control
    channel."""
    return audience.listeners & audience.viewers & trusted


def may_hear_details(audience: Audience | None, trusted: frozenset[int]) -> bool:
    """Whether the start of a result may be read aloud to ``audience``: someone listens, and every
    listener is cleared."""
    return (
        audience is not None
        and bool(audience.listeners)
        and audience.listeners == cleared_listeners(audience, trusted)
    )


def withdrawal(start: Audience, now: Audience | None, trusted: frozenset[int]) -> str | None:
    """Why a result read aloud to ``start`` may not go on before ``now``; None while it may.

    Pure. ``start`` is the audience the reading was cleared for; only listeners cleared then, and
    still cleared now, may hear it.
    """
    if now is None:
        return "the bot left the voice channel"
    cleared = cleared_listeners(start, trusted)
    joined = sorted(now.listeners - start.listeners)
    if joined:
        return f"{_users(joined)} joined the voice channel"
    lost = sorted((now.listeners & start.viewers) - now.viewers)
    if lost:
        return f"{_users(lost)} lost view of the control channel"
    uncleared = sorted(now.listeners - (cleared & cleared_listeners(now, trusted)))
    if uncleared:
        return f"{_users(uncleared)} not cleared to hear the result"
    return None


def _users(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:5])
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return f"user{'s' if len(ids) > 1 else ''} {shown}{more}"


AudienceNow = Callable[[], Audience | None]
"""The guild's audience as it is now (None: the bot is not in a voice channel there)."""


def audience_cause(
    *,
    name: str,
    start: Audience,
    now: AudienceNow,
    trusted: frozenset[int],
    bus: EventBus,
    guild_id: int,
) -> SpeechCause:
    """A cause that holds while :func:`withdrawal` finds nothing, latched once it does.

    Args:
        name: the cause's name (events, reports); unique per reading.
        start: the audience the reading was cleared for.
        now: reads the live audience (in-memory: discord.py's cache).
        trusted: the configured trusted listeners.
        bus: where ``AudienceChanged`` arrives; ``watch`` follows those of ``guild_id``.
        guild_id: the guild the result is read in.
    """
    reason: list[str] = []  # the latch: once withdrawn, always withdrawn
    guild = str(guild_id)

    def expired() -> str | None:
        if not reason:
            found = withdrawal(start, now(), trusted)
            if found is None:
                return None
            reason.append(found)
        return reason[0]

    def watch(callback: Callable[[], None]) -> Callable[[], None]:
        def changed(event: AudienceChanged) -> None:
            if event.guild_id == guild:
                callback()

        return bus.subscribe(AudienceChanged, changed).close

    return SpeechCause(name=name, expired=expired, watch=watch)


class AudienceGuard:
    """Speaks a result's line: the detailed one under an audience cause when the audience is cleared,
    else the status line; and the status line after a detailed one that was withdrawn.

    Args:
        voice: the audience and the status voice.
        bus: ``SpeechDropped`` tells which detailed line was withdrawn; ``AudienceChanged`` drives
            the causes.
        trusted: the configured trusted listeners.
        keep: detailed lines remembered for their downgrade (oldest forgotten first; a line spoken to
            its end is never dropped, so forgetting it loses nothing).
    """

    def __init__(self, *, voice: VoiceSide, bus: EventBus, trusted: frozenset[int], keep: int = 64) -> None:
        self._voice = voice
        self._bus = bus
        self._trusted = trusted
        self._keep = keep
        self._ids = itertools.count(1)
        # cause name -> (guild, the status line said instead)
        self._pending: collections.OrderedDict[str, tuple[int, str]] = collections.OrderedDict()
        self._tasks = TaskOwner("audience guard")  # the status lines said after a withdrawn detail
        self._sub = bus.subscribe(SpeechDropped, self._on_dropped)
        self.downgraded = 0

    def cleared(self, guild_id: int, control_channel_id: int) -> Audience | None:
        """The audience now when a detailed line may be read to it, else None."""
        audience = self._voice.audience(guild_id, control_channel_id)
        return audience if may_hear_details(audience, self._trusted) else None

    async def speak(
        self, *, guild_id: int, control_channel_id: int, action_id: str, detailed: str, status: str
    ) -> bool:
        """Say ``detailed`` when the audience is cleared for it, else ``status``; returns what the
        voice answered."""
        start = self.cleared(guild_id, control_channel_id) if detailed != status else None
        if start is None:
            return await self._voice.say(guild_id, status)
        name = f"action {action_id} result read to its audience #{next(self._ids)}"

        def now() -> Audience | None:
            return self._voice.audience(guild_id, control_channel_id)

        cause = audience_cause(
            name=name, start=start, now=now, trusted=self._trusted, bus=self._bus, guild_id=guild_id
        )
        self._pending[name] = (guild_id, status)
        while len(self._pending) > self._keep:
            self._pending.popitem(last=False)
        said = await self._voice.say(guild_id, detailed, cause=cause)
        if not said:
            self._pending.pop(name, None)
        return said

    def _on_dropped(self, event: SpeechDropped) -> None:
        pending = self._pending.pop(event.cause, None)
        if pending is None:
            return
        guild_id, status = pending
        self.downgraded += 1
        # The status line goes through the voice's own queue, behind whatever is said now.
        self._tasks.spawn(self._voice.say(guild_id, status), name=f"status line after {event.cause}")

    def close(self) -> None:
        """Stop following the bus (idempotent); a downgrade already queued is still said."""
        self._sub.close()
