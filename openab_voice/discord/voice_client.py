"""A ``discord.VoiceClient`` that also receives, without forking discord.py.

Two documented extension points of discord.py 2.7 are used (see
``shared/notes/discord-voice-protocol.md`` §4):

* ``create_connection_state`` passes a websocket *hook*, awaited at the end of
  ``DiscordVoiceWebSocket.received_message`` for every JSON voice op (gateway.py, ``await
  self._hook(self, msg)``). Op 4 carries the transport key, op 5 maps an SSRC to a user, op 13
  says a user left, op 22 executes a DAVE transition (the privacy code changes).
* ``VoiceConnectionState.add_socket_listener`` registers a callback that discord.py's
  ``SocketReader`` thread calls with every UDP datagram; it goes straight to
  :meth:`VoiceReceiver.feed`, which only enqueues.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import discord
from discord.voice_state import VoiceConnectionState

from openab_voice.discord.receiver import VoiceReceiver

log = logging.getLogger(__name__)

OP_SESSION_DESCRIPTION = 4
OP_SPEAKING = 5
OP_CLIENTS_CONNECT = 11
OP_CLIENT_DISCONNECT = 13
OP_DAVE_EXECUTE_TRANSITION = 22
OP_DAVE_PREPARE_EPOCH = 24

VoiceOpListener = Callable[[int, dict[str, Any]], None]


class ReceivingVoiceClient(discord.VoiceClient):
    """discord.py's voice client plus a per-speaker receiver.

    Build it through :func:`receiving_voice_client` (``channel.connect(cls=...)`` calls ``cls(client,
    channel)``).
    """

    def __init__(
        self,
        client: discord.Client,
        channel: discord.abc.Connectable,
        *,
        receiver: VoiceReceiver,
        on_voice_op: VoiceOpListener | None = None,
    ) -> None:
        # Set before super().__init__, which calls create_connection_state().
        self.receiver = receiver
        self._on_voice_op = on_voice_op
        self._listening = False
        super().__init__(client, channel)

    def create_connection_state(self) -> VoiceConnectionState:
        return VoiceConnectionState(self, hook=self._voice_ws_hook)

    def current_dave_session(self) -> Any:
        """The live davey session, or None while DAVE is off (read per packet by the receiver)."""
        state = self._connection
        if state.dave_protocol_version == 0:
            return None
        return state.dave_session

    async def _voice_ws_hook(self, ws: Any, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        data = msg.get("d") or {}
        if not isinstance(op, int) or not isinstance(data, dict):
            return
        try:
            self._handle_op(op, data)
        except Exception:  # a malformed op must not kill discord.py's websocket loop
            log.exception("voice op %s could not be handled", op)

    def _handle_op(self, op: int, data: dict[str, Any]) -> None:
        if op == OP_SESSION_DESCRIPTION:
            self.receiver.set_transport(self.mode, bytes(self.secret_key))
            self.receiver.set_dave_source(self.current_dave_session)
            if not self._listening:
                self._connection.add_socket_listener(self.receiver.feed)
                self._listening = True
        elif op == OP_SPEAKING and "user_id" in data and "ssrc" in data:
            self.receiver.map_ssrc(int(data["ssrc"]), str(data["user_id"]))
        elif op == OP_CLIENT_DISCONNECT and "user_id" in data:
            self.receiver.remove_user(str(data["user_id"]))
        if self._on_voice_op is not None:
            self._on_voice_op(op, data)

    def stop_listening(self) -> None:
        """Unregister the UDP listener (idempotent)."""
        if self._listening:
            self._connection.remove_socket_listener(self.receiver.feed)
            self._listening = False

    def cleanup(self) -> None:
        self.stop_listening()
        super().cleanup()


def receiving_voice_client(
    receiver: VoiceReceiver, on_voice_op: VoiceOpListener | None = None
) -> Callable[[discord.Client, discord.abc.Connectable], ReceivingVoiceClient]:
    """A ``cls`` for ``VoiceChannel.connect`` that builds a :class:`ReceivingVoiceClient`."""

    def build(client: discord.Client, channel: discord.abc.Connectable) -> ReceivingVoiceClient:
        return ReceivingVoiceClient(client, channel, receiver=receiver, on_voice_op=on_voice_op)

    return build
