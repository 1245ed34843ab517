"""The loopback realtime server's sessions over an in-memory pipe instead of a websocket.

:class:`PipeConnector` is a :class:`~openab_voice.providers.realtime.RealtimeConnector`: each
``connect()`` opens a :class:`~openab_voice.testing.realtime.session.LoopbackSession` (the loopback
server's own session logic: items, responses, pacing, faults) whose "socket" is a pair of queues.
Client events go as the JSON the SDK would send, server events come back parsed into the SDK's
``RealtimeServerEvent`` models as the SDK parses them. Nothing touches the network, so with the
server paced on the rig's :class:`~openab_voice.clock.FakeClock` a run is deterministic: the
interleaving of provider events and conversation inputs depends on virtual time only (what a
property-based test needs to replay a failing example).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from openai._models import construct_type_unchecked
from openai.types.realtime import RealtimeServerEvent
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK

from openab_voice.providers.realtime import RealtimeLink
from openab_voice.providers.realtime_openai import connection_error
from openab_voice.tasks import TaskOwner
from openab_voice.testing.realtime.session import LoopbackSession, SessionServices

if TYPE_CHECKING:
    from openai.types.realtime import RealtimeClientEventParam

__all__ = ["PipeConnector"]


class _Transport:
    def __init__(self, pipe: _Pipe) -> None:
        self._pipe = pipe

    def abort(self) -> None:
        self._pipe.end(clean=False)


class _Pipe:
    """Both ends of one connection: ``None`` in a queue is its end."""

    def __init__(self) -> None:
        self.to_server: asyncio.Queue[str | None] = asyncio.Queue()
        self.to_client: asyncio.Queue[str | None] = asyncio.Queue()
        self.ended = False
        self.clean = True
        self.transport = _Transport(self)

    def end(self, *, clean: bool) -> None:
        if self.ended:
            return
        self.ended = True
        self.clean = clean
        self.to_server.put_nowait(None)
        self.to_client.put_nowait(None)

    # --- the server's side: what LoopbackSession uses of a websockets ServerConnection ----------

    def __aiter__(self) -> AsyncIterator[str]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[str]:
        while (message := await self.to_server.get()) is not None:
            yield message

    async def send(self, message: str) -> None:
        if self.ended:
            raise ConnectionClosedOK(None, None) if self.clean else ConnectionClosedError(None, None)
        self.to_client.put_nowait(message)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.end(clean=code == 1000)


class _PipeLink:
    """The client's side, behind :class:`RealtimeLink`."""

    def __init__(self, pipe: _Pipe, *, model: str) -> None:
        self._pipe = pipe
        self._model = model

    async def send(self, event: RealtimeClientEventParam) -> None:
        if self._pipe.ended:
            raise connection_error(ConnectionError("the session was closed"), model=self._model)
        self._pipe.to_server.put_nowait(json.dumps(event))

    async def events(self) -> AsyncIterator[RealtimeServerEvent]:
        while (data := await self._pipe.to_client.get()) is not None:
            yield cast(
                RealtimeServerEvent,
                construct_type_unchecked(value=json.loads(data), type_=cast(Any, RealtimeServerEvent)),
            )
        self._pipe.to_client.put_nowait(None)  # a second reader sees the end too
        raise connection_error(ConnectionError("connection closed"), model=self._model)

    async def close(self) -> None:
        self._pipe.end(clean=True)


class PipeConnector:
    """Opens loopback sessions over in-memory pipes; :attr:`sessions` in the order opened.

    Args:
        services: what every session shares (responder, voice, clock, pacing, faults).
        model: the model name sessions report.
    """

    def __init__(self, services: SessionServices, *, model: str = "gpt-realtime") -> None:
        self._services = services
        self._model = model
        self.sessions: list[LoopbackSession] = []
        self._tasks = TaskOwner("realtime pipe sessions")

    @property
    def model(self) -> str:
        return self._model

    @property
    def current(self) -> LoopbackSession | None:
        """The newest session still open."""
        session = self.sessions[-1] if self.sessions else None
        return None if session is None or session.closed.is_set() else session

    async def connect(self) -> RealtimeLink:
        pipe = _Pipe()
        session = LoopbackSession(cast(ServerConnection, pipe), model=self._model, services=self._services)
        self.sessions.append(session)
        self._tasks.spawn(session.serve(), name=f"pipe-session-{len(self.sessions)}")
        return _PipeLink(pipe, model=self._model)

    async def aclose(self) -> None:
        await self._tasks.aclose()
