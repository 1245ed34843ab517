"""The wire format, in the ``openai`` package's own models and nothing else.

Client events are parsed into the SDK's ``RealtimeClientEvent`` members (the one named by ``type``,
validated, with every field the SDK does not model refused as the real API refuses an unknown
parameter); server events are SDK ``RealtimeServerEvent`` members serialized with the SDK's own
``to_json``. So the loopback server cannot send or accept what the SDK does not describe.

A message that does not parse becomes a :class:`ParseFailure`: the ``error`` event's fields, in the
shape the real API uses (``invalid_request_error`` with ``code``, ``param`` and the client's
``event_id``).
"""

from __future__ import annotations

import itertools
import json
import secrets
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import pydantic
from openai._models import BaseModel as SdkModel
from openai.types.realtime import RealtimeError, RealtimeErrorEvent
from openai.types.realtime.realtime_client_event import RealtimeClientEvent
from openai.types.realtime.realtime_server_event import RealtimeServerEvent

__all__ = [
    "ClientEvent",
    "ParseFailure",
    "Refused",
    "ServerEvent",
    "client_event_classes",
    "describe_validation_error",
    "dump_server_event",
    "error_event",
    "members",
    "new_id",
    "parse_client_event",
    "parse_event",
    "server_event_classes",
    "unknown_parameters",
]

ClientEvent: TypeAlias = RealtimeClientEvent
ServerEvent: TypeAlias = RealtimeServerEvent

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """An id shaped like the real API's (``event_...``, ``item_...``, ``resp_...``), unique per process."""
    return f"{prefix}_{next(_ids):06d}{secrets.token_hex(5)}"


def members(union: object) -> dict[str, type[SdkModel]]:
    """``type`` literal -> model class, for a discriminated SDK union (``Annotated[Union[...], ...]``)."""
    inner = typing.get_args(union)[0]
    table: dict[str, type[SdkModel]] = {}
    for cls in typing.get_args(inner):
        (literal,) = typing.get_args(cls.model_fields["type"].annotation)
        table[literal] = cls
    return table


_CLIENT = members(RealtimeClientEvent)
_SERVER = members(RealtimeServerEvent)


def client_event_classes() -> Mapping[str, type[SdkModel]]:
    """Every client event the SDK models, by its ``type``."""
    return dict(_CLIENT)


def server_event_classes() -> Mapping[str, type[SdkModel]]:
    """Every server event the SDK models, by its ``type``."""
    return dict(_SERVER)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseFailure:
    """Why a client message was refused: the fields of the ``error`` event sent back.

    Attributes:
        code: the real API's code (``invalid_json``, ``invalid_value``, ``missing_required_parameter``,
            ``invalid_type``, ``unknown_parameter``).
        message: human-readable, naming the parameter.
        param: the offending parameter's path (``item.content``), or None.
        event_id: the client's ``event_id`` when the message had one.
        raw: the message as received (text; binary frames decoded with replacement).
    """

    code: str
    message: str
    param: str | None
    event_id: str | None
    raw: str


Refused = tuple[str, str, str | None]
"""A refusal's ``code``, ``message`` and ``param``."""


def parse_client_event(raw: str | bytes) -> ClientEvent | ParseFailure:
    """Parse one websocket message into the SDK's client event model, or say why not."""
    return typing.cast(ClientEvent | ParseFailure, parse_event(raw, _CLIENT))


def parse_event(
    raw: str | bytes,
    classes: Mapping[str, type[SdkModel]],
    check: Callable[[str, SdkModel], Refused | None] | None = None,
) -> SdkModel | ParseFailure:
    """Parse one websocket message into the member of ``classes`` its ``type`` names, or say why not.

    The member is validated and any field it does not declare refused; ``check`` (given the
    ``type`` and the event) may refuse what the SDK's model lets through.
    """
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        data: object = json.loads(text)
    except ValueError as exc:
        return _fail(("invalid_json", f"Invalid JSON: {exc}", None), None, text)
    if not isinstance(data, dict):
        return _fail(("invalid_type", "Invalid type: the event must be a JSON object.", None), None, text)
    event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
    kind = data.get("type")
    cls = classes.get(kind) if isinstance(kind, str) else None
    if not isinstance(kind, str) or cls is None:
        supported = ", ".join(f"'{name}'" for name in sorted(classes))
        message = f"Invalid value: {kind!r}. Supported values are: {supported}."
        return _fail(("invalid_value", message, "type"), event_id, text)
    try:
        event = cls.model_validate(data)
    except pydantic.ValidationError as exc:
        return _fail(describe_validation_error(exc), event_id, text)
    extras = list(unknown_parameters(event))
    if extras:
        return _fail(("unknown_parameter", f"Unknown parameter: '{extras[0]}'.", extras[0]), event_id, text)
    refused = check(kind, event) if check is not None else None
    return event if refused is None else _fail(refused, event_id, text)


def _fail(refused: Refused, event_id: str | None, raw: str) -> ParseFailure:
    code, message, param = refused
    return ParseFailure(code=code, message=message, param=param, event_id=event_id, raw=raw)


def describe_validation_error(exc: pydantic.ValidationError) -> Refused:
    """The first validation error as the real API words it. Union members' class names are not
    parameters, so they are dropped from the path."""
    first = exc.errors()[0]
    path = [str(part) for part in first["loc"] if not (isinstance(part, str) and part[:1].isupper())]
    param = ".".join(path) or None
    kind = first["type"]
    if kind == "missing":
        return "missing_required_parameter", f"Missing required parameter: '{param}'.", param
    if kind.endswith("_type") or kind in {"model_type", "dict_type", "list_type"}:
        return "invalid_type", f"Invalid type for '{param}': {first['msg']}.", param
    return "invalid_value", f"Invalid value for '{param}': {first['msg']}.", param


def unknown_parameters(model: SdkModel, prefix: str = "") -> Iterator[str]:
    """Paths of fields the SDK's models do not declare (they accept extras; the real API does not)."""
    for name in model.model_extra or {}:
        yield f"{prefix}{name}"
    for name in type(model).model_fields:
        yield from _unknown_in(getattr(model, name), f"{prefix}{name}")


def _unknown_in(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, SdkModel):
        yield from unknown_parameters(value, f"{path}.")
    elif isinstance(value, list):
        for i, element in enumerate(value):
            yield from _unknown_in(element, f"{path}[{i}]")


def dump_server_event(event: ServerEvent) -> str:
    """The JSON text sent for ``event``: the SDK's own serializer, API field names, unset fields left out."""
    return event.to_json(use_api_names=True, exclude_unset=True, indent=None)


def error_event(
    *,
    message: str,
    type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
    client_event_id: str | None = None,
) -> RealtimeErrorEvent:
    """An ``error`` server event as the real API sends it (``event_id`` is the server's own; the client
    event that caused it is named in ``error.event_id``)."""
    return RealtimeErrorEvent(
        type="error",
        event_id=new_id("event"),
        error=RealtimeError(message=message, type=type, code=code, param=param, event_id=client_event_id),
    )
