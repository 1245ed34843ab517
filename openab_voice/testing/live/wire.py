"""The Live wire format, in the ``openai`` package's own ``openai.types.live`` models and nothing else.

Client events are parsed into the SDK's ``ClientEvent`` members (the one named by ``type``,
validated, with every field the SDK does not model refused as the real API refuses an unknown
parameter); server events are SDK ``ServerEvent`` members serialized with the SDK's own ``to_json``
(API names, unset fields left out: ``session.output_audio.delta`` has no ``start_ms`` / ``end_ms``
on a primary socket because none is set). So the loopback cannot send or accept what the SDK does
not describe.

The SDK's own parser is lenient where the server must not be: ``parse_event`` builds an unknown
``type`` as the first union member (``SessionStartedEvent``) and the models default
``delegation_id`` to None although the API calls it "Required, nullable" (the ``*Param``
TypedDicts say ``Required[Optional[str]]``). Here an unknown ``type`` is refused, and so is an
``*.append`` without ``delegation_id``.

Ids, the :class:`~openab_voice.testing.realtime.wire.ParseFailure` shape, the union table and the
parser itself (validation errors worded as the API words them, the unknown-parameter walk) are the
realtime loopback's (:mod:`openab_voice.testing.realtime.wire`); only the check above is Live's.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from openai._models import BaseModel as SdkModel
from openai.types.live import Error, ErrorEvent
from openai.types.live.client_event import ClientEvent as SdkClientEvent
from openai.types.live.server_event import ServerEvent as SdkServerEvent

from openab_voice.testing.realtime.wire import ParseFailure, Refused, members, new_id, parse_event

__all__ = [
    "ClientEvent",
    "ParseFailure",
    "Refusal",
    "ServerEvent",
    "client_event_classes",
    "dump_server_event",
    "echo",
    "error_event",
    "new_id",
    "parse_client_event",
    "server_event_classes",
]

ClientEvent: TypeAlias = SdkClientEvent
ServerEvent: TypeAlias = SdkServerEvent

NULLABLE_REQUIRED: typing.Final = frozenset(
    {"session.instructions.append", "session.thinking.append", "session.commentary.append"}
)
"""Client events whose ``delegation_id`` must be present, possibly null ("Required, nullable")."""


_CLIENT = members(SdkClientEvent)
_SERVER = members(SdkServerEvent)


def client_event_classes() -> Mapping[str, type[SdkModel]]:
    """Every Live client event the SDK models, by its ``type``."""
    return dict(_CLIENT)


def server_event_classes() -> Mapping[str, type[SdkModel]]:
    """Every Live server event the SDK models, by its ``type``."""
    return dict(_SERVER)


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """A well-formed command the session will not carry out: the ``error`` event's fields."""

    code: str
    message: str
    param: str | None = None


def parse_client_event(raw: str | bytes) -> ClientEvent | ParseFailure:
    """Parse one websocket message into the SDK's Live client event model, or say why not."""
    return typing.cast(ClientEvent | ParseFailure, parse_event(raw, _CLIENT, _nullable_required))


def _nullable_required(kind: str, event: SdkModel) -> Refused | None:
    if kind in NULLABLE_REQUIRED and "delegation_id" not in event.model_fields_set:
        message = "Missing required parameter: 'delegation_id' (send null for general session context)."
        return "missing_required_parameter", message, "delegation_id"
    return None


def dump_server_event(event: ServerEvent) -> str:
    """The JSON text sent for ``event``: the SDK's own serializer, API field names, unset fields left out."""
    return event.to_json(use_api_names=True, exclude_unset=True, indent=None)


def echo(client_event_id: str | None) -> dict[str, str]:
    """``client_event_id`` for a server event answering a client command, only when it had one."""
    return {"client_event_id": client_event_id} if client_event_id is not None else {}


def error_event(
    *,
    code: str,
    message: str,
    type: str = "invalid_request_error",
    param: str | None = None,
    client_event_id: str | None = None,
) -> ErrorEvent:
    """An ``error`` server event: the server's own ``event_id``, the client command that caused it in
    both ``client_event_id`` and ``error.client_event_id`` (unlike Realtime's ``error.event_id``)."""
    error = Error(code=code, message=message, type=type, param=param, **echo(client_event_id))
    return ErrorEvent(type="error", event_id=new_id("event"), error=error, **echo(client_event_id))
