"""The voice websocket hook: what it does with each op message, counted in ``op_outcomes``."""

from __future__ import annotations

import logging
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from openab_voice.discord.wire.transport import XCHACHA
from openab_voice.discord.wire.voice_client import (
    OP_FAILED,
    OP_HANDLED,
    OP_NOT_AN_OP,
    OP_REJECTED,
    ReceivingVoiceClient,
)


class _Receiver:
    """Records what the hook asks of the receiver (the real one only enqueues for its worker)."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def map_ssrc(self, ssrc: int, user_id: str) -> None:
        self.calls.append(("map", ssrc, user_id))

    def remove_user(self, user_id: str) -> None:
        self.calls.append(("remove", user_id))


def _client(on_op: Any = None) -> tuple[ReceivingVoiceClient, _Receiver, list[tuple[int, dict[str, Any]]]]:
    """The hook without a discord.py connection behind it (``__init__`` would open one)."""
    passed_on: list[tuple[int, dict[str, Any]]] = []
    receiver = _Receiver()
    vc = ReceivingVoiceClient.__new__(ReceivingVoiceClient)
    vc.receiver = receiver  # type: ignore[assignment]
    vc._on_voice_op = on_op or (lambda _vc, op, data: passed_on.append((op, data)))
    vc._listening = True
    vc.op_outcomes = Counter()
    vc._connection = SimpleNamespace(  # type: ignore[assignment]
        mode=XCHACHA, secret_key=list(range(32)), dave_protocol_version=0, dave_session=None
    )
    return vc, receiver, passed_on


async def test_a_speaking_op_maps_the_ssrc_and_is_passed_on() -> None:
    vc, receiver, passed_on = _client()
    await vc._voice_ws_hook(None, {"op": 5, "d": {"user_id": "101", "ssrc": 4369, "speaking": 1}})
    await vc._voice_ws_hook(None, {"op": 13, "d": {"user_id": "101"}})
    assert receiver.calls == [("map", 4369, "101"), ("remove", "101")]
    assert [op for op, _ in passed_on] == [5, 13]
    assert vc.op_outcomes == Counter({OP_HANDLED: 2})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"user_id": "101", "ssrc": "4369"}, "op 5 ssrc"),
        ({"user_id": "101", "ssrc": 2**32}, "op 5 ssrc"),
        ({"user_id": "101", "ssrc": -1}, "op 5 ssrc"),
        ({"user_id": "101", "ssrc": True}, "op 5 ssrc"),
        ({"user_id": "101", "ssrc": 4.5}, "op 5 ssrc"),
        ({"user_id": None, "ssrc": 4369}, "op 5 user_id"),
        ({"user_id": "x", "ssrc": 4369}, "op 5 user_id"),
        ({"user_id": "\u0663", "ssrc": 4369}, "op 5 user_id"),  # a decimal digit, not an ASCII one
        ({"user_id": str(2**64), "ssrc": 4369}, "op 5 user_id"),
    ],
)
async def test_a_malformed_speaking_op_is_counted_and_dropped(data: dict[str, Any], reason: str) -> None:
    vc, receiver, passed_on = _client()
    await vc._voice_ws_hook(None, {"op": 5, "d": data})
    assert vc.op_outcomes == Counter({OP_REJECTED + reason: 1})
    assert receiver.calls == [] and passed_on == []


async def test_a_malformed_disconnect_is_counted_and_dropped() -> None:
    vc, receiver, passed_on = _client()
    await vc._voice_ws_hook(None, {"op": 13, "d": {"user_id": {"id": 1}}})
    assert vc.op_outcomes == Counter({OP_REJECTED + "op 13 user_id": 1})
    assert receiver.calls == [] and passed_on == []


@pytest.mark.parametrize("msg", [{"op": "5", "d": {}}, {"op": None, "d": {}}, {"op": 5, "d": [1]}])
async def test_what_is_not_an_op_object_is_ignored(msg: dict[str, Any]) -> None:
    vc, receiver, passed_on = _client()
    await vc._voice_ws_hook(None, msg)
    assert vc.op_outcomes == Counter({OP_NOT_AN_OP: 1})
    assert receiver.calls == [] and passed_on == []


async def test_a_handler_that_raises_is_counted_as_failed_and_the_reader_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(_vc: ReceivingVoiceClient, op: int, data: dict[str, Any]) -> None:
        raise RuntimeError("a bug")

    vc, _receiver, _ = _client(on_op=broken)
    with caplog.at_level(logging.ERROR, logger="openab_voice.discord.wire.voice_client"):
        await vc._voice_ws_hook(None, {"op": 9, "d": None})  # does not raise into discord.py's loop
    assert vc.op_outcomes == Counter({OP_FAILED: 1})
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [RuntimeError]
