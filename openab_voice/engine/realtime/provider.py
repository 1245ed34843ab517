"""The realtime engine's provider session: connect, greet, seed, read, and reconnect after a loss.

:class:`ProviderSession` keeps one provider session alive for a conversation. It opens a session,
waits for ``session.created`` (a server that refuses the model says so in an ``error`` before it
closes), sends ``session.update`` (turn detection off, the semantic tools) and seeds our heard-only
history as items: a fresh session knows nothing, and the old one is never resumed. It then routes
the server's events: a response's events to the engine's active response (:class:`ResponseRoute`),
errors between responses to the bus, the provider's own speech events kept as advisory only.

Losing it, reconnecting and reporting are :class:`~openab_voice.engine.realtime.keeper.SessionKeeper`'s.
A refused key or an unknown model is not retried: :attr:`failure` says why, and the engine stays down.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Protocol, cast

from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.realtime.keeper import LinkPhase, SessionKeeper
from openab_voice.engine.realtime.response import REALTIME_TOOLS
from openab_voice.engine.realtime.session import RealtimeSettings, response_id_of, session_config
from openab_voice.engine.response import ToolPath
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.providers.realtime import RealtimeConnector, RealtimeLink
from openab_voice.providers.realtime_openai import connection_error, greeted, server_error

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra: its models are only read here
    from openai.types.realtime import RealtimeErrorEvent, RealtimeServerEvent

__all__ = ["LinkPhase", "ProviderSession", "ResponseRoute"]


class ResponseRoute(Protocol):
    """Where a response's events go (the engine's active response)."""

    def deliver(self, event: RealtimeServerEvent, *, error: bool = False) -> bool:
        """Take the event (an error only while a response is in flight); False when nobody did."""
        ...


# A session lives as long as the call: what it keeps per event or per response must be bounded.
ADVISORY_KEPT = 64
# Cancelled or settled responses whose late events are dropped. Only the last few can still stream
# (a response is cancelled and settled within a turn); an id evicted after this many newer ones is
# long finished.
STALE_KEPT = 256


class RecentIds:
    """A set of the ``limit`` most recently added ids (the oldest is forgotten first)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._ids: collections.OrderedDict[str, None] = collections.OrderedDict()

    def add(self, item: str) -> None:
        self._ids[item] = None
        self._ids.move_to_end(item)
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)

    def update(self, items: list[str]) -> None:
        for item in items:
            self.add(item)

    def clear(self) -> None:
        self._ids.clear()

    def __contains__(self, item: object) -> bool:
        return item in self._ids

    def __len__(self) -> int:
        return len(self._ids)


class ProviderSession(SessionKeeper[RealtimeLink, "RealtimeServerEvent"]):
    """One conversation's provider session, kept alive (see the module docstring).

    Args:
        binding: the conversation (its context seeds a fresh session; its inbox gets the reports).
        connector: opens provider sessions.
        tools: the tool path (only the semantic tools are declared to the provider).
        settings: the voice and the reconnection bounds.
        route: the engine, for its active response's events.
    """

    def __init__(
        self,
        *,
        binding: EngineBinding,
        connector: RealtimeConnector,
        tools: ToolPath,
        settings: RealtimeSettings,
        route: ResponseRoute,
    ) -> None:
        super().__init__(
            binding=binding,
            engine="realtime",
            reconnect_initial_s=settings.reconnect_initial_s,
            reconnect_max_s=settings.reconnect_max_s,
        )
        self._connector = connector
        self._tools = tools
        self._settings = settings
        self._route = route
        self.advisory: collections.deque[str] = collections.deque(maxlen=ADVISORY_KEPT)
        """The provider's latest speech events, kept for inspection; never acted on."""
        self._stale = RecentIds(STALE_KEPT)  # provider response ids whose events are dropped
        self._orphans = 0  # responses cancelled before their response.created arrived

    @property
    def model(self) -> str:
        return self._connector.model

    def _lost(self, exc: BaseException) -> OpenabError:
        return connection_error(exc, model=self.model)

    def _fresh(self) -> None:
        self._stale.clear()  # a fresh session: no response of the old one can arrive here
        self._orphans = 0

    def forget(self, response_ids: list[str], *, created: bool) -> None:
        """Drop every later event of these provider responses (cancelled or settled); ``created``
        False: the one being cancelled has not announced its id yet (its ``response.created`` is next)."""
        self._stale.update(response_ids)
        if not created:
            self._orphans += 1

    async def _open(self) -> RealtimeLink:
        """A fresh provider session, greeted and seeded (closed again when that fails).

        Raises:
            OpenabError: why there is none (anything unexpected counts as a lost connection).
        """
        try:
            link = await self._connector.connect()
        except OpenabError:
            raise
        except Exception as exc:
            raise connection_error(exc, model=self.model) from exc
        try:
            await greeted(link, model=self.model)
            await self._seed(link)
        except BaseException as exc:
            await link.close()
            if isinstance(exc, Exception) and not isinstance(exc, OpenabError):
                raise connection_error(exc, model=self.model) from exc
            raise
        return link

    async def _seed(self, link: RealtimeLink) -> None:
        """``session.update``, then our heard-only history as items."""
        tools = [
            {"type": "function", "name": s.name, "description": s.description, "parameters": s.parameters}
            for s in self._tools.specs()
            if s.name in REALTIME_TOOLS
        ]
        messages = self._b.context.messages()
        instructions = messages[0].content if messages else self._b.settings.system_prompt
        config = session_config(instructions=instructions, voice=self._settings.voice, tools=tools)
        await link.send({"type": "session.update", "session": config})  # type: ignore[typeddict-item]
        for message in messages[1:]:
            kind = "output_text" if message.role == "assistant" else "input_text"
            role = message.role if message.role in ("user", "assistant", "system") else "system"
            item: Any = {
                "type": "message",
                "role": role,
                "content": [{"type": kind, "text": message.content}],
            }
            await link.send({"type": "conversation.item.create", "item": item})

    def _dispatch(self, event: RealtimeServerEvent) -> OpenabError | None:
        """Hand a response's events to it; handle the session's own. An error that ends the session."""
        kind = event.type
        if kind == "error":
            err = cast("RealtimeErrorEvent", event).error
            mapped = server_error(kind=err.type, code=err.code, message=err.message, model=self.model)
            if mapped.code in (ErrorCode.REALTIME_AUTH_FAILED, ErrorCode.REALTIME_MODEL_UNKNOWN):
                return mapped  # the session cannot be used: down, not retried
            if not self._route.deliver(event, error=True):
                self._publish(mapped, model=False)
            return None
        if kind in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped"):
            self.advisory.append(kind)  # turn detection is ours: advisory only
            return None
        rid = response_id_of(event)
        if rid is None:
            return None  # session, conversation and rate-limit events: nothing to do
        if kind == "response.created" and self._orphans:
            self._orphans -= 1
            self._stale.add(rid)
        if rid not in self._stale:
            self._route.deliver(event)
        return None
