"""Fuzzing what arrives as structured text: voice gateway messages the bot's hook sees, button ids
from interactions, MLS structures clients send the emulator, scenario files and tool-call arguments.

Allowed outcomes per target: accepted, or one documented rejection (counted by reason). Anything
else that escapes, or a rejection no caller should ever see (a handler that raised), fails the test;
each target asserts its tally once its examples ran (``tests/fuzz/tallies.py``)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from openab_voice.actions.ports import DECISIONS, button_id, parse_button_id
from openab_voice.actions.tools import SPECS
from openab_voice.bus.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.demo.scenario import load_scenario
from openab_voice.discord.wire.receiver import VoiceReceiver
from openab_voice.discord.wire.transport import XCHACHA
from openab_voice.discord.wire.voice_client import (
    OP_FAILED,
    OP_HANDLED,
    OP_NOT_AN_OP,
    OP_REJECTED,
    ReceivingVoiceClient,
)
from openab_voice.errors import EmulatorError, ErrorCode, MlsWireError, WireError
from openab_voice.providers.chat import ToolCall
from openab_voice.testing.emulator.mls import DaveGroup
from openab_voice.testing.emulator.mls_wire import key_package_user_id, split_commit_welcome
from openab_voice.testing.emulator.wire import (
    GatewayFrame,
    SelectProtocolData,
    VoiceIdentifyData,
    VoiceResumeData,
    parse,
)
from openab_voice.tools.registry import ToolContext, ToolRegistry, default_tools
from tests.fuzz.tallies import ACCEPTED, REJECTED, Tally

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


def _voice_client() -> tuple[ReceivingVoiceClient, list[tuple[int, dict[str, Any]]]]:
    """A ReceivingVoiceClient without a discord.py connection behind it: the hook and op handling
    are ours; what discord.py itself does with the message is discord.py's."""
    ops: list[tuple[int, dict[str, Any]]] = []
    vc = ReceivingVoiceClient.__new__(ReceivingVoiceClient)
    vc.receiver = VoiceReceiver(bus=EventBus(), clock=FakeClock())
    vc.op_outcomes = Counter()
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


def test_voice_ws_hook(tally: Tally) -> None:
    """The hook's own count says what it did with each message: handled (and passed on), ignored,
    or rejected by reason (and not passed on). ``failed`` (handling raised) is a bug, never a way
    to reject input: the first message that fails is the test's counterexample."""

    @example({"op": 5, "d": {"user_id": "101", "ssrc": 0x1111, "speaking": 1}})
    @example({"op": 5, "d": {"user_id": "101", "ssrc": "4369"}})
    @example({"op": "5", "d": {}})
    @given(voice_messages)
    def target(msg: Any) -> None:
        tally.inputs += 1
        vc, ops = _voice_client()
        run(vc._voice_ws_hook(None, msg))
        assert vc.op_outcomes[OP_FAILED] == 0, f"the hook failed on {msg!r}"
        [(outcome, times)] = vc.op_outcomes.items()
        assert times == 1, vc.op_outcomes
        assert bool(ops) is (outcome == OP_HANDLED), (outcome, ops)
        tally.counts[outcome] += 1

    target()
    tally.check(buckets=(OP_HANDLED, OP_NOT_AN_OP, OP_REJECTED))


def test_button_custom_id(tally: Tally) -> None:
    @example(button_id(DECISIONS[0], "a1"))
    @example("hello")
    @given(
        st.one_of(
            st.text(max_size=80),
            st.builds(button_id, st.sampled_from([*DECISIONS, "", "yes"]), st.text(max_size=20)),
        )
    )
    def target(custom_id: str) -> None:
        tally.inputs += 1
        parsed = parse_button_id(custom_id)
        if parsed is None:
            tally.counts[REJECTED + "not ours"] += 1
            return
        tally.counts[ACCEPTED] += 1
        assert button_id(*parsed) == custom_id

    target()
    tally.check()


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


