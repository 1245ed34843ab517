"""Who sits in the voice channel, and how joins and leaves reach the bot.

A membership change is announced the way Discord does: a main-gateway VOICE_STATE_UPDATE, then on
the bot's voice websocket op 11 (join) or op 13 (leave) and, with DAVE on, the MLS commit that adds
or removes the user (op 27 + op 29, confirmed by the bot's op 23 and executed with op 22). With
``client_commits`` the bot's own op 28 commit of those proposals wins when it comes in time.

The bot's voice session id and token stay the same while it stays in the channel: a repeated op 4
for the channel it is in (discord.py sends one before resuming after 4015) is answered with the
same VOICE_STATE_UPDATE / VOICE_SERVER_UPDATE, so a RESUME with them is accepted. A voice server
move (:meth:`VoiceRoom.move_server`) sends a new token and another endpoint.
"""

from __future__ import annotations

import logging
import secrets

from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator import payloads
from openab_voice.testing.emulator.dave_peer import CommitTransition
from openab_voice.testing.emulator.gateway import INTENT_GUILD_VOICE_STATES, GatewayHub
from openab_voice.testing.emulator.models import GuildState
from openab_voice.testing.emulator.voice_connection import (
    OP_CLIENT_DISCONNECT,
    OP_CLIENTS_CONNECT,
    OP_MLS_PROPOSALS,
    VoiceConnection,
    VoiceCredentials,
)
from openab_voice.testing.emulator.voice_gateway import VoiceGateway
from openab_voice.testing.emulator.voice_udp import Address, VoiceUdpServer
from openab_voice.testing.emulator.waiting import HangGuard, wait_any
from openab_voice.testing.emulator.wire import UpdateVoiceStateData

log = logging.getLogger(__name__)


