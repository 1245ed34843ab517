"""Settings of one loopback Discord emulator."""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.discord.transport import SUPPORTED_MODES
from openab_voice.errors import EmulatorError
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
    """

    dave: bool = True
    modes: tuple[str, ...] = DEFAULT_MODES
    loss: float = 0.0
    reorder: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0
    bot_name: str = "openab"
    token: str = "emulator-token"

    def __post_init__(self) -> None:
        if not self.modes:
            raise EmulatorError("at least one transport mode must be offered", code="EMULATOR_BAD_CONFIG")
        unknown = [m for m in self.modes if m not in SUPPORTED_MODES]
        if unknown:
            raise EmulatorError(
                f"unsupported transport modes {unknown}", code="EMULATOR_BAD_CONFIG", modes=list(unknown)
            )
        if not self.token:
            raise EmulatorError("token must not be empty", code="EMULATOR_BAD_CONFIG")
        self.impairments()  # validates the probabilities

    def impairments(self) -> Impairments:
        """The emulator-wide default impairments."""
        return Impairments(loss=self.loss, reorder=self.reorder, jitter_ms=self.jitter_ms)
