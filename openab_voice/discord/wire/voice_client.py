"""A ``discord.VoiceClient`` that also receives, without forking discord.py.

Two documented extension points of discord.py 2.7 (``shared/notes/discord-voice-protocol.md`` §4):
``create_connection_state`` passes a websocket *hook* that sees every JSON voice op (4: transport key,
5: SSRC → user, 13: a user left, 22: DAVE transition), and ``VoiceConnectionState.add_socket_listener``
hands every UDP datagram from discord.py's reader thread to :meth:`VoiceReceiver.feed`, which only
enqueues. From the first op 4 a :class:`~openab_voice.discord.wire.keepalive.UdpKeepAlive` keeps the
UDP path open (``receiver.settings.udp_keepalive_s``; at once after op 4 and op 9). The connection
state is :class:`~openab_voice.discord.wire.reconnect.SupervisedConnectionState`.
In detail: docs/adr/0001-own-voice-receiver.md.
"""

from __future__ import annotations

import logging
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

import davey
import discord
from discord.voice_state import VoiceConnectionState

from openab_voice.clock import Clock, SystemClock
from openab_voice.discord.wire.keepalive import UdpKeepAlive
from openab_voice.discord.wire.pipeline import DaveDecryptor
from openab_voice.discord.wire.receiver import VoiceReceiver
from openab_voice.discord.wire.reconnect import SupervisedConnectionState, VoiceLife

log = logging.getLogger(__name__)

OP_SESSION_DESCRIPTION = 4
OP_SPEAKING = 5
OP_CLIENTS_CONNECT = 11
OP_RESUMED = 9
OP_CLIENT_DISCONNECT = 13
OP_DAVE_PREPARE_TRANSITION = 21
OP_DAVE_EXECUTE_TRANSITION = 22
OP_DAVE_PREPARE_EPOCH = 24
# The last two bytes of every DAVE-encrypted frame (the protocol's magic marker).
DAVE_MAGIC = b"\xfa\xfa"

# What the hook did with a voice op message: the keys of ``ReceivingVoiceClient.op_outcomes``.
OP_HANDLED = "handled"
OP_NOT_AN_OP = "ignored:not an op object"
OP_REJECTED = "rejected:"  # a prefix: the reason follows, e.g. "rejected:op 5 ssrc"
# A well-formed op whose handling raised: a bug of ours, logged, never a way to reject input.
OP_FAILED = "failed"
_MAX_SSRC = 0xFFFF_FFFF
_MAX_SNOWFLAKE = 2**64 - 1

VoiceOpListener = Callable[["ReceivingVoiceClient", int, dict[str, Any]], None]


