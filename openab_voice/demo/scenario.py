"""Demo scenario files (JSON).

Schema (all times in seconds from the moment the bot's voice connection is ready)::

    {
      "dave": true,            # DAVE end-to-end encryption on this voice connection
      "loss": 0.02,            # packet loss probability for every speaker (0..0.5)
      "reorder": 0.0,          # probability that a packet swaps with the next one
      "jitter_ms": 0.0,        # random extra send delay per packet
      "seed": 0,               # impairment RNG seed
      "nat_timeout_s": 30,     # a NAT in front of the bot: the server's UDP to it is dropped while the
                               # bot has sent nothing on UDP for this long (null: no NAT)
      "until": 12.0,           # the demo ends this long after the bot joined
      "greeting": true,        # the bot plays a short greeting after joining
      "dialogue": true,        # the bot answers (offline STT -> LLM -> TTS); false: receive only
      "bot_name": "Jarvis",    # the bot's display name, which is also its wake name
      "speakers": [
        {"id": "1001", "name": "alice",
         "audio": [{"at": 0.5, "file": "a.wav", "send_before_speaking": 0},
                   {"at": 4.0, "say": "What time is it?"}],
         "leave_at": null}
      ],
      "operator": "1001",      # the only user whose button click confirms actions (actions on when set)
      "meeting_record": true,  # store the session's transcript (/voice transcript, /voice summary); null: as configured
      "memory": true,          # long-term memory ("remember that ...", /voice memory); null: as configured
      "acp_agent": ["cmd", "arg"],   # the ACP agent per action (default: the scripted test agent)
      "events": [              # things people do in the text channel, and things Discord does to voice
        {"at": 9.0, "click": "confirm", "by": "1001"},   # on the latest pending proposal
        {"at": 12.0, "slash": "voice actions", "by": "1002"},
        {"at": 13.0, "slash": "voice memory forget:3", "by": "1001"},   # any /voice command, option:value
        {"at": 14.0, "voice": "close", "code": 4015}     # see openab_voice/testing/emulator/voice_events.py
      ]
    }

``file`` paths are relative to the scenario file's folder; any WAV rate / channel count works.
``say`` is synthesized with the local Piper voice before the demo starts; ``<pause 0.8>`` in it is
0.8 s of silence between the parts said around it (``"What is the capital of <pause 0.8> France?"``).
``slash`` is any command of the ``/voice`` group, checked against the group itself
(:mod:`openab_voice.demo.slash`); every reply, ephemeral ones and attached files included, is in the
report's ``text_channel``.
``send_before_speaking`` sends that many packets before the SSRC is announced (op 5).
``over_bot_after_s`` makes the line a barge-in: from ``at`` on, it waits until the bot has been
heard for that many seconds without a pause (at most 15 s, then it is said anyway),
so talking over the bot does not depend on how fast this machine answers.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from openab_voice.demo.slash import SlashCall, parse_slash
from openab_voice.errors import EmulatorError, ErrorCode
from openab_voice.testing.emulator.voice_events import VoiceAction, VoiceEvent

_PAUSE = re.compile(r"<pause\s+(\d+(?:\.\d+)?)>")


def split_pauses(line: str) -> list[tuple[str, float]]:
    """A ``say`` line's parts, each with the pause that follows it (0 after the last)."""
    pieces = _PAUSE.split(line)
    texts, pauses = pieces[0::2], [float(p) for p in pieces[1::2]] + [0.0]
    return [(text.strip(), pause) for text, pause in zip(texts, pauses, strict=True) if text.strip()]


