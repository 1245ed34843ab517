"""REST routes for the bot's identity, its application and its commands, plus gateway discovery.

Bot routes need ``Authorization: Bot <token>`` (a wrong one is 401, which discord.py's
``static_login`` turns into ``LoginFailure``).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from openab_voice.errors import RestError
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.commands import CommandRegistry
from openab_voice.testing.emulator.gateway import GATEWAY_URL
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.responses import (
    CODE_GENERAL,
    CODE_UNKNOWN_APPLICATION,
    json_response,
    read_json,
    snowflake,
)
from openab_voice.testing.emulator.wire import CommandBody, parse_list

API = "/api/v10"


def require_bot(request: web.Request, token: str) -> None:
    """Raises: RestError 401 unless the request carries the bot token."""
    if request.headers.get("Authorization") != f"Bot {token}":
        raise RestError(401, CODE_GENERAL, "401: Unauthorized")


class IdentityApi:
    """``/users/@me``, ``/oauth2/applications/@me``, ``/gateway``, ``/gateway/bot``, commands."""

    def __init__(
        self,
        state: GuildState,
        commands: CommandRegistry,
        *,
        token: str,
        gateway_url: Callable[[], str] = lambda: GATEWAY_URL,
    ) -> None:
        self._state = state
        self._commands = commands
        self._token = token
        self._gateway_url = gateway_url

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(f"{API}/users/@me", self.me),
            web.get(f"{API}/oauth2/applications/@me", self.application),
            web.get(f"{API}/applications/@me", self.application),
            web.get(f"{API}/gateway", self.gateway),
            web.get(f"{API}/gateway/bot", self.gateway_bot),
            web.get(f"{API}/applications/{{app}}/commands", self.list_global),
            web.put(f"{API}/applications/{{app}}/commands", self.put_global),
            web.get(f"{API}/applications/{{app}}/guilds/{{guild}}/commands", self.list_guild),
            web.put(f"{API}/applications/{{app}}/guilds/{{guild}}/commands", self.put_guild),
        ]

    async def me(self, request: web.Request) -> web.Response:
        require_bot(request, self._token)
        return json_response(payloads.bot_user_payload(self._state.user(self._state.ids.bot_user_id)))

    async def application(self, request: web.Request) -> web.Response:
        require_bot(request, self._token)
        bot = self._state.user(self._state.ids.bot_user_id)
        # AppInfo indexes id, name, description, icon, bot_public, bot_require_code_grant, owner and
        # verify_key directly; a non-null interactions_endpoint_url makes discord.py warn that
        # interactions will not arrive over the gateway.
        return json_response(
            {
                "id": str(self._state.ids.application_id),
                "name": bot.name,
                "description": "",
                "icon": None,
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": payloads.user_payload(bot),
                "verify_key": "00" * 32,
                "flags": 0,
                "team": None,
                "summary": "",
                "rpc_origins": [],
                "tags": [],
                "interactions_endpoint_url": None,
                "redirect_uris": [],
                "integration_types_config": {},
                "bot": payloads.user_payload(bot),
            }
        )

    async def gateway(self, request: web.Request) -> web.Response:
        return json_response({"url": self._gateway_url()})

    async def gateway_bot(self, request: web.Request) -> web.Response:
        require_bot(request, self._token)
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return json_response({"url": self._gateway_url(), "shards": 1, "session_start_limit": limit})

    def _check_app(self, request: web.Request) -> None:
        require_bot(request, self._token)
        if snowflake(request, "app") != self._state.ids.application_id:
            raise RestError(404, CODE_UNKNOWN_APPLICATION, "Unknown Application")

    def _guild(self, request: web.Request) -> int:
        guild_id = snowflake(request, "guild")
        if guild_id != self._state.ids.guild_id:
            raise RestError(403, 50001, "Missing Access")
        return guild_id

    async def list_global(self, request: web.Request) -> web.Response:
        self._check_app(request)
        return json_response(self._commands.in_scope(guild_id=None))

    async def put_global(self, request: web.Request) -> web.Response:
        self._check_app(request)
        bodies = parse_list(CommandBody, await read_json(request), what="application commands")
        return json_response(self._commands.replace(bodies, guild_id=None))

    async def list_guild(self, request: web.Request) -> web.Response:
        self._check_app(request)
        return json_response(self._commands.in_scope(guild_id=self._guild(request)))

    async def put_guild(self, request: web.Request) -> web.Response:
        self._check_app(request)
        guild_id = self._guild(request)
        bodies = parse_list(CommandBody, await read_json(request), what="application commands")
        return json_response(self._commands.replace(bodies, guild_id=guild_id))
