"""Tool registry: the tools, their schemas and handlers, underneath the ToolRouter (ADR 0011).

:meth:`ToolRegistry.call` never raises for anything the model did: an unknown tool, arguments that
are not a JSON object or break the schema, a handler that fails or overruns its timeout (on the
injected clock) come back as a rejected or error :class:`ToolResult` the model can read. Only the
caller's cancellation propagates. Schemas are a small JSON-schema subset checked at registration
(``type: object``, ``properties`` of type ``string`` / ``number`` / ``integer`` / ``boolean`` with
``description`` and ``enum``, ``required``, ``additionalProperties: false``); tool names follow the
OpenAI rule ``^[A-Za-z0-9_-]{1,64}$`` (hence ``clock_now``). Details: docs/adr/0011-tool-router-boundary.md.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from openab_voice.clock import Clock
from openab_voice.errors import ErrorCode, ToolInputError
from openab_voice.providers.chat import ToolCall, ToolSpec

__all__ = [
    "CLOCK_NOW",
    "ToolContext",
    "ToolHandler",
    "ToolRegistry",
    "ToolResult",
    "default_tools",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Trusted facts about a tool call, from server-side state, never from the model.

    Attributes:
        session_id: the voice session the call was made in.
        turn_id: the dialogue turn (None for a call outside a turn).
        speaker_id: the Discord user whose speech started the turn, from SSRC attribution; None when
            the turn had no single attributed speaker (a resume, an announcement).
        call_id: the provider's id for this call (set by :meth:`ToolRegistry.call`); a provider that
            retries a call reuses it, which makes it an idempotency key.
    """

    session_id: str | None = None
    turn_id: str | None = None
    speaker_id: str | None = None
    call_id: str | None = None


ToolHandler = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]
"""An async handler: validated arguments and the trusted call context in, a JSON-serializable dict out."""


