"""Fuzzing what arrives as structured text: voice gateway messages the bot's hook sees, button ids
from interactions, MLS structures clients send the emulator, scenario files and tool-call arguments.

Allowed outcomes per target: accepted, or one documented rejection (counted by reason). Anything
else that escapes is a crash and fails the test."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openab_voice.actions.ports import DECISIONS, button_id, parse_button_id
from openab_voice.actions.tools import SPECS
from openab_voice.bus.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.demo.scenario import load_scenario
from openab_voice.discord.receiver import VoiceReceiver
from openab_voice.discord.transport import XCHACHA
from openab_voice.discord.voice_client import ReceivingVoiceClient
from openab_voice.errors import EmulatorError
from openab_voice.providers.speech import ToolCall
from openab_voice.testing.emulator.mls import DaveGroup
from openab_voice.testing.emulator.mls_wire import MlsWireError, key_package_user_id, split_commit_welcome
from openab_voice.testing.emulator.wire import (
    GatewayFrame,
    SelectProtocolData,
    VoiceIdentifyData,
    VoiceResumeData,
    WireError,
    parse,
)
from openab_voice.tools.registry import ToolContext, ToolRegistry, default_tools

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


# --- voice gateway messages through the bot's hook --------------------------------------------------


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _voice_client() -> tuple[ReceivingVoiceClient, list[tuple[int, dict[str, Any]]]]:
    """A ReceivingVoiceClient without a discord.py connection behind it: the hook and op handling
    are ours; what discord.py itself does with the message is discord.py's."""
    ops: list[tuple[int, dict[str, Any]]] = []
    vc = ReceivingVoiceClient.__new__(ReceivingVoiceClient)
    vc.receiver = VoiceReceiver(bus=EventBus(), clock=FakeClock())
    vc._on_voice_op = lambda _vc, op, data: ops.append((op, data))
    vc._listening = True
    vc._connection = SimpleNamespace(  # type: ignore[assignment]
        mode=XCHACHA, secret_key=list(range(32)), dave_protocol_version=0, dave_session=None
    )
    return vc, ops


# discord.py indexes msg["op"] and msg["d"] before it awaits the hook (DiscordVoiceWebSocket.
# received_message), so every message the hook sees is an object with both keys.
voice_messages = st.one_of(
    st.fixed_dictionaries(
        {"op": st.one_of(st.integers(0, 40), json_scalars), "d": json_values},
        optional={"seq": json_scalars},
    ),
    st.fixed_dictionaries(
        {
            "op": st.sampled_from([5, 13]),
            "d": st.fixed_dictionaries(
                {},
                optional={"user_id": json_scalars, "ssrc": json_scalars, "speaking": json_scalars},
            ),
        }
    ),
)


@given(voice_messages)
def test_voice_ws_hook(tally: Counter[str], msg: Any) -> None:
    vc, ops = _voice_client()
    errors = _Errors()
    logger = logging.getLogger("openab_voice.discord.voice_client")
    logger.addHandler(errors)
    try:
        run(vc._voice_ws_hook(None, msg))
    finally:
        logger.removeHandler(errors)
    if errors.records:
        tally[f"rejected:op {msg.get('op')} raised (logged)"] += 1
    elif ops:
        op = ops[0][0]
        tally[f"handled:op {op}" if type(op) is int and 0 <= op <= 31 else "handled:op out of range"] += 1
    else:
        tally["ignored:not an op object"] += 1


@given(
    st.one_of(
        st.text(max_size=80),
        st.builds(button_id, st.sampled_from([*DECISIONS, "", "yes"]), st.text(max_size=20)),
    )
)
def test_button_custom_id(tally: Counter[str], custom_id: str) -> None:
    parsed = parse_button_id(custom_id)
    if parsed is None:
        tally["rejected:not ours"] += 1
        return
    tally["accepted"] += 1
    assert button_id(*parsed) == custom_id


# --- what clients send the emulator -----------------------------------------------------------------

_GROUP = DaveGroup(55_000, [1, 2])
_KP = bytes(_GROUP.sessions[1].get_serialized_key_package())
_COMMIT = _GROUP.last_commit or b""


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    return st.builds(
        lambda at, xor, cut: bytes(b ^ (xor if i == at else 0) for i, b in enumerate(seed))[:cut],
        st.integers(0, len(seed)),
        st.integers(0, 255),
        st.integers(0, len(seed) + 1),
    )


@given(st.one_of(st.binary(max_size=300), _mutations(_KP)))
def test_key_package_identity(tally: Counter[str], data: bytes) -> None:
    try:
        user_id = key_package_user_id(data)
    except MlsWireError as exc:
        tally[f"rejected:{str(exc).split(' at ')[0][:40]}"] += 1
        return
    tally["accepted"] += 1
    assert 0 <= user_id < 2**64