class AudioItem(BaseModel):
    """One thing a speaker says: a WAV ``file`` or a ``say`` text synthesized with the Piper voice."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0)
    file: Path | None = None
    say: str | None = Field(default=None, min_length=1, max_length=1000)
    send_before_speaking: int = Field(default=0, ge=0, le=500)
    over_bot_after_s: float | None = Field(default=None, gt=0, le=30)

    @model_validator(mode="after")
    def _one_source(self) -> AudioItem:
        if (self.file is None) == (self.say is None):
            raise ValueError("give exactly one of 'file' or 'say'")
        return self


class SpeakerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str = Field(min_length=1, max_length=32)
    audio: list[AudioItem] = Field(default_factory=list)
    leave_at: float | None = Field(default=None, ge=0)

    @field_validator("id")
    @classmethod
    def _snowflake(cls, value: str) -> str:
        if not value.isdigit() or not 0 < int(value) < 2**63:
            raise ValueError("must be a Discord snowflake (digits)")
        return value


class EventItem(BaseModel):
    """A text-channel action (a button click on the latest pending proposal, or a ``/voice``
    command, ``by`` a speaker) or a voice-side event (``voice``: see :class:`VoiceEvent`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(ge=0)
    by: str | None = None
    click: Literal["confirm", "reject"] | None = None
    slash: str | None = Field(default=None, min_length=1, max_length=200)
    voice: VoiceAction | None = None
    code: int | None = None
    seconds: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> EventItem:
        if sum(kind is not None for kind in (self.click, self.slash, self.voice)) != 1:
            raise ValueError("give exactly one of 'click', 'slash' or 'voice'")
        if self.voice is not None:
            if self.by is not None:
                raise ValueError("voice events have no 'by'")
            self.voice_event()  # validates code / seconds
            return self
        if self.by is None:
            raise ValueError("click and slash events need 'by'")
        if self.code is not None or self.seconds is not None:
            raise ValueError("'code' and 'seconds' only go with 'voice'")
        return self

    @field_validator("slash")
    @classmethod
    def _known_command(cls, value: str | None) -> str | None:
        if value is not None:
            parse_slash(value)  # a ValueError naming the command or option, reported at events.<i>.slash
        return value

    def voice_event(self) -> VoiceEvent:
        """The voice event this item names (``voice`` must be set)."""
        assert self.voice is not None
        return VoiceEvent(at=self.at, voice=self.voice, code=self.code, seconds=self.seconds)

    def slash_call(self) -> SlashCall:
        """The ``/voice`` command this item names (``slash`` must be set), its options typed."""
        assert self.slash is not None
        return parse_slash(self.slash)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    dave: bool = True
    loss: float = Field(default=0.0, ge=0, le=0.5)
    reorder: float = Field(default=0.0, ge=0, le=0.5)
    jitter_ms: float = Field(default=0.0, ge=0, le=200)
    seed: int = 0
    nat_timeout_s: float | None = Field(default=None, gt=0, le=3600)
    until: float = Field(default=12.0, gt=0, le=3600)
    greeting: bool = True
    dialogue: bool = True
    bot_name: str = Field(default="Jarvis", min_length=1, max_length=32)
    speakers: list[SpeakerSpec] = Field(min_length=1)
    operator: str | None = None
    meeting_record: bool | None = None
    memory: bool | None = None
    acp_agent: list[str] | None = Field(default=None, min_length=1)
    end_of_turn: Literal["silence", "semantic"] | None = None  # OPENAB_END_OF_TURN for this scenario
    events: list[EventItem] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> Scenario:
        ids = [s.id for s in self.speakers]
        if len(set(ids)) != len(ids):
            raise ValueError("speaker ids must be unique")
        known = set(ids)
        if self.operator is not None and self.operator not in known:
            raise ValueError("operator must be one of the speaker ids")
        for event in self.events:
            if event.by is not None and event.by not in known:
                raise ValueError(f"event 'by' {event.by} is not a speaker id")
        if self.events and any(e.click for e in self.events) and self.operator is None:
            raise ValueError("click events need an 'operator' (actions are off without one)")
        return self


def bundled_scenario_path(name: str) -> Path:
    """A scenario shipped in ``openab_voice/demo/scenarios``: ``default``, ``meeting-record`` ..."""
    return Path(str(resources.files("openab_voice.demo") / "scenarios" / f"{name}.json"))


def default_scenario_path() -> Path:
    return bundled_scenario_path("default")


def load_scenario(path: Path | None) -> Scenario:
    """Parse and validate a scenario; relative audio paths resolve against its folder. A bare name
    that is no file here (``meeting-record``) is the bundled scenario of that name.

    Raises:
        EmulatorError: ``SCENARIO_INVALID`` naming the field, or ``SCENARIO_FILE_MISSING``.
    """
    path = path or default_scenario_path()
    if len(path.parts) == 1 and not path.exists():
        bundled = bundled_scenario_path(path.name.removesuffix(".json"))
        path = bundled if bundled.is_file() else path
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EmulatorError(
            f"cannot read scenario {path}: {exc.strerror}", code=ErrorCode.SCENARIO_FILE_MISSING
        ) from None
    except json.JSONDecodeError as exc:
        raise EmulatorError(f"scenario {path} is not JSON: {exc}", code=ErrorCode.SCENARIO_INVALID) from None
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise EmulatorError(
            f"scenario {path}: {where}: {err['msg']}", code=ErrorCode.SCENARIO_INVALID, field=where
        ) from None
    base = path.parent
    speakers = []
    for spk in scenario.speakers:
        items = []
        for item in spk.audio:
            if item.file is None:
                items.append(item)
                continue
            file = item.file if item.file.is_absolute() else (base / item.file).resolve()
            if not file.is_file():
                raise EmulatorError(
                    f"speaker {spk.id}: audio file {file} not found", code=ErrorCode.SCENARIO_FILE_MISSING
                )
            items.append(item.model_copy(update={"file": file}))
        speakers.append(spk.model_copy(update={"audio": items}))
    return scenario.model_copy(update={"speakers": speakers})
