"""The ACP handshake before the prompt: ``initialize``, ``authenticate`` (when configured), ``session/new``.

A failure here means nothing was asked of the agent; :mod:`openab_voice.acp.verdicts` turns it into
a ``failed`` verdict. The agent's offered authentication methods are kept even when a later step
fails, so that an ``Authentication required`` refusal can say which method to configure.
"""

from __future__ import annotations

from acp import PROTOCOL_VERSION, RequestError
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from openab_voice import __version__
from openab_voice.acp.cancellation import Emit
from openab_voice.acp.client import ActionClient
from openab_voice.acp.types import TurnRequest
from openab_voice.acp.verdicts import rpc
from openab_voice.errors import AcpError, ErrorCode


class Handshake:
    """Opens the one session of an agent run. Single use.

    Args:
        request: The run's request (workspace, auth method).
        emit: The run's event hook (``initialized``, ``authenticated``, ``session_created``).
    """

    def __init__(self, request: TurnRequest, emit: Emit) -> None:
        self._request = request
        self._emit = emit
        self.auth_methods: tuple[str, ...] = ()  # what the agent offered in ``initialize``

    async def open_session(self, conn: ClientSideConnection, client: ActionClient) -> str:
        """Initialize, authenticate and create the session; returns its id.

        Raises:
            AcpError: a version we do not speak, or an authentication that failed.
            RequestError: the agent refused a step.
        """
        # No fs / terminal capability: the agent gets nothing from us but permission answers.
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
        )
        init = await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=capabilities,
            client_info=Implementation(name="openab-voice", version=__version__),
        )
        if init.protocol_version != PROTOCOL_VERSION:
            # ACP initialization: the client should disconnect from a version it does not support.
            raise AcpError(
                f"agent speaks ACP version {init.protocol_version}, we speak {PROTOCOL_VERSION}",
                code=ErrorCode.ACP_PROTOCOL_VERSION,
            )
        agent = init.agent_info.name if init.agent_info is not None else None
        self._emit("initialized", protocol_version=init.protocol_version, agent=agent)
        self.auth_methods = tuple(method.id for method in init.auth_methods or ())
        await self._authenticate(conn)
        session = await conn.new_session(cwd=str(self._request.workspace.path), mcp_servers=[])
        client.session_id = session.session_id
        self._emit("session_created", session_id=session.session_id)
        return session.session_id

    async def _authenticate(self, conn: ClientSideConnection) -> None:
        """ACP ``authenticate`` with the configured method (codex-acp refuses ``session/new`` without it).

        Raises:
            AcpError: ``ACP_AUTH_METHOD_UNAVAILABLE`` when the agent does not offer the configured method,
                ``ACP_AUTH_FAILED`` when it refuses it.
        """
        method = self._request.auth_method
        if method is None:
            return
        if method not in self.auth_methods:
            offered = ", ".join(self.auth_methods) or "none"
            raise AcpError(
                f"the agent does not offer authentication method {method!r} (it offers: {offered})",
                code=ErrorCode.ACP_AUTH_METHOD_UNAVAILABLE,
            )
        try:
            await conn.authenticate(method_id=method)
        except RequestError as exc:
            raise AcpError(
                f"authentication {method!r} refused: {rpc(exc)}", code=ErrorCode.ACP_AUTH_FAILED
            ) from None
        self._emit("authenticated", method=method)
