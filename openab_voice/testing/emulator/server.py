"""``DiscordEmulator``: composes the loopback Discord and owns its lifecycle.

Listeners (all on 127.0.0.1, ephemeral ports): one TLS port for REST and the main gateway (what
``discord.com`` and ``gateway.discord.gg`` resolve to through :meth:`DiscordEmulator.client_connector`),
one TLS port for the voice websocket (the VOICE_SERVER_UPDATE endpoint) and one UDP port for media.
The emulator's public methods are grouped by what they touch: text (:mod:`text_api`), media
(:mod:`media_api`) and the voice session's life (:mod:`voice_life`); the REST port's routing to the
guild a request names is :mod:`front`.
"""

from __future__ import annotations

import random
import socket
import ssl
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp
from aiohttp import web

from openab_voice.clock import Clock, SystemClock
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.tasks import TaskOwner
from openab_voice.testing.emulator import certs, payloads
from openab_voice.testing.emulator.bot_audio import BotAudioSink
from openab_voice.testing.emulator.channels import ChannelApi
from openab_voice.testing.emulator.commands import CommandRegistry
from openab_voice.testing.emulator.config import EmulatorConfig
from openab_voice.testing.emulator.front import GuildFront
from openab_voice.testing.emulator.gateway import GATEWAY_URL, INTENT_GUILD_MEMBERS, GatewayHub
from openab_voice.testing.emulator.interactions import InteractionRegistry
from openab_voice.testing.emulator.media_api import MediaApi
from openab_voice.testing.emulator.models import GuildIds, GuildState, Snowflakes
from openab_voice.testing.emulator.resolver import EmulatorResolver
from openab_voice.testing.emulator.responses import discord_errors
from openab_voice.testing.emulator.rest import IdentityApi
from openab_voice.testing.emulator.rtp_stream import RtpStream
from openab_voice.testing.emulator.speakers import FakeSpeaker
from openab_voice.testing.emulator.text_api import TextApi
from openab_voice.testing.emulator.user_actions import UserActions
from openab_voice.testing.emulator.voice_connection import VoiceSessionInfo
from openab_voice.testing.emulator.voice_gateway import VoiceGateway
from openab_voice.testing.emulator.voice_life import VoiceLifeApi
from openab_voice.testing.emulator.voice_room import VoiceRoom
from openab_voice.testing.emulator.voice_status import VoiceStatusApi, VoiceStatusSet
from openab_voice.testing.emulator.voice_udp import VoiceUdpServer
from openab_voice.testing.emulator.waiting import HangGuard
from openab_voice.testing.emulator.webhooks import WebhookApi
from openab_voice.testing.emulator.wire import JsonObject, UpdateVoiceStateData

DEFAULT_CONFIG = EmulatorConfig()


