"""Name resolution that sends discord.py's default URLs to the emulator, and nothing else anywhere.

aiohttp connects to the ``host`` *and* ``port`` a resolver returns (``TCPConnector._convert_hosts_to_addr_infos``
builds the socket address from ``hinfo["port"]``), while TLS still verifies the original host name
(``server_hostname`` is the URL host). So ``https://discord.com/api/v10`` and ``wss://gateway.discord.gg/``
reach ``127.0.0.1:<emulator port>`` unmodified, and no process-global (``Route.BASE``,
``DiscordWebSocket.DEFAULT_GATEWAY``) needs patching. IP-literal hosts (the voice endpoint
``127.0.0.1:<port>``) never reach a resolver (``TCPConnector._resolve_host`` short-circuits them).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from aiohttp.abc import AbstractResolver, ResolveResult

from openab_voice.errors import UnknownHostError


class EmulatorResolver(AbstractResolver):
    """Resolve a fixed set of host names to loopback ports; refuse every other name.

    Args:
        routes: host name (lower case, no trailing dot) -> TCP port on 127.0.0.1.
    """

    def __init__(self, routes: Mapping[str, int]) -> None:
        self._routes = dict(routes)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.rstrip(".").lower()
        target = self._routes.get(name)
        if target is None:
            raise UnknownHostError(f"the Discord emulator does not serve host {host!r}", host=host)
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=target,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        """Nothing to release: no sockets or threads are held."""