CLOCK_NOW: Final = "clock_now"

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int, float),
    "boolean": (bool,),
}
_SCHEMA_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description"})
_PROPERTY_KEYS = frozenset({"type", "description", "enum"})
_MAX_REASON = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of one tool call, fed back to the model as the tool message.

    Attributes:
        call_id: the model's id for the call.
        name: the tool it named.
        ok: the handler ran and returned ``content``.
        content: the handler's result (empty when not ok).
        error_code: one of the ``TOOL_*`` codes when not ok.
        reason: why, in words the model can act on (never a traceback).
    """

    call_id: str
    name: str
    ok: bool
    content: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None
    reason: str | None = None

    def to_json(self) -> str:
        """The tool message text for the model: the content, or the error and its reason."""
        if self.ok:
            return json.dumps(self.content, ensure_ascii=False)
        return json.dumps({"error": self.error_code, "reason": self.reason}, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _Tool:
    spec: ToolSpec
    handler: ToolHandler
    timeout_s: float


class ToolRegistry:
    """Named tools with schemas, handlers and timeouts.

    Args:
        clock: the injected clock; timeouts are measured on it.
        timeout_s: default per-call timeout.
        max_argument_chars: longer argument text is rejected unparsed.
    """

    def __init__(self, clock: Clock, *, timeout_s: float = 5.0, max_argument_chars: int = 16_000) -> None:
        self._clock = clock
        self._timeout_s = timeout_s
        self._max_argument_chars = max_argument_chars
        self._tools: dict[str, _Tool] = {}

    def register(self, spec: ToolSpec, handler: ToolHandler, *, timeout_s: float | None = None) -> None:
        """Add a tool.

        Raises:
            ValueError: the name is taken or invalid, or the schema is outside the supported subset
                (a programming error, caught at start-up).
        """
        if not _NAME.fullmatch(spec.name):
            raise ValueError(f"tool name {spec.name!r} must match ^[A-Za-z0-9_-]{{1,64}}$")
        if spec.name in self._tools:
            raise ValueError(f"tool {spec.name!r} is already registered")
        _check_schema(spec.name, spec.parameters)
        timeout = self._timeout_s if timeout_s is None else timeout_s
        if timeout <= 0:
            raise ValueError("timeout_s must be positive")
        self._tools[spec.name] = _Tool(spec, handler, timeout)

    def specs(self) -> list[ToolSpec]:
        """The registered tools, in registration order, to offer to a model."""
        return [tool.spec for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def spec(self, name: str) -> ToolSpec | None:
        """The registered tool's spec, or None."""
        tool = self._tools.get(name)
        return None if tool is None else tool.spec

    async def call(
        self, call: ToolCall, context: ToolContext | None = None, *, timeout_s: float | None = None
    ) -> ToolResult:
        """Validate and run one tool call; every failure is a result, never an exception.

        Args:
            call: the model's call (untrusted).
            context: who and where, from server-side state (default: nothing known).
            timeout_s: a tighter bound than the tool's own timeout (a caller's remaining budget).

        Raises:
            asyncio.CancelledError: only when the caller is cancelled (the handler is cancelled too).
        """
        tool = self._tools.get(call.name)
        if tool is None:
            return _rejected(call, ErrorCode.TOOL_UNKNOWN, f"no tool named {call.name[:64]!r}")
        arguments = self._parse(call.arguments)
        if isinstance(arguments, str):
            return _rejected(call, ErrorCode.TOOL_ARGUMENTS_MALFORMED, arguments)
        problem = _violation(tool.spec.parameters, arguments)
        if problem is not None:
            return _rejected(call, ErrorCode.TOOL_ARGUMENTS_INVALID, problem)
        limit = tool.timeout_s if timeout_s is None else max(0.0, min(tool.timeout_s, timeout_s))
        try:
            content = await self._run(
                tool, arguments, replace(context or ToolContext(), call_id=call.id), limit
            )
        except TimeoutError:
            return _rejected(call, ErrorCode.TOOL_TIMEOUT, f"no result within {limit:g} s")
        except ToolInputError as exc:
            return _rejected(call, ErrorCode.TOOL_ARGUMENTS_INVALID, exc.message)
        except Exception as exc:  # a handler bug must not end the conversation
            return _rejected(call, ErrorCode.TOOL_FAILED, f"{type(exc).__name__}: {exc}")
        if not isinstance(content, dict):
            return _rejected(
                call, ErrorCode.TOOL_BAD_RESULT, f"handler returned {type(content).__name__}, not an object"
            )
        try:
            json.dumps(content, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return _rejected(call, ErrorCode.TOOL_BAD_RESULT, f"result is not JSON: {exc}")
        return ToolResult(call_id=call.id, name=call.name, ok=True, content=content)

    def _parse(self, text: str) -> dict[str, Any] | str:
        """The arguments object, or a reason why the text is not one."""
        if len(text) > self._max_argument_chars:
            return f"arguments longer than {self._max_argument_chars} characters"
        if not text.strip():
            return {}  # models send "" for tools without parameters
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:
            return f"arguments are not valid JSON: {exc}"
        if not isinstance(value, dict):
            return f"arguments must be a JSON object, not {type(value).__name__}"
        return value

    async def _run(
        self, tool: _Tool, arguments: dict[str, Any], context: ToolContext, timeout_s: float
    ) -> Any:
        """Run the handler, racing it against the clock.

        Raises:
            TimeoutError: the clock passed the tool's timeout first (the handler is cancelled).
        """
        work = asyncio.ensure_future(tool.handler(arguments, context))
        timer = asyncio.ensure_future(self._clock.sleep(timeout_s))
        try:
            done, _ = await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                # Timed out or the caller was cancelled. The handler unwinds on its own; nothing
                # waits for it here, so a handler that ignores cancellation cannot stall the caller.
                work.cancel()
                work.add_done_callback(_consume)
        if work in done:
            return work.result()
        raise TimeoutError


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned handler's outcome so asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _rejected(call: ToolCall, code: str, reason: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, ok=False, error_code=code, reason=reason[:_MAX_REASON])


def _check_schema(name: str, schema: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``schema`` is inside the supported JSON-schema subset."""
    where = f"tool {name!r} parameters"
    if schema.get("type") != "object":
        raise ValueError(f"{where}: type must be 'object'")
    unknown = set(schema) - _SCHEMA_KEYS
    if unknown:
        raise ValueError(f"{where}: unsupported keywords {sorted(unknown)}")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ValueError(f"{where}: properties must be an object")
    for key, prop in properties.items():
        if not isinstance(prop, dict) or prop.get("type") not in _TYPES:
            raise ValueError(f"{where}: property {key!r} needs a type among {sorted(_TYPES)}")
        if set(prop) - _PROPERTY_KEYS:
            raise ValueError(
                f"{where}: property {key!r} has unsupported keywords {sorted(set(prop) - _PROPERTY_KEYS)}"
            )
        enum = prop.get("enum")
        if enum is not None and (
            not isinstance(enum, list) or not enum or any(_type_error(prop["type"], v) for v in enum)
        ):
            raise ValueError(f"{where}: property {key!r} enum must be a non-empty list of its type")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise ValueError(f"{where}: required must list declared properties")
    if not isinstance(schema.get("additionalProperties", True), bool):
        raise ValueError(f"{where}: additionalProperties must be true or false")


def _violation(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` break ``schema`` (already checked by :func:`_check_schema`), or None."""
    properties: dict[str, Any] = schema.get("properties", {})
    missing = [key for key in schema.get("required", []) if key not in arguments]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    if schema.get("additionalProperties") is False:
        extra = sorted(set(arguments) - set(properties))
        if extra:
            return f"unexpected argument(s): {', '.join(extra)[:100]}"
    for key, value in arguments.items():
        prop = properties.get(key)
        if prop is None:
            continue
        error = _type_error(prop["type"], value)
        if error is not None:
            return f"argument {key!r} {error}"
        enum = prop.get("enum")
        if enum is not None and value not in enum:
            return f"argument {key!r} must be one of {', '.join(map(str, enum))[:100]}"
    return None


def _type_error(expected: str, value: Any) -> str | None:
    # bool is an int subclass in Python but not a number in JSON.
    if isinstance(value, bool) and expected != "boolean":
        return f"must be {expected}, not boolean"
    if not isinstance(value, _TYPES[expected]):
        return f"must be {expected}, not {_json_type(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    if expected == "integer" and isinstance(value, float) and not value.is_integer():
        return "must be integer, not a fraction"
    return None


def _json_type(value: Any) -> str:
    names = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# --- built-in tools ---------------------------------------------------------------------------------

CLOCK_NOW_SPEC: Final = ToolSpec(
    name=CLOCK_NOW,
    description=(
        "Current date and time. Returns UTC, and local time in the given IANA time zone "
        "(for example Europe/Paris) when one is asked for."
    ),
    parameters={
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA time zone name, e.g. America/New_York"},
        },
        "additionalProperties": False,
    },
)


def clock_now_handler(clock: Clock) -> ToolHandler:
    """The ``clock_now`` handler, reading the injected clock's wall time."""

    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        now = datetime.fromtimestamp(clock.wall(), tz=UTC)
        result: dict[str, Any] = {"utc": now.isoformat(timespec="seconds").replace("+00:00", "Z")}
        name = arguments.get("timezone")
        if name is not None:
            try:
                zone = ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError, OSError):
                raise ToolInputError(
                    f"unknown time zone {name[:64]!r}; use an IANA name like Europe/Paris"
                ) from None
            local = now.astimezone(zone)
            result |= {
                "timezone": name,
                "local": local.isoformat(timespec="seconds"),
                "weekday": local.strftime("%A"),
            }
        else:
            result["weekday"] = now.strftime("%A")
        return result

    return handler


def default_tools(clock: Clock) -> ToolRegistry:
    """A registry holding the harmless built-in tools (``clock_now``)."""
    registry = ToolRegistry(clock)
    registry.register(CLOCK_NOW_SPEC, clock_now_handler(clock))
    return registry