class DiscordEmulator(VoiceLifeApi, MediaApi, TextApi):
    """A loopback Discord that an unmodified discord.py client logs into and talks to.

    Args:
        config: behaviour (DAVE, transport modes, impairments, seed, token).
        clock: paces fake speakers and timestamps messages; the system clock by default.
        joined: another guild of the same bot: this one shares ``joined``'s bot user, application,
            token, gateway and REST port (which routes each request to the guild it names), and keeps
            its own channels, members, voice servers and UDP port. Start ``joined`` first.
        shard: with ``joined``, pick this guild's id so it lands on shard ``(id, count)``.

    Attributes:
        config: the settings.
        token: the bot token it accepts.
        guild_id, text_channel_id, voice_channel_id, bot_user_id, application_id: the fixed ids.
        recorder_user_id: the hidden DAVE group member the emulator decrypts the bot's audio as.
        bot_audio: what the bot played, decoded.
    """

    token: str
    bot_user_id: int
    application_id: int
    _snowflakes: Snowflakes

    def __init__(
        self,
        config: EmulatorConfig = DEFAULT_CONFIG,
        *,
        clock: Clock | None = None,
        joined: DiscordEmulator | None = None,
        shard: tuple[int, int] | None = None,
    ) -> None:
        self.config = config
        self._clock: Clock = clock or SystemClock()
        self._joined = joined
        snowflakes = Snowflakes() if joined is None else joined._snowflakes
        self._snowflakes = snowflakes
        guild_id = snowflakes.next()
        while shard is not None and (guild_id >> 22) % shard[1] != shard[0]:
            guild_id = snowflakes.next()
        text_channel_id, voice_channel_id = snowflakes.next(), snowflakes.next()
        ids = GuildIds(
            guild_id=guild_id,
            text_channel_id=text_channel_id,
            voice_channel_id=voice_channel_id,
            bot_user_id=snowflakes.next() if joined is None else joined.bot_user_id,
            application_id=snowflakes.next() if joined is None else joined.application_id,
        )
        if joined is not None and config.token != joined.token:
            raise EmulatorError(
                "a joined guild's bot must have the same token", code=ErrorCode.EMULATOR_BAD_CONFIG
            )
        self.recorder_user_id = snowflakes.next()
        self._state = GuildState(ids, bot_name=config.bot_name, clock=self._clock, snowflakes=snowflakes)
        self.token = config.token
        self.guild_id = ids.guild_id
        self.text_channel_id = ids.text_channel_id
        self.voice_channel_id = ids.voice_channel_id
        self.bot_user_id = ids.bot_user_id
        self.application_id = ids.application_id
        self._rng = random.Random(config.seed)
        self._ssrcs: set[int] = set()
        self.bot_audio = BotAudioSink()
        self.unknown_packets = 0
        self._commands = CommandRegistry(ids.application_id, snowflakes)
        self._interactions = InteractionRegistry()
        self._udp = VoiceUdpServer(self._on_media, clock=self._clock, nat_timeout_s=config.nat_timeout_s)
        self._voice = VoiceGateway(
            self._state,
            config,
            self._udp,
            allocate_ssrc=self._allocate_ssrc,
            recorder_id=self.recorder_user_id,
        )
        if joined is None:
            self._hub = GatewayHub(
                self._state,
                token=config.token,
                on_voice_state=self._on_voice_state,
                gateway_url=self._gateway_url,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                rtt_s=config.gateway_rtt_ms / 1000.0,
                clock=self._clock,
            )
        else:
            self._hub = joined._hub
            self._hub.add_guild(self._state, on_voice_state=self._on_voice_state)
        self._front: GuildFront = GuildFront(
            self._state,
            self._interactions,
            self._own_routes,
            joined=None if joined is None else joined._front,
        )
        self._room = VoiceRoom(
            self._state,
            self._hub,
            self._voice,
            self._udp,
            client_commits=config.client_commits,
            commit_wait_s=config.commit_wait_s,
        )
        self._actions = UserActions(self._state, self._commands, self._interactions, self._hub)
        self._voice_status = VoiceStatusApi(self._state, self._hub, token=self.token, clock=self._clock)
        self._speakers: dict[int, FakeSpeaker] = {}
        self._unmapped: dict[int, RtpStream] = {}
        self._tasks = TaskOwner("emulator")  # a failed one is reported to the loop's handler
        self._runners: list[web.AppRunner] = []
        self._material: certs.EmulatorCertificate | None = None
        self._api_port = 0
        self._phase: Literal["new", "running", "closed"] = "new"

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Generate the certificate and open the listeners.

        Raises:
            EmulatorError: ``EMULATOR_STATE`` when started twice or after close.
        """
        if self._phase != "new":
            raise EmulatorError(
                f"cannot start an emulator that is {self._phase}", code=ErrorCode.EMULATOR_STATE
            )
        self._phase = "running"
        try:
            if self._joined is not None and self._joined._material is None:
                raise EmulatorError("start the joined emulator first", code=ErrorCode.EMULATOR_STATE)
            # A joined guild's voice servers present the same CA the bot's connector trusts.
            material = certs.generate_certificate() if self._joined is None else self._joined._material
            assert material is not None
            self._material = material
            server_ctx = certs.server_ssl_context(material)
            api = web.Application(middlewares=[discord_errors])
            api.add_routes(self._front.routes())
            api.add_routes([web.get("/", self._hub.handle), web.get("/gateway", self._hub.handle)])
            voice = web.Application(middlewares=[discord_errors])
            voice.add_routes([web.get("/", self._voice.handle)])
            self._api_port = await self._serve(api, server_ctx)
            # Two voice servers: the second is where move_voice_server() sends the bot.
            self._room.voice_ports = [await self._serve(voice, server_ctx) for _ in range(2)]
            self._room.voice_port = self._room.voice_ports[0]
            await self._udp.start()
        except BaseException:
            await self.aclose()
            raise

    def _own_routes(self) -> list[web.RouteDef]:
        """This guild's REST routes (:class:`GuildFront` builds them once)."""
        return [
            *IdentityApi(
                self._state, self._commands, token=self.token, gateway_url=self._gateway_url
            ).routes(),
            *ChannelApi(self._state, self._hub, token=self.token).routes(),
            *WebhookApi(self._state, self._interactions, self._hub).routes(),
            *self._voice_status.routes(),
        ]

    async def _serve(self, app: web.Application, ctx: ssl.SSLContext) -> int:
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        self._runners.append(runner)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
        await web.SockSite(runner, sock, ssl_context=ctx).start()
        return port

    async def aclose(self) -> None:
        """Stop everything; idempotent. Close clients first, or they will try to reconnect."""
        if self._phase == "closed":
            return
        self._phase = "closed"
        await self._tasks.aclose()
        await self._hub.aclose()
        await self._voice.aclose()
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        self._udp.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _gateway_url(self) -> str:
        if self.config.advertise_loopback and self._api_port:
            return f"wss://127.0.0.1:{self._api_port}"
        return GATEWAY_URL

    def _require_running(self) -> None:
        if self._phase != "running":
            raise EmulatorError(f"the emulator is {self._phase}", code=ErrorCode.EMULATOR_STATE)

    # --- wiring a client ------------------------------------------------------------------------

    def client_connector(self) -> aiohttp.TCPConnector:
        """An aiohttp connector that routes discord.py's default URLs here; call inside the loop.

        ``discord.com`` and ``gateway.discord.gg`` resolve to this emulator's TLS port (any other
        name fails to resolve); TLS trusts only the emulator's CA. Pass it as
        ``discord.Client(connector=...)``; the client's session owns and closes it.
        """
        self._require_running()
        assert self._material is not None
        resolver = EmulatorResolver({name: self._api_port for name in certs.SERVER_NAMES})
        return aiohttp.TCPConnector(
            resolver=resolver, ssl=certs.client_ssl_context(self._material), limit=0, use_dns_cache=False
        )

    def client_ssl_context(self) -> ssl.SSLContext:
        """An SSL context that trusts the emulator's CA (for clients built by hand)."""
        self._require_running()
        assert self._material is not None
        return certs.client_ssl_context(self._material)

    @property
    def ca_pem(self) -> bytes:
        """The emulator CA certificate (PEM) a client must trust, e.g. ``NODE_EXTRA_CA_CERTS``."""
        self._require_running()
        assert self._material is not None
        return self._material.ca_pem

    @property
    def api_port(self) -> int:
        """The TLS port serving REST and the main gateway."""
        return self._api_port

    @property
    def voice_port(self) -> int:
        """The TLS port serving the voice websocket."""
        return self._room.voice_port

    @property
    def udp_port(self) -> int:
        """The voice UDP port (in voice READY)."""
        return self._udp.port

    # --- users and speakers -----------------------------------------------------------------------

    def _allocate_ssrc(self) -> int:
        while True:
            ssrc = self._rng.randrange(1, 0xFFFFFFFF)
            if ssrc not in self._ssrcs and ssrc not in self._unmapped:
                self._ssrcs.add(ssrc)
                return ssrc

    def add_user(self, user_id: int, name: str, *, bot: bool = False, in_voice: bool = True) -> FakeSpeaker:
        """Add a guild member (before or after start); returns the speaker that talks as them.

        Added while the bot is connected and ``in_voice``, the user joins the call as on Discord
        (VOICE_STATE_UPDATE, op 11, and the DAVE commit); :meth:`FakeSpeaker.say` waits for that.
        """
        if self._phase == "closed":
            raise EmulatorError("the emulator is closed", code=ErrorCode.EMULATOR_STATE)
        user = self._state.add_user(user_id, name, bot=bot, in_voice=False)
        speaker = FakeSpeaker(
            host=self._room,
            room=self.bot_audio.room,
            clock=self._clock,
            user_id=user_id,
            name=name,
            ssrc=self._allocate_ssrc(),
            impairments=self.config.impairments(),
            seed=self.config.seed * 1_000_003 + user_id,
            rtp_start=(self._rng.randrange(0x10000), self._rng.randrange(0x100000000)),
            speaking_lead=self.config.speaking_lead_ms / 1000.0,
        )
        self._speakers[user_id] = speaker
        if self._phase == "running" and self._hub.connected:
            member = {**payloads.member_payload(self._state, user), "guild_id": str(self.guild_id)}
            self._hub.dispatch("GUILD_MEMBER_ADD", member, intent=INTENT_GUILD_MEMBERS)
        if in_voice:
            if self._phase == "running" and self._hub.connected:
                self._room.mark_joined(user_id)
                self._spawn(self._room.announce_join(user_id), f"emulator-join-{user_id}")
            else:
                self._state.set_voice(user_id, in_voice=True, session_id=f"voice-session-{user_id}")
        return speaker

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.spawn(coro, name=name)

    def speaker(self, user_id: int) -> FakeSpeaker:
        """The speaker of a user added with :meth:`add_user`.

        Raises:
            EmulatorError: ``EMULATOR_UNKNOWN_USER``.
        """
        try:
            return self._speakers[user_id]
        except KeyError:
            raise EmulatorError(f"no fake user {user_id}", code=ErrorCode.EMULATOR_UNKNOWN_USER) from None

    @property
    def speakers(self) -> list[FakeSpeaker]:
        """Every added user's speaker, in the order they were added."""
        return list(self._speakers.values())

    # --- voice ----------------------------------------------------------------------------------

    async def _on_voice_state(self, data: UpdateVoiceStateData) -> None:
        # The room is built after the hub it dispatches through, hence this indirection.
        await self._room.on_bot_voice_state(data)

    async def wait_voice_ready(self, timeout: float = 10.0) -> VoiceSessionInfo:  # noqa: ASYNC109
        """Wait until the bot's voice session is usable: SESSION_DESCRIPTION sent and, with DAVE on,
        the bot's welcome transition executed.

        Raises:
            EmulatorError: ``EMULATOR_TIMEOUT``.
        """
        async with HangGuard(timeout, "the bot did not finish joining voice"):
            conn = await self._voice.wait_ready()
        return conn.info()

    def voice_session(self) -> VoiceSessionInfo | None:
        """The current voice session, if the bot is connected."""
        conn = self._voice.active
        return conn.info() if conn is not None and conn.ready.is_set() else None

    # --- inspection -----------------------------------------------------------------------------

    def messages(self, channel_id: int | None = None) -> list[JsonObject]:
        """Stored (non-ephemeral) messages, oldest first; copies."""
        return self._state.messages(channel_id)

    @property
    def voice_statuses(self) -> list[VoiceStatusSet]:
        """Every voice channel status the bot set, oldest first (``status`` None: cleared); copies."""
        return [VoiceStatusSet(**entry) for entry in self._voice_status.log]

    def pins(self, channel_id: int | None = None) -> list[int]:
        """Pinned message ids in pin order."""
        return [mid for _, mid, _ in self._state.pinned(channel_id)]

    @property
    def registered_commands(self) -> list[JsonObject]:
        """Every command the bot registered (global first, then guild)."""
        return self._commands.all()
