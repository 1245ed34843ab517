"""The live engine's provider session: connect, start, route, and reconnect after a loss.

:class:`LiveSession` opens a socket, sends ``session.start`` with everything a live session can
ever be told up front (our system prompt, the voice, the heard-only history, Responses delegation
of the semantic tools: :func:`~openab_voice.engine.live.session.session_start`) and mutes the input:
nothing reaches the model but the turns our core accepted. It then routes the server's events:
speech (``session.output_audio.delta``, ``session.output_transcript.delta``) and delegations to the
engine (:class:`LiveRoute`), errors to the bus, the rest kept as advisory only. A fresh session
replaces a lost one (:class:`~openab_voice.engine.realtime.keeper.SessionKeeper`); a refused key or
an unknown model is not retried.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Protocol

from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.live.session import LiveSettings, session_start
from openab_voice.engine.realtime.keeper import SessionKeeper
from openab_voice.engine.response import ToolPath
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.providers.live import LiveConnector, LiveLink
from openab_voice.providers.live_openai import live_connection_error, live_error, start_session

if TYPE_CHECKING:
    from openai.types.live import ServerEvent

__all__ = ["SPEECH_EVENTS", "LiveRoute", "LiveSession"]

SPEECH_EVENTS = frozenset({"session.output_audio.delta", "session.output_transcript.delta"})
DELEGATION_EVENTS = frozenset({"session.delegation.created", "response.event"})
ADVISORY_KEPT = 64
_FATAL = (ErrorCode.REALTIME_AUTH_FAILED, ErrorCode.REALTIME_MODEL_UNKNOWN)


class LiveRoute(Protocol):
    """Where the session's speech and delegations go (the engine)."""

    def deliver(self, event: ServerEvent, *, error: bool = False) -> bool:
        """Take the event (an error only while an answer is in flight); False when nobody did."""
        ...


class LiveSession(SessionKeeper[LiveLink, "ServerEvent"]):
    """One conversation's live session, kept alive (see the module docstring).

    Args:
        binding: the conversation (its context seeds a fresh session; its inbox gets the reports).
        connector: opens live sockets.
        tools: the tool path (its semantic tools are the delegation's).
        settings: voice, delegation backend and reconnection bounds.
        route: the engine.
    """

    def __init__(
        self,
        *,
        binding: EngineBinding,
        connector: LiveConnector,
        tools: ToolPath,
        settings: LiveSettings,
        route: LiveRoute,
    ) -> None:
        super().__init__(
            binding=binding,
            engine="live",
            reconnect_initial_s=settings.reconnect_initial_s,
            reconnect_max_s=settings.reconnect_max_s,
        )
        self._connector = connector
        self._tools = tools
        self._settings = settings
        self._route = route
        self.advisory: collections.deque[str] = collections.deque(maxlen=ADVISORY_KEPT)
        """The server's other events (its own transcript of the input, usage ...), never acted on."""
        self.unsolicited = 0
        """Speech events that came while no answer of ours was in flight: never played."""

    @property
    def model(self) -> str:
        return self._connector.model

    def _lost(self, exc: BaseException) -> OpenabError:
        return live_connection_error(exc, model=self.model)

    async def _open(self) -> LiveLink:
        link = await self._connector.connect()
        try:
            messages = self._b.context.messages()
            instructions = messages[0].content if messages else self._b.settings.system_prompt
            config = session_start(
                model=self.model,
                instructions=instructions,
                history=messages[1:],
                specs=self._tools.specs(),
                settings=self._settings,
            )
            await start_session(link, config, model=self.model, clock=self._b.clock)  # type: ignore[arg-type]
            await link.send({"type": "session.input_audio.mute"})
        except BaseException as exc:
            await link.close()
            if isinstance(exc, Exception) and not isinstance(exc, OpenabError):
                raise self._lost(exc) from exc
            raise
        return link

    def _dispatch(self, event: ServerEvent) -> OpenabError | None:
        kind = event.type
        if kind == "error":
            mapped = live_error(getattr(event, "error"), model=self.model)  # noqa: B009 - unknown types
            if mapped.code in _FATAL:
                return mapped  # the session cannot be used: down, not retried
            if not self._route.deliver(event, error=True):
                self._publish(mapped, model=False)
            return None
        if kind == "session.closed":
            reason: Any = getattr(event, "reason", None)
            return self._lost(ConnectionError(f"the live session closed ({reason})"))
        if kind in SPEECH_EVENTS or kind in DELEGATION_EVENTS:
            if not self._route.deliver(event) and kind in SPEECH_EVENTS:
                self.unsolicited += 1
            return None
        self.advisory.append(kind)
        return None
