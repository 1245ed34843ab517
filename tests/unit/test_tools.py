"""ToolRegistry: every model mistake or handler failure is a structured result, never an exception."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from openab_voice.clock import FakeClock
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ToolCall, ToolSpec
from openab_voice.tools import CLOCK_NOW, ToolContext, ToolRegistry, default_tools

LIGHTS = ToolSpec(
    name="set_lights",
    description="Set the lights.",
    parameters={
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["kitchen", "hall"]},
            "level": {"type": "integer", "description": "0..100"},
            "ratio": {"type": "number"},
            "on": {"type": "boolean"},
        },
        "required": ["room", "on"],
        "additionalProperties": False,
    },
)


def _call(name: str, arguments: str, call_id: str = "call_1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall_start=1_700_000_000.0)  # 2023-11-14T22:13:20Z, a Tuesday


@pytest.fixture
def registry(clock: FakeClock) -> ToolRegistry:
    reg = default_tools(clock)

    async def lights(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"applied": arguments}

    reg.register(LIGHTS, lights)
    return reg


async def test_clock_now_reads_the_injected_clock(registry: ToolRegistry) -> None:
    result = await registry.call(_call(CLOCK_NOW, ""))
    assert result.ok and result.error_code is None
    assert result.content == {"utc": "2023-11-14T22:13:20Z", "weekday": "Tuesday"}
    assert (result.call_id, result.name) == ("call_1", CLOCK_NOW)


async def test_clock_now_in_a_time_zone(registry: ToolRegistry) -> None:
    result = await registry.call(_call(CLOCK_NOW, '{"timezone": "Asia/Tokyo"}'))
    assert result.ok
    assert result.content == {
        "utc": "2023-11-14T22:13:20Z",
        "timezone": "Asia/Tokyo",
        "local": "2023-11-15T07:13:20+09:00",
        "weekday": "Wednesday",
    }
    assert json.loads(result.to_json()) == result.content


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "", "Europe"])
async def test_clock_now_rejects_unknown_zones(registry: ToolRegistry, zone: str) -> None:
    result = await registry.call(_call(CLOCK_NOW, json.dumps({"timezone": zone})))
    assert not result.ok and result.error_code == ErrorCode.TOOL_ARGUMENTS_INVALID
    assert result.reason is not None and "time zone" in result.reason


def test_specs_are_offered_in_registration_order(registry: ToolRegistry) -> None:
    assert [spec.name for spec in registry.specs()] == [CLOCK_NOW, "set_lights"]
    assert "set_lights" in registry and "nope" not in registry


async def test_valid_arguments_reach_the_handler(registry: ToolRegistry) -> None:
    args = {"room": "hall", "on": True, "level": 40, "ratio": 0.5}
    result = await registry.call(_call("set_lights", json.dumps(args)))
    assert result.ok and result.content == {"applied": args}


async def test_unknown_tool_is_rejected(registry: ToolRegistry) -> None:
    result = await registry.call(_call("rm_rf", "{}"))
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_UNKNOWN)
    assert json.loads(result.to_json()) == {
        "error": ErrorCode.TOOL_UNKNOWN,
        "reason": "no tool named 'rm_rf'",
    }


@pytest.mark.parametrize(
    "arguments",
    ['{"room": "hall", "on": tr', "[1, 2]", '"text"', '{"room": "hall", "on": true, "ratio": NaN}'],
)
async def test_malformed_arguments_are_rejected(registry: ToolRegistry, arguments: str) -> None:
    result = await registry.call(_call("set_lights", arguments))
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_ARGUMENTS_MALFORMED)
    assert result.reason


async def test_oversized_arguments_are_rejected_unparsed(clock: FakeClock) -> None:
    reg = ToolRegistry(clock, max_argument_chars=100)

    async def echo(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return arguments

    reg.register(ToolSpec(name="echo", description="echo"), echo)
    result = await reg.call(_call("echo", json.dumps({"x": "y" * 200})))
    assert result.error_code == ErrorCode.TOOL_ARGUMENTS_MALFORMED


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"room": "hall"}, "missing required argument(s): on"),
        ({"room": "hall", "on": True, "colour": "red"}, "unexpected argument(s): colour"),
        ({"room": 3, "on": True}, "'room' must be string, not integer"),
        ({"room": "garage", "on": True}, "'room' must be one of kitchen, hall"),
        ({"room": "hall", "on": "yes"}, "'on' must be boolean, not string"),
        ({"room": "hall", "on": True, "level": 1.5}, "'level' must be integer, not a fraction"),
        ({"room": "hall", "on": True, "level": True}, "'level' must be integer, not boolean"),
        ({"room": "hall", "on": True, "ratio": None}, "'ratio' must be number, not null"),
    ],
)
async def test_schema_violations_are_rejected_with_a_reason(
    registry: ToolRegistry, arguments: dict[str, Any], fragment: str
) -> None:
    result = await registry.call(_call("set_lights", json.dumps(arguments)))
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_ARGUMENTS_INVALID)
    assert result.reason is not None and fragment in result.reason


async def test_handler_exception_is_a_structured_failure(clock: FakeClock) -> None:
    reg = ToolRegistry(clock)

    async def broken(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        raise RuntimeError("database is down")

    reg.register(ToolSpec(name="broken", description="fails"), broken)
    result = await reg.call(_call("broken", "{}"))
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_FAILED)
    assert result.reason == "RuntimeError: database is down"


@pytest.mark.parametrize("value", [["not", "a", "dict"], {"when": object()}, {"x": float("inf")}])
async def test_results_must_be_json_objects(clock: FakeClock, value: Any) -> None:
    reg = ToolRegistry(clock)

    async def odd(arguments: dict[str, Any], context: ToolContext) -> Any:
        return value

    reg.register(ToolSpec(name="odd", description="returns odd things"), odd)
    result = await reg.call(_call("odd", ""))
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_BAD_RESULT)


async def test_timeout_on_the_injected_clock_cancels_the_handler(clock: FakeClock) -> None:
    reg = ToolRegistry(clock, timeout_s=2.0)
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}

    reg.register(ToolSpec(name="slow", description="never ends"), slow)
    pending = asyncio.create_task(reg.call(_call("slow", "{}")))
    await started.wait()
    clock.advance(1.9)
    await asyncio.sleep(0)
    assert not pending.done()
    clock.advance(0.2)
    result = await pending
    assert (result.ok, result.error_code) == (False, ErrorCode.TOOL_TIMEOUT)
    await asyncio.wait_for(cancelled.wait(), 1)


async def test_caller_cancellation_propagates_and_cancels_the_handler(clock: FakeClock) -> None:
    reg = ToolRegistry(clock)
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return {}

    reg.register(ToolSpec(name="slow", description="never ends"), slow)
    pending = asyncio.create_task(reg.call(_call("slow", "{}")))
    await started.wait()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    await asyncio.wait_for(cancelled.wait(), 1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ToolSpec(name="clock.now", description="dots are not allowed by OpenAI"), "must match"),
        (ToolSpec(name="x", description="", parameters={"type": "array"}), "type must be 'object'"),
        (
            ToolSpec(
                name="x",
                description="",
                parameters={"type": "object", "properties": {"a": {"type": "array"}}},
            ),
            "needs a type",
        ),
        (
            ToolSpec(
                name="x",
                description="",
                parameters={"type": "object", "properties": {"a": {"type": "string", "pattern": ".*"}}},
            ),
            "unsupported keywords",
        ),
        (
            ToolSpec(name="x", description="", parameters={"type": "object", "required": ["a"]}),
            "required must",
        ),
        (
            ToolSpec(name="x", description="", parameters={"type": "object", "oneOf": []}),
            "unsupported keywords",
        ),
        (
            ToolSpec(
                name="x",
                description="",
                parameters={"type": "object", "properties": {"a": {"type": "integer", "enum": ["one"]}}},
            ),
            "enum",
        ),
    ],
)
def test_unsupported_specs_fail_at_registration(clock: FakeClock, spec: ToolSpec, message: str) -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match=message):
        ToolRegistry(clock).register(spec, handler)


def test_duplicate_names_fail_at_registration(registry: ToolRegistry) -> None:
    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match="already registered"):
        registry.register(ToolSpec(name=CLOCK_NOW, description="again"), handler)


async def test_trusted_context_reaches_the_handler_and_defaults_to_unknown(clock: FakeClock) -> None:
    seen: list[ToolContext] = []

    async def who(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        seen.append(context)
        return {}

    reg = ToolRegistry(clock)
    reg.register(ToolSpec(name="who", description="who asked"), who)
    await reg.call(_call("who", ""), ToolContext(session_id="s1", turn_id="turn-3", speaker_id="42"))
    await reg.call(_call("who", ""))
    assert seen == [
        ToolContext(session_id="s1", turn_id="turn-3", speaker_id="42", call_id="call_1"),
        ToolContext(call_id="call_1"),
    ]