@given(st.one_of(st.binary(max_size=300), _mutations(_COMMIT + b"\x00\x02" + bytes(30))))
def test_commit_welcome_split(tally: Counter[str], data: bytes) -> None:
    try:
        commit, welcome = split_commit_welcome(data)
    except MlsWireError as exc:
        tally[f"rejected:{str(exc).split(' at ')[0][:40]}"] += 1
        return
    tally["accepted"] += 1
    assert commit + (welcome or b"") == data


snowflakes = st.one_of(st.integers(0, 2**64), st.integers(0, 2**64).map(str), json_scalars)
wire_values = st.one_of(
    json_values,
    st.fixed_dictionaries({"op": json_scalars, "d": json_values}),
    st.fixed_dictionaries(
        {"server_id": snowflakes, "session_id": json_scalars, "token": json_scalars},
        optional={"user_id": snowflakes, "seq_ack": json_scalars, "max_dave_protocol_version": json_scalars},
    ),
    st.fixed_dictionaries(
        {
            "protocol": st.sampled_from(["udp", "webrtc", ""]),
            "data": st.fixed_dictionaries(
                {
                    "address": json_scalars,
                    "port": st.one_of(st.integers(-5, 70000), json_scalars),
                    "mode": json_scalars,
                }
            ),
        }
    ),
)


@given(st.sampled_from([GatewayFrame, VoiceIdentifyData, SelectProtocolData, VoiceResumeData]), wire_values)
def test_emulator_wire_shapes(tally: Counter[str], shape: Any, value: Any) -> None:
    try:
        parse(shape, value, what=shape.__name__)
    except WireError:
        tally[f"rejected:{shape.__name__}"] += 1
        return
    tally[f"accepted:{shape.__name__}"] += 1


# --- scenario files --------------------------------------------------------------------------------

_VALID = {
    "speakers": [{"id": "1001", "name": "alice", "audio": [{"at": 0.5, "say": "hello"}]}],
    "events": [
        {"at": 9.0, "voice": "close", "code": 4015},
        {"at": 10.0, "slash": "voice status", "by": "1001"},
    ],
}


def _perturb(value: Any, path: list[Any], replacement: Any) -> Any:
    if not path:
        return replacement
    head, *rest = path
    if isinstance(value, dict) and value:
        key = list(value)[head % len(value)]
        return {**value, key: _perturb(value[key], rest, replacement)}
    if isinstance(value, list) and value:
        i = head % len(value)
        return [*value[:i], _perturb(value[i], rest, replacement), *value[i + 1 :]]
    return replacement


scenario_texts = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.builds(
        lambda path, new: json.dumps(_perturb(_VALID, path, new)),
        st.lists(st.integers(0, 5), max_size=4),
        json_values,
    ),
)


@given(scenario_texts)
def test_scenario_file(tally: Counter[str], tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("scenario", numbered=True) / "scenario.json"
    path.write_text(text, encoding="utf-8")
    try:
        load_scenario(path)
    except EmulatorError as exc:
        assert exc.code in ("SCENARIO_INVALID", "SCENARIO_FILE_MISSING"), exc.code
        field = str(exc.details.get("field", "")).split(".")[0]
        tally[f"rejected:{exc.code}{':' + field if field else ''}"] += 1
        return
    finally:
        path.unlink()
    tally["accepted"] += 1


# --- tool-call arguments ---------------------------------------------------------------------------


async def _echo(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    return {"got": sorted(arguments)}


def _registry() -> ToolRegistry:
    registry = default_tools(FakeClock())
    for spec in SPECS:  # the semantic action tools' real schemas, with a stand-in handler
        registry.register(spec, _echo)
    return registry


_TOOL_NAMES = ["clock_now", *(spec.name for spec in SPECS), "rm_rf", ""]
tool_arguments = st.one_of(
    st.text(max_size=60),
    json_values.map(json.dumps),
    st.dictionaries(
        st.sampled_from(["goal", "effect_hint", "action_id", "timezone", "x"]), json_values, max_size=3
    ).map(json.dumps),
    st.fixed_dictionaries(
        {"goal": st.text(max_size=30)},
        optional={"effect_hint": st.sampled_from(["read_only", "workspace_write", "external", "root", ""])},
    ).map(json.dumps),
    st.fixed_dictionaries({"action_id": st.text(max_size=12)}).map(json.dumps),
    st.fixed_dictionaries(
        {}, optional={"timezone": st.sampled_from(["UTC", "Europe/Paris", "Mars/Base", ""])}
    ).map(json.dumps),
    st.just("NaN"),
    st.just('{"goal": Infinity}'),
)


@given(st.sampled_from(_TOOL_NAMES), tool_arguments)
def test_tool_call_arguments(tally: Counter[str], name: str, arguments: str) -> None:
    result = run(_registry().call(ToolCall(id="c1", name=name, arguments=arguments)))
    if result.ok:
        tally[f"accepted:{name}"] += 1
        json.loads(result.to_json())
    else:
        assert result.error_code and result.reason, result
        tally[f"rejected:{result.error_code}"] += 1
