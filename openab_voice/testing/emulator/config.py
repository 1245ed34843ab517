"""Settings of one loopback Discord emulator."""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.discord.wire.transport import SUPPORTED_MODES
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.impairments import Impairments

DEFAULT_MODES: tuple[str, ...] = ("aead_aes256_gcm_rtpsize", "aead_xchacha20_poly1305_rtpsize")


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatorConfig:
    """How the emulated Discord behaves.

    Attributes:
        dave: offer DAVE (``dave_protocol_version`` 1 in SESSION_DESCRIPTION) to clients that support
            it. discord.py ignores a later upgrade of a DAVE-off call, so this is fixed per connection.
        modes: transport modes offered in voice READY, in order; discord.py picks the first one it
            supports (``aead_xchacha20_poly1305_rtpsize`` for 2.7.1 with the default order).
        loss: default packet loss probability for every speaker.
        reorder: default probability that a speaker's packet swaps with the next one.
        jitter_ms: default uniform extra delay per packet, in milliseconds.
        seed: seeds SSRCs, RTP sequence starts and impairments, for reproducible runs.
        bot_name: the bot user's name.
        token: the only bot token the emulator accepts.
        client_commits: with DAVE, send a membership change's proposals (op 27) to the bot and let
            its commit (op 28) win when it arrives within ``commit_wait_s``; otherwise the hidden
            recorder commits at once, so the bot's commits always lose.
        commit_wait_s: how long proposals wait for the bot's commit before the recorder commits.
        speaking_lead_ms: op 5 SPEAKING goes out this long before a user's first packet on a
            connection (a client that handles the packet before op 5 drops it); 0: together.
        advertise_loopback: ``GET /gateway``, ``/gateway/bot`` and READY's ``resume_gateway_url``
            name ``wss://127.0.0.1:<port>`` instead of ``wss://gateway.discord.gg``, for clients
            that cannot resolve Discord's host names to the emulator (discord.js).
        heartbeat_interval_ms: the main gateway's ``heartbeat_interval`` in HELLO (Discord's own:
            41,250).
        gateway_rtt_ms: how long after a heartbeat its ACK goes out, a network round trip. Discord's
            ACK always comes a round trip later; discord.py stamps a heartbeat as sent only once its
            keep-alive thread wakes after the send, so an ACK on loopback can be handled first, and
            it then logs the time since the connection opened as latency ("Can't keep up ...
            websocket is 41.3s behind", seen in the demo).
        nat_timeout_s: a NAT in front of the bot: the voice server's datagrams to the bot are dropped
            (and counted) while the bot's address has sent nothing on UDP for longer than this, on the
            emulator's clock (None: no NAT). discord.py sends nothing on UDP while it does not play.
    """

    dave: bool = True
    modes: tuple[str, ...] = DEFAULT_MODES
    loss: float = 0.0
    reorder: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0
    bot_name: str = "openab"
    token: str = "emulator-token"
    client_commits: bool = False
    commit_wait_s: float = 2.0
    speaking_lead_ms: float = 40.0
    advertise_loopback: bool = False
    heartbeat_interval_ms: int = 41_250
    gateway_rtt_ms: float = 40.0
    nat_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if not self.modes:
            raise EmulatorError(
                "at least one transport mode must be offered", code=ErrorCode.EMULATOR_BAD_CONFIG
            )
        unknown = [m for m in self.modes if m not in SUPPORTED_MODES]
        if unknown:
            raise EmulatorError(
                f"unsupported transport modes {unknown}",
                code=ErrorCode.EMULATOR_BAD_CONFIG,
                modes=list(unknown),
            )
        if not self.token:
            raise EmulatorError("token must not be empty", code=ErrorCode.EMULATOR_BAD_CONFIG)
        if not 0.0 <= self.speaking_lead_ms <= 1000.0 or not 0.0 < self.commit_wait_s <= 60.0:
            raise EmulatorError(
                "speaking_lead_ms or commit_wait_s out of range", code=ErrorCode.EMULATOR_BAD_CONFIG
            )
        if not 100 <= self.heartbeat_interval_ms <= 120_000 or not 0.0 <= self.gateway_rtt_ms <= 1000.0:
            raise EmulatorError(
                "heartbeat_interval_ms or gateway_rtt_ms out of range", code=ErrorCode.EMULATOR_BAD_CONFIG
            )
        if self.nat_timeout_s is not None and not 0.0 < self.nat_timeout_s <= 3600.0:
            raise EmulatorError("nat_timeout_s must be in (0, 3600]", code=ErrorCode.EMULATOR_BAD_CONFIG)
        self.impairments()  # validates the probabilities

    def impairments(self) -> Impairments:
        """The emulator-wide default impairments."""
        return Impairments(loss=self.loss, reorder=self.reorder, jitter_ms=self.jitter_ms)