def _is_ssrc(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SSRC


def _is_snowflake(value: object) -> bool:
    """Discord sends user ids as decimal strings; an int is accepted too (bool is not)."""
    if type(value) is str:
        return 0 < len(value) <= 20 and value.isascii() and value.isdecimal() and int(value) <= _MAX_SNOWFLAKE
    return type(value) is int and 0 <= value <= _MAX_SNOWFLAKE


def malformed_op(op: int, data: dict[str, Any]) -> str | None:
    """Why the fields of a speaking (5) or client-disconnect (13) payload cannot be used, or None.

    Only the fields the hook reads are checked; a payload without them is passed on as it is.
    """
    if op == OP_SPEAKING and "user_id" in data and "ssrc" in data:
        if not _is_ssrc(data["ssrc"]):
            return "op 5 ssrc"
        if not _is_snowflake(data["user_id"]):
            return "op 5 user_id"
    elif op == OP_CLIENT_DISCONNECT and "user_id" in data and not _is_snowflake(data["user_id"]):
        return "op 13 user_id"
    return None


class _TransportOnly:
    """The DAVE session while transport-only media is in force: after a downgrade executed
    (protocol version 0), and during an upgrade until its transition executes. discord.py already
    sets the version to 1 on op 24, though senders keep sending plain Opus until op 22, and frames
    encrypted before a downgrade are still in flight after it. So a frame without the DAVE marker is
    plain Opus, and one with it is decrypted by the session (an error while it has no keys)."""

    def __init__(self, session: DaveDecryptor) -> None:
        self._session = session

    @property
    def ready(self) -> bool:
        return True

    def decrypt(self, user_id: int, media_type: davey.MediaType, packet: bytes) -> bytes:
        if packet[-2:] != DAVE_MAGIC:
            return packet
        if not self._session.ready:
            raise ValueError("a DAVE frame before the session has keys")
        return self._session.decrypt(user_id, media_type, packet)


class ReceivingVoiceClient(discord.VoiceClient):
    """discord.py's voice client plus a per-speaker receiver.

    Build it through :func:`receiving_voice_client` (``channel.connect(cls=...)`` calls ``cls(client,
    channel)``).
    """

    keepalive: UdpKeepAlive | None = None
    """The UDP keep-alive (None: the receiver's ``udp_keepalive_s`` is 0)."""

    def __init__(
        self,
        client: discord.Client,
        channel: discord.abc.Connectable,
        *,
        receiver: VoiceReceiver,
        on_voice_op: VoiceOpListener | None = None,
        life: VoiceLife | None = None,
        clock: Clock | None = None,
    ) -> None:
        # Set before super().__init__, which calls create_connection_state().
        self.receiver = receiver
        self._on_voice_op = on_voice_op
        self._life = life
        self._clock = clock or SystemClock()
        self._listening = False
        interval = receiver.settings.udp_keepalive_s
        if interval > 0:
            self.keepalive = UdpKeepAlive(
                socket_source=self._voice_socket,
                clock=self._clock,
                count=receiver.count_sent,
                interval_s=interval,
            )
        self.op_outcomes: Counter[str] = Counter()
        """How many voice op messages the hook handled, ignored, rejected (by reason) or failed on."""
        super().__init__(client, channel)

    def _voice_socket(self) -> socket.socket | None:
        return self._connection.socket or None  # MISSING is falsy

    def create_connection_state(self) -> VoiceConnectionState:
        return SupervisedConnectionState(self, hook=self._voice_ws_hook, life=self._life, clock=self._clock)

    def current_dave_session(self) -> DaveDecryptor | None:
        """What decrypts DAVE now (read per packet by the receiver): None on a call without DAVE,
        the davey session while end-to-end encryption is in force, a transport-only view of it
        around a downgrade or upgrade (:class:`_TransportOnly`)."""
        state = self._connection
        session: DaveDecryptor | None = state.dave_session
        if session is None:
            return None
        if state.dave_protocol_version == 0 or state.dave_downgraded:
            return _TransportOnly(session)
        return session

    @property
    def dave_ready(self) -> bool:
        """Media is decryptable: DAVE off, or its session holds the group's keys."""
        state = self._connection
        if state.dave_protocol_version == 0:
            return True
        session = state.dave_session
        return session is not None and bool(session.ready)

    async def _voice_ws_hook(self, ws: Any, msg: dict[str, Any]) -> None:
        self.op_outcomes[self._receive_op(msg)] += 1

    def _receive_op(self, msg: dict[str, Any]) -> str:
        """Handle one voice op message; returns its outcome. Never raises: discord.py awaits the
        hook in its websocket loop, which an exception would end."""
        op = msg.get("op")
        data = msg.get("d") or {}
        if not isinstance(op, int) or not isinstance(data, dict):
            return OP_NOT_AN_OP
        reason = malformed_op(op, data)
        if reason is not None:
            log.warning("voice op dropped: malformed %s", reason)
            return OP_REJECTED + reason
        try:
            self._handle_op(op, data)
        except Exception:
            log.exception("voice op %s could not be handled", op)
            return OP_FAILED
        return OP_HANDLED

    def _handle_op(self, op: int, data: dict[str, Any]) -> None:
        if op == OP_SESSION_DESCRIPTION:
            self.receiver.set_transport(self.mode, bytes(self.secret_key))
            self.receiver.set_dave_source(self.current_dave_session)
            if not self._listening:
                connection = self._connection
                self.receiver.set_socket_source(lambda: connection.socket or None)  # MISSING is falsy
                connection.add_socket_listener(self.receiver.feed)
                self._listening = True
            if self.keepalive is not None:
                self.keepalive.start()  # running already (a move, a re-identify): one now
        elif op == OP_RESUMED:
            if self.keepalive is not None and self.keepalive.running:
                self.keepalive.send_now()
        elif op == OP_SPEAKING and "user_id" in data and "ssrc" in data:
            self.receiver.map_ssrc(data["ssrc"], str(data["user_id"]))
        elif op == OP_CLIENT_DISCONNECT and "user_id" in data:
            self.receiver.remove_user(str(data["user_id"]))
        if self._on_voice_op is not None:
            self._on_voice_op(self, op, data)

    def stop_listening(self) -> None:
        """Unregister the UDP listener and stop the keep-alive (idempotent)."""
        if self.keepalive is not None:
            self.keepalive.stop()
        if self._listening:
            self._connection.remove_socket_listener(self.receiver.feed)
            self._listening = False

    def cleanup(self) -> None:
        self.stop_listening()
        super().cleanup()


def receiving_voice_client(
    receiver: VoiceReceiver,
    on_voice_op: VoiceOpListener | None = None,
    *,
    life: VoiceLife | None = None,
    clock: Clock | None = None,
) -> Callable[[discord.Client, discord.abc.Connectable], ReceivingVoiceClient]:
    """A ``cls`` for ``VoiceChannel.connect`` that builds a :class:`ReceivingVoiceClient`."""

    def build(client: discord.Client, channel: discord.abc.Connectable) -> ReceivingVoiceClient:
        return ReceivingVoiceClient(
            client, channel, receiver=receiver, on_voice_op=on_voice_op, life=life, clock=clock
        )

    return build
