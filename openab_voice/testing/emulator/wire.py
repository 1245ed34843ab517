"""Shapes of what a client sends the emulator, validated where they enter.

Everything a bot sends is untrusted input: each shape is a ``TypedDict`` checked at runtime with a
pydantic ``TypeAdapter`` (extra keys ignored, snowflake strings coerced to ``int``), so a handler
either gets a well-formed value or a :class:`WireError` that becomes a Discord-style 4xx / close code.
Outgoing payloads are built by :mod:`payloads` as plain JSON objects.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypeVar

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from openab_voice.errors import WireError

JsonObject = dict[str, Any]
_T = TypeVar("_T")


# --- main gateway ---------------------------------------------------------------------------


class GatewayFrame(TypedDict):
    op: int
    d: Any


class IdentifyData(TypedDict):
    token: str
    intents: int
    properties: NotRequired[dict[str, Any]]
    shard: NotRequired[list[int]]  # [shard_id, num_shards]


class ResumeData(TypedDict):
    token: str
    session_id: str
    seq: int | None


class UpdateVoiceStateData(TypedDict):
    guild_id: int
    channel_id: int | None
    self_mute: NotRequired[bool]
    self_deaf: NotRequired[bool]


# --- voice gateway --------------------------------------------------------------------------


class VoiceIdentifyData(TypedDict):
    server_id: int
    user_id: int
    session_id: str
    token: str
    max_dave_protocol_version: NotRequired[int]


class SelectProtocolInner(TypedDict):
    address: str
    port: int
    mode: str


class SelectProtocolData(TypedDict):
    protocol: str
    data: SelectProtocolInner


class VoiceHeartbeatData(TypedDict):
    t: int
    seq_ack: NotRequired[int]


class SpeakingData(TypedDict):
    speaking: int
    ssrc: int
    delay: NotRequired[int]


class TransitionReadyData(TypedDict):
    transition_id: int


class InvalidCommitData(TypedDict):
    transition_id: int


class VoiceResumeData(TypedDict):
    server_id: int
    session_id: str
    token: str
    seq_ack: NotRequired[int]


# --- REST -----------------------------------------------------------------------------------


class MessageBody(TypedDict, total=False):
    content: str | None
    components: list[JsonObject] | None
    embeds: list[JsonObject] | None
    flags: int | None
    tts: bool
    nonce: int | str | None
    message_reference: JsonObject | None


class CommandOptionBody(TypedDict, total=False):
    type: int
    name: str
    description: str
    required: bool
    choices: list[JsonObject]
    options: list[CommandOptionBody]
    channel_types: list[int]


class CommandBody(TypedDict):
    name: str
    type: NotRequired[int]
    description: NotRequired[str]
    options: NotRequired[list[CommandOptionBody]]


class InteractionCallbackBody(TypedDict):
    type: int
    data: NotRequired[JsonObject | None]


class VoiceStatusBody(TypedDict):
    status: str | None  # null clears it


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def parse(shape: type[_T], value: object, *, what: str) -> _T:
    """Validate ``value`` against ``shape``.

    Raises:
        WireError: naming ``what`` and the first validation problem.
    """
    adapter = _ADAPTERS.get(shape)
    if adapter is None:
        adapter = _ADAPTERS[shape] = TypeAdapter(shape)
    try:
        result: _T = adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise WireError(f"invalid {what}: {where}: {first['msg']}", what=what) from None
    return result


def parse_list(shape: type[_T], value: object, *, what: str) -> list[_T]:
    """Validate a JSON array whose items have ``shape``."""
    if not isinstance(value, list):
        raise WireError(f"invalid {what}: expected an array", what=what)
    return [parse(shape, item, what=what) for item in value]
