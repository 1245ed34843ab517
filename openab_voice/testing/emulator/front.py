"""The REST port in front of every guild of one bot: a request goes to the guild it names.

Guilds joined to one bot (``DiscordEmulator(joined=...)``) share its REST port. A request that
names a channel, a guild or an interaction token goes to the guild that holds it; one that names
none (the bot user, the gateway) to the guild whose port it reached, except a global command
overwrite (``PUT``), which every guild's registry takes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from aiohttp import web

from openab_voice.testing.emulator.interactions import InteractionRegistry
from openab_voice.testing.emulator.models import GuildState


class GuildFront:
    """One guild's REST routes behind the shared REST port.

    Args:
        state: the guild (its channels and id tell that a request names it).
        interactions: the guild's interactions (their tokens tell that a request names it).
        build_routes: the guild's own routes, built on first use.
        joined: the front of the guild whose bot this one joins.
    """

    def __init__(
        self,
        state: GuildState,
        interactions: InteractionRegistry,
        build_routes: Callable[[], list[web.RouteDef]],
        *,
        joined: GuildFront | None = None,
    ) -> None:
        self._state = state
        self._interactions = interactions
        self._build_routes = build_routes
        self._routes: list[web.RouteDef] | None = None
        self._joined = joined
        self._members: list[GuildFront] = [self]
        if joined is not None:
            joined._members.append(self)

    def own_routes(self) -> list[web.RouteDef]:
        """This guild's REST routes (built once)."""
        if self._routes is None:
            self._routes = self._build_routes()
        return self._routes

    def routes(self) -> list[web.RouteDef]:
        """The REST port's routes: each request goes to the guild it names (see the module)."""
        return [
            web.route(route.method, route.path, functools.partial(self._route, index))
            for index, route in enumerate(self.own_routes())
        ]

    async def _route(self, index: int, request: web.Request) -> web.StreamResponse:
        # Every guild's port is a front for them all (the first guild's is the one clients resolve).
        members = (self._joined or self)._members
        if len(members) > 1:
            target = next((member for member in members if member.names(request)), None)
            if target is None and request.method == "PUT":
                for member in members:
                    if member is not self:
                        await member.own_routes()[index].handler(request)
            elif target is not None:
                return await target.own_routes()[index].handler(request)
        return await self.own_routes()[index].handler(request)

    def names(self, request: web.Request) -> bool:
        """Whether ``request`` names this guild: one of its channels, its id or an interaction token."""
        info = request.match_info
        if info.get("channel", "").isdigit() and int(info["channel"]) in self._state.channel_ids():
            return True
        if info.get("guild", "").isdigit() and int(info["guild"]) == self._state.ids.guild_id:
            return True
        return "token" in info and self._interactions.by_token(info["token"]) is not None
