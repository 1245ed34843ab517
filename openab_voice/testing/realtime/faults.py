"""Planned faults of a loopback realtime server, for tests and benches.

A :class:`Faults` belongs to the server and is read by every session: handshakes refused with 401
(``reject_auth``), latency added before every server event (``event_latency_s``), the connection
dropped (TCP closed without a close frame, what a network failure looks like) instead of a given
server event, a response that ends ``failed`` with a given error, a connection closed after N
responses. What happens at once (drop now, send an ``error``, send ``rate_limits.updated``) is a
method of the session (:class:`~openab_voice.testing.realtime.session.LoopbackSession`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DropRule", "Faults", "ResponseFailure"]


@dataclass(slots=True, kw_only=True)
class DropRule:
    """Drop the connection instead of sending the ``nth`` server event of type ``before``.

    With ``after_audio_ms`` (for ``response.output_audio.delta``), only a delta that would take the
    response's audio past that position counts.
    """

    before: str
    nth: int = 1
    after_audio_ms: float | None = None
    seen: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFailure:
    """How a response fails: ``response.done`` with status ``failed`` and this error."""

    type: str = "server_error"
    code: str | None = "server_error"
    message: str = "The server had an error while processing your request."


@dataclass(slots=True, kw_only=True)
class Faults:
    """What the server will do wrong. Change it at any time; sessions read it as they go.

    Attributes:
        reject_auth: refuse every handshake with HTTP 401, whatever the key.
        event_latency_s: extra delay before each server event is sent.
        close_after_responses: after this many ``response.done`` on a connection, close it.
        close_code: how it closes: a close code (1000 normal, 1011 server error ...) or None to drop
            the TCP connection without a close frame (the client sees 1006).
    """

    reject_auth: bool = False
    event_latency_s: float = 0.0
    close_after_responses: int | None = None
    close_code: int | None = 1000
    drops: list[DropRule] = field(default_factory=list)
    failures: list[ResponseFailure] = field(default_factory=list)

    def drop_before(self, event_type: str, *, nth: int = 1, after_audio_ms: float | None = None) -> DropRule:
        """Plan a drop: the connection goes instead of the ``nth`` ``event_type`` server event."""
        rule = DropRule(before=event_type, nth=nth, after_audio_ms=after_audio_ms)
        self.drops.append(rule)
        return rule

    def fail_next_response(self, failure: ResponseFailure | None = None) -> None:
        """The next response (on any session) ends ``failed`` with ``failure`` instead of answering."""
        self.failures.append(failure or ResponseFailure())

    def take_failure(self) -> ResponseFailure | None:
        return self.failures.pop(0) if self.failures else None

    def should_drop(self, event_type: str, *, audio_ms_after: float) -> bool:
        """Whether sending this event must be replaced by a drop (consumes the matching rule)."""
        for rule in self.drops:
            if rule.before != event_type:
                continue
            if rule.after_audio_ms is not None and audio_ms_after <= rule.after_audio_ms:
                continue
            rule.seen += 1
            if rule.seen >= rule.nth:
                self.drops.remove(rule)
                return True
        return False
