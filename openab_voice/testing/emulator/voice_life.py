"""The voice session's life, as :class:`~openab_voice.testing.emulator.DiscordEmulator` methods:
forced closes and RESUME, voice server moves, UDP outages, DAVE faults and transitions, and the
counters that show what happened (``docs/discord-voice-protocol.md``)."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any, assert_never

from openab_voice.clock import Clock
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.gateway import GatewayHub
from openab_voice.testing.emulator.voice_connection import OP_MLS_ANNOUNCE_COMMIT, VoiceSessionInfo
from openab_voice.testing.emulator.voice_events import VoiceEvent
from openab_voice.testing.emulator.voice_gateway import VoiceGateway
from openab_voice.testing.emulator.voice_room import VoiceRoom
from openab_voice.testing.emulator.voice_udp import VoiceUdpServer
from openab_voice.testing.emulator.waiting import HangGuard, wait_any


class VoiceLifeApi:
    """Mixed into ``DiscordEmulator``, which provides the parts below."""

    _voice: VoiceGateway
    _hub: GatewayHub
    _room: VoiceRoom
    _udp: VoiceUdpServer
    _clock: Clock
    _require_running: Callable[[], None]  # raises EMULATOR_NOT_CONNECTED when not started

    async def close_voice(self, code: int = 4015, reason: str = "") -> None:
        """Close the bot's voice websocket with a Discord close code.

        4015 (voice server crashed) keeps the session for a RESUME (op 7: replayed messages after
        ``seq_ack``, then op 9); 4006 (session no longer valid), 4014 (disconnected) and any other
        code end it, so the client must identify again (4014 without a later VOICE_SERVER_UPDATE
        means it is out of the call).

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` without an open voice websocket.
        """
        self._require_running()
        if not 4000 <= code <= 4999:
            raise EmulatorError(f"not a Discord close code: {code}", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        await self._voice.force_close(code, reason)

    def drop_voice_socket(self) -> None:
        """Cut the bot's voice websocket without a close frame, as a network failure does (the
        client reads 1006). The session stays resumable, like after 4015.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` without an open voice websocket.
        """
        self._require_running()
        self._voice.drop()

    def gateway_reconnect(self) -> int:
        """Ask the bot's main gateway session to reconnect (op 7), as Discord does before a gateway
        restart; the client RESUMEs (op 6) on a new socket. Returns the sessions asked;
        ``voice_stats()['gateway_resumes']`` counts the RESUMEs accepted."""
        self._require_running()
        return self._hub.request_reconnect()

    async def wait_voice_resumed(self, resumes: int = 1, timeout: float = 10.0) -> VoiceSessionInfo:  # noqa: ASYNC109
        """Wait until the bot has resumed its voice session ``resumes`` times in all.

        Raises:
            EmulatorError: ``EMULATOR_TIMEOUT``.
        """
        async with HangGuard(timeout, f"the bot did not resume its voice session ({resumes})"):
            conn = await self._voice.wait_resumed(resumes)
        return conn.info()

    def move_voice_server(self) -> int:
        """Move the call to the emulator's other voice server (VOICE_SERVER_UPDATE mid-call with a
        new token and endpoint); returns the new endpoint's port. The client must identify there:
        new SSRC, key and, with DAVE, group.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` when the bot is not in voice.
        """
        self._require_running()
        return self._room.move_server()

    async def udp_blackout(self, seconds: float) -> None:
        """Drop every voice datagram, both ways, for ``seconds`` on the emulator's clock; returns
        when the outage ends. ``voice_stats()['udp_blackout_dropped']`` counts what was lost."""
        if seconds < 0:
            raise EmulatorError("seconds must not be negative", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        async with self.udp_outage():
            await self._clock.sleep(seconds)

    @contextlib.asynccontextmanager
    async def udp_outage(self) -> AsyncIterator[None]:
        """Drop every voice datagram, both ways, while the block runs: an outage held open around
        exactly what a test sends in it, which no scheduling delay can outrun (a fixed duration can
        end before a loaded machine has sent the last packet)."""
        self._require_running()
        self._udp.blackout = True
        try:
            yield
        finally:
            self._udp.blackout = False

    async def dave_send_invalid_commit(self) -> int:
        """Announce a commit transition (op 29) no client can process: the bot must report it with
        op 31 and re-join the group with a new key package (its old leaf is removed). Returns the
        transition id.

        Raises:
            EmulatorError: ``EMULATOR_NOT_CONNECTED`` / ``EMULATOR_BAD_INVOCATION`` without a DAVE call.
        """
        conn = await self._room.ready_connection()
        if conn.dave is None:
            raise EmulatorError("DAVE is off for this call", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        transition = conn.dave.invalid_commit()
        conn.dave_synced.clear()
        await conn.send_binary(
            OP_MLS_ANNOUNCE_COMMIT, struct.pack(">H", transition.transition_id) + transition.commit
        )
        return transition.transition_id

    async def apply_voice_event(self, event: VoiceEvent) -> str:
        """Run one scripted voice event now (its ``at`` is the caller's to honour); returns what
        happened, for a log line.

        Raises:
            EmulatorError: as the method the event maps to.
        """
        match event.voice:
            case "close":
                await self.close_voice(event.close_code)
                return f"voice websocket closed with {event.close_code}"
            case "move":
                return f"voice server moved to port {self.move_voice_server()}"
            case "blackout":
                assert event.seconds is not None
                await self.udp_blackout(event.seconds)
                return f"voice UDP blacked out for {event.seconds:g} s"
            case "dave_invalid_commit":
                return f"unprocessable DAVE commit sent (transition {await self.dave_send_invalid_commit()})"
            case "dave_downgrade":
                return f"DAVE downgraded (transition {await self.dave_downgrade()})"
            case "dave_upgrade":
                info = await self.dave_upgrade()
                return f"DAVE upgraded (privacy code {info.privacy_code})"
            case _:  # pragma: no cover - exhaustive over VoiceAction
                assert_never(event.voice)

    async def dave_downgrade(self, timeout: float = 10.0) -> int:  # noqa: ASYNC109
        """Downgrade the call to transport-only (op 21 protocol 0; the bot confirms with op 23 and
        op 22 executes); returns the transition id once executed. Speakers then send plain Opus.

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` without a DAVE call; ``EMULATOR_TIMEOUT``.
        """
        conn = await self._room.ready_connection()
        if conn.dave is None or conn.dave_version == 0:
            raise EmulatorError("DAVE is not in force on this call", code=ErrorCode.EMULATOR_BAD_INVOCATION)
        transition = await self._voice.downgrade(conn)
        async with HangGuard(timeout, "the bot did not confirm the DAVE downgrade"):
            await conn.wait_executed(transition)
        return transition

    async def dave_upgrade(self, timeout: float = 10.0) -> VoiceSessionInfo:  # noqa: ASYNC109
        """Upgrade a downgraded call back to DAVE: op 24 (epoch 1, a new group), the bot's key
        package, its welcome (op 30), ops 23/22. Returns once the bot is in the new group.

        Raises:
            EmulatorError: ``EMULATOR_BAD_INVOCATION`` unless the call was downgraded; ``EMULATOR_TIMEOUT``.
        """
        conn = await self._room.ready_connection()
        if conn.dave is None or conn.dave_version != 0:
            raise EmulatorError(
                "only a downgraded DAVE call can be upgraded", code=ErrorCode.EMULATOR_BAD_INVOCATION
            )
        await self._voice.upgrade(conn)
        return await self.wait_dave_synced(timeout)

    async def wait_dave_synced(self, timeout: float = 10.0) -> VoiceSessionInfo:  # noqa: ASYNC109
        """Wait until the bot holds the DAVE group's current epoch (after a re-join, say).

        Raises:
            EmulatorError: ``EMULATOR_TIMEOUT``; ``EMULATOR_NOT_CONNECTED``.
        """
        conn = await self._room.ready_connection()
        async with HangGuard(timeout, "the bot did not re-join the DAVE group"):
            await wait_any(conn.dave_synced, conn.closed)
        return conn.info()

    def dave_members(self) -> list[int]:
        """User ids in the emulator's view of the DAVE group, by leaf (empty with DAVE off)."""
        conn = self._voice.active
        return [] if conn is None or conn.dave is None else conn.dave.group.members

    def voice_stats(self) -> dict[str, Any]:
        """Counters of the voice side: closes ``[(code, resumable)]``, resumes, failed resumes,
        replayed messages, the last ``seq`` sent, op 31 reports, client commits won / recorder commits, blackout drops."""
        conn = self._voice.active
        return {
            "closes": list(self._voice.closes),
            "resumes": self._voice.resumes,
            "failed_resumes": self._voice.failed_resumes,
            "replayed": 0 if conn is None else conn.replayed,
            "last_seq": 0 if conn is None else conn.last_seq,
            "invalid_reports": list(self._voice.invalid_reports),
            "client_commits_won": self._room.client_commits_won,
            "recorder_commits": self._room.recorder_commits,
            "ignored_commits": 0 if conn is None else conn.ignored_commits,
            "udp_blackout_dropped": dict(self._udp.blackout_dropped),
            "endpoint_port": self._room.endpoint_port or self._room.voice_port,
            "gateway_resumes": self._hub.resumes,
        }

    def udp_stats(self) -> dict[str, Any]:
        """What reached the voice UDP port from the bot, by kind (``keepalive``, ``media``,
        ``other``), and how many datagrams to the bot its NAT dropped (``EmulatorConfig.nat_timeout_s``)."""
        return {"udp_from_bot": dict(self._udp.from_bot), "nat_dropped": self._udp.nat_dropped}
