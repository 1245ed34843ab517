"""Scripted voice-side events, as scenario files name them.

One entry of a scenario's ``events`` list::

    {"at": 9.0, "voice": "close", "code": 4015}        # close the bot's voice websocket (4015: resumable)
    {"at": 12.0, "voice": "move"}                       # VOICE_SERVER_UPDATE to the other voice server
    {"at": 15.0, "voice": "blackout", "seconds": 2.0}   # drop all voice UDP both ways
    {"at": 20.0, "voice": "dave_invalid_commit"}        # an op 29 nobody can process (op 31 follows)
    {"at": 25.0, "voice": "dave_downgrade"}             # op 21 to transport-only
    {"at": 30.0, "voice": "dave_upgrade"}               # op 24 epoch 1: back to DAVE, a new group

Each maps to one :class:`~openab_voice.testing.emulator.DiscordEmulator` method
(:meth:`~DiscordEmulator.apply_voice_event` runs it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

VoiceAction = Literal["close", "move", "blackout", "dave_invalid_commit", "dave_downgrade", "dave_upgrade"]
VOICE_ACTIONS: tuple[VoiceAction, ...] = (
    "close",
    "move",
    "blackout",
    "dave_invalid_commit",
    "dave_downgrade",
    "dave_upgrade",
)


class VoiceEvent(BaseModel):
    """One scripted voice event (times in seconds from the script's start)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0, le=86_400)
    voice: VoiceAction
    code: int | None = Field(default=None, ge=4000, le=4999)
    seconds: float | None = Field(default=None, gt=0, le=600)

    @model_validator(mode="after")
    def _fields_fit_the_action(self) -> VoiceEvent:
        if self.code is not None and self.voice != "close":
            raise ValueError("'code' only goes with voice 'close'")
        if (self.seconds is not None) != (self.voice == "blackout"):
            raise ValueError("'seconds' is required with voice 'blackout', and only there")
        return self

    @property
    def close_code(self) -> int:
        """The close code of a ``close`` event (4015, resumable, unless given)."""
        return 4015 if self.code is None else self.code