class VoiceRoom:
    """The voice channel's membership, for the bot and for fake speakers.

    Args:
        state: the guild.
        hub: the main gateway.
        voice: the voice gateway.
        udp: the voice UDP server.
        voice_port: the voice websocket's TLS port (the VOICE_SERVER_UPDATE endpoint).
        timeout: how long to wait for the bot during handshakes and DAVE transitions.
    """

    def __init__(
        self,
        state: GuildState,
        hub: GatewayHub,
        voice: VoiceGateway,
        udp: VoiceUdpServer,
        *,
        timeout: float = 10.0,
        client_commits: bool = False,
        commit_wait_s: float = 2.0,
    ) -> None:
        self._state = state
        self._hub = hub
        self._voice = voice
        self._udp = udp
        self._timeout = timeout
        self._client_commits = client_commits
        self._commit_wait_s = commit_wait_s
        self.voice_port = 0
        # Every voice TLS port this emulator serves; a server move advertises the next one.
        self.voice_ports: list[int] = []
        self.endpoint_port = 0
        self.client_commits_won = 0
        self.recorder_commits = 0

    # --- the bot --------------------------------------------------------------------------------

    async def on_bot_voice_state(self, data: UpdateVoiceStateData) -> None:
        """Gateway op 4 from the bot: join (or move into) the voice channel, or leave it."""
        state = self._state
        bot_id = state.ids.bot_user_id
        if data["guild_id"] != state.ids.guild_id:
            log.warning("op 4 for unknown guild %s ignored", data["guild_id"])
            return
        channel_id = data["channel_id"]
        if channel_id is None:
            bot = state.set_voice(bot_id, in_voice=False, session_id=state.user(bot_id).voice_session_id)
            self._voice.expect(None)
            # Always confirmed: discord.py waits for this event in VoiceConnectionState.disconnect().
            self._hub.dispatch(
                "VOICE_STATE_UPDATE", payloads.voice_state_payload(state, bot, channel_id=None)
            )
            state.set_voice(bot_id, in_voice=False, session_id=None)
            return
        if channel_id != state.ids.voice_channel_id:
            log.warning(
                "op 4 for channel %s ignored: the only voice channel is %s",
                channel_id,
                state.ids.voice_channel_id,
            )
            return
        expected = self._voice.expected
        if expected is not None and state.user(bot_id).in_voice:
            credentials = expected  # already in this channel: same session, same voice server
        else:
            credentials = VoiceCredentials(
                user_id=bot_id, session_id=secrets.token_hex(16), token=secrets.token_hex(16)
            )
            self.endpoint_port = self.voice_port
        bot = state.set_voice(bot_id, in_voice=True, session_id=credentials.session_id)
        self._voice.expect(credentials)
        self._hub.dispatch(
            "VOICE_STATE_UPDATE", payloads.voice_state_payload(state, bot, channel_id=channel_id)
        )
        self._dispatch_server_update(credentials.token)

    def _dispatch_server_update(self, token: str) -> None:
        self._hub.dispatch(
            "VOICE_SERVER_UPDATE",
            {
                "token": token,
                "guild_id": str(self._state.ids.guild_id),
                "endpoint": f"127.0.0.1:{self.endpoint_port or self.voice_port}",
            },
        )

    def move_server(self) -> int:
        """The call moves to another voice server: VOICE_SERVER_UPDATE with a new token and the
        other endpoint. The bot must identify there afresh (new SSRC, key and DAVE group).

        Returns:
            The new endpoint's port.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when the bot is not in voice.
        """
        expected = self._voice.expected
        if expected is None:
            raise EmulatorError("the bot is not in the voice channel", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        current = self.endpoint_port or self.voice_port
        others = [p for p in self.voice_ports if p != current] or [current]
        self.endpoint_port = others[0]
        moved = VoiceCredentials(
            user_id=expected.user_id, session_id=expected.session_id, token=secrets.token_hex(16)
        )
        self._voice.expect(moved)
        self._dispatch_server_update(moved.token)
        return self.endpoint_port

    # --- SpeakerHost ----------------------------------------------------------------------------

    def in_voice(self, user_id: int) -> bool:
        return self._state.user(user_id).in_voice

    def send_datagram(self, data: bytes, address: Address) -> None:
        self._udp.send(data, address)

    async def ready_connection(self) -> VoiceConnection:
        """The bot's voice connection once its handshake (DAVE welcome included) is done.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when the bot is not (or no longer) in voice;
                ``EMULATOR_TIMEOUT`` when the handshake does not finish.
        """
        conn = self._voice.active
        if conn is None:
            raise EmulatorError(
                "the bot is not in the voice channel (await wait_voice_ready() first)",
                code=ErrorCode.EMULATOR_NOT_CONNECTED,
            )
        async with HangGuard(self._timeout, "the bot's voice handshake did not finish"):
            await wait_any(conn.ready, conn.closed)
        if not conn.media_ready:
            raise EmulatorError("the bot left the voice channel", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        return conn

    async def connection_for(self, user_id: int) -> VoiceConnection:
        if not self.in_voice(user_id):
            raise EmulatorError(
                f"user {user_id} is not in the voice channel", code=ErrorCode.EMULATOR_NOT_IN_VOICE
            )
        conn = await self.ready_connection()
        if conn.dave is not None:
            async with HangGuard(self._timeout, f"user {user_id} never joined the DAVE group"):
                await wait_any(conn.member_event(user_id), conn.closed)
            async with HangGuard(self._timeout, "the bot never caught up with the DAVE group"):
                await wait_any(conn.dave_synced, conn.closed)
        if not conn.media_ready:
            raise EmulatorError("the bot left the voice channel", code=ErrorCode.EMULATOR_NOT_CONNECTED)
        return conn

    async def join_voice(self, user_id: int) -> None:
        if self.mark_joined(user_id):
            await self.announce_join(user_id)

    def mark_joined(self, user_id: int) -> bool:
        """Put the user in the channel and tell the gateway; False when already there."""
        state = self._state
        if state.user(user_id).in_voice:
            return False
        user = state.set_voice(user_id, in_voice=True, session_id=secrets.token_hex(16))
        self._hub.dispatch(
            "VOICE_STATE_UPDATE",
            payloads.voice_state_payload(state, user, channel_id=state.ids.voice_channel_id),
            intent=INTENT_GUILD_VOICE_STATES,
        )
        return True

    async def announce_join(self, user_id: int) -> None:
        """Tell the bot's voice session about a user who joined (op 11, and the DAVE Add)."""
        conn = self._voice.active
        if conn is None or not conn.media_ready:
            return  # the bot will learn about this user when it connects
        await conn.send_json(OP_CLIENTS_CONNECT, {"user_ids": [str(user_id)]})
        if conn.dave is None:
            conn.member_event(user_id).set()
            return
        # The bot must be in the group before it can follow a commit (a stray op 27 would make
        # davey raise inside discord.py's websocket reader).
        async with HangGuard(self._timeout, "the bot's voice handshake did not finish"):
            await wait_any(conn.ready, conn.closed)
        if conn.closed.is_set():
            return
        if conn.dave.is_member(user_id):
            conn.member_event(user_id).set()
            return
        if self._client_commits:
            transition = await self._client_commit(conn, add=user_id)
        else:
            transition = conn.dave.add_member(user_id)
        async with HangGuard(self._timeout, f"the bot did not follow the DAVE add of {user_id}"):
            await conn.follow_commit(transition)
        conn.member_event(user_id).set()

    async def _client_commit(
        self, conn: VoiceConnection, *, add: int | None = None, remove: int | None = None
    ) -> CommitTransition:
        """Send the proposals first; the bot's commit wins if it arrives in time, else the
        recorder's. Either way the bot then gets op 29 with the winning commit."""
        assert conn.dave is not None
        proposal = conn.dave.propose(add=add, remove=remove)
        waiter = conn.expect_commit()
        await conn.send_binary(OP_MLS_PROPOSALS, proposal.op27)
        try:
            async with HangGuard(self._commit_wait_s, "no commit from the bot"):
                payload = await waiter
        except EmulatorError:
            self.recorder_commits += 1
            return conn.dave.commit_by_recorder()
        self.client_commits_won += 1
        return conn.dave.commit_by_bot(payload)

    async def leave_voice(self, user_id: int, *, mls_remove: bool) -> None:
        state = self._state
        user = state.user(user_id)
        if not user.in_voice:
            return
        self._hub.dispatch(
            "VOICE_STATE_UPDATE",
            payloads.voice_state_payload(state, user, channel_id=None),
            intent=INTENT_GUILD_VOICE_STATES,
        )
        state.set_voice(user_id, in_voice=False, session_id=None)
        conn = self._voice.active
        if conn is None or not conn.media_ready:
            return
        conn.forget_member(user_id)
        await conn.send_json(OP_CLIENT_DISCONNECT, {"user_id": str(user_id)})
        if conn.dave is not None and mls_remove and conn.ready.is_set():
            if self._client_commits and conn.dave.is_member(user_id):
                transition: CommitTransition | None = await self._client_commit(conn, remove=user_id)
            else:
                transition = conn.dave.remove_member(user_id)
            if transition is not None:
                async with HangGuard(self._timeout, f"the bot did not follow the DAVE removal of {user_id}"):
                    await conn.follow_commit(transition)