def _mls_rejected(tally: Tally, exc: MlsWireError) -> None:
    tally.counts[REJECTED + str(exc).split(" at ")[0][:40]] += 1


def test_key_package_identity(tally: Tally) -> None:
    @example(_KP)
    @example(b"")
    @given(st.one_of(st.binary(max_size=300), _mutations(_KP)))
    def target(data: bytes) -> None:
        tally.inputs += 1
        try:
            user_id = key_package_user_id(data)
        except MlsWireError as exc:
            _mls_rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1
        assert 0 <= user_id < 2**64

    target()
    tally.check()


_COMMIT_WELCOME = _COMMIT + b"\x00\x02" + bytes(30)


def test_commit_welcome_split(tally: Tally) -> None:
    @example(_COMMIT)
    @example(b"")
    @given(st.one_of(st.binary(max_size=300), _mutations(_COMMIT_WELCOME)))
    def target(data: bytes) -> None:
        tally.inputs += 1
        try:
            commit, welcome = split_commit_welcome(data)
        except MlsWireError as exc:
            _mls_rejected(tally, exc)
            return
        tally.counts[ACCEPTED] += 1
        assert commit + (welcome or b"") == data

    target()
    tally.check()


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


def test_emulator_wire_shapes(tally: Tally) -> None:
    @example(GatewayFrame, {"op": 1, "d": {}})
    @example(VoiceIdentifyData, 5)
    @given(
        st.sampled_from([GatewayFrame, VoiceIdentifyData, SelectProtocolData, VoiceResumeData]), wire_values
    )
    def target(shape: Any, value: Any) -> None:
        tally.inputs += 1
        try:
            parse(shape, value, what=shape.__name__)
        except WireError:
            tally.counts[f"{REJECTED}{shape.__name__}"] += 1
            return
        tally.counts[f"{ACCEPTED}:{shape.__name__}"] += 1

    target()
    tally.check()


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


def test_scenario_file(tally: Tally, tmp_path_factory: pytest.TempPathFactory) -> None:
    @example(json.dumps(_VALID))
    @example("")
    @given(scenario_texts)
    def target(text: str) -> None:
        tally.inputs += 1
        path = tmp_path_factory.mktemp("scenario", numbered=True) / "scenario.json"
        path.write_text(text, encoding="utf-8")
        try:
            load_scenario(path)
        except EmulatorError as exc:
            assert exc.code in ("SCENARIO_INVALID", "SCENARIO_FILE_MISSING"), exc.code
            field = str(exc.details.get("field", "")).split(".")[0]
            tally.counts[f"{REJECTED}{exc.code}{':' + field if field else ''}"] += 1
            return
        finally:
            path.unlink()
        tally.counts[ACCEPTED] += 1

    target()
    tally.check()


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


# A tool call the model got wrong is refused with one of these; TOOL_FAILED (a handler raised),
# TOOL_TIMEOUT or TOOL_BAD_RESULT from these handlers would be a bug, not a rejection.
_CLEAN_REFUSALS = (
    ErrorCode.TOOL_UNKNOWN,
    ErrorCode.TOOL_ARGUMENTS_MALFORMED,
    ErrorCode.TOOL_ARGUMENTS_INVALID,
)


def test_tool_call_arguments(tally: Tally) -> None:
    @example("clock_now", "{}")
    @example("rm_rf", "{}")
    @given(st.sampled_from(_TOOL_NAMES), tool_arguments)
    def target(name: str, arguments: str) -> None:
        tally.inputs += 1
        result = run(_registry().call(ToolCall(id="c1", name=name, arguments=arguments)))
        if result.ok:
            tally.counts[f"{ACCEPTED}:{name}"] += 1
            json.loads(result.to_json())
            return
        assert result.error_code in _CLEAN_REFUSALS and result.reason, result
        tally.counts[f"{REJECTED}{result.error_code}"] += 1

    target()
    tally.check()
