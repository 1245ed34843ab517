"""ToolRouter: strict schemas, risk levels, per-turn budgets on the injected clock, truncation, audit rows
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from openab_voice.app.records import build_record_parts
from openab_voice.app.sessions import session_options
from openab_voice.clock import FakeClock
from openab_voice.config import load_settings
from openab_voice.errors import ErrorCode, StoreError
from openab_voice.providers.chat import ChatMessage, ToolCall, ToolSpec
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.tool_calls import ToolCallLog
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import SESSION, Rig
from openab_voice.tools import (
    Confirmation,
    RouterSettings,
    ToolCallAudit,
    ToolContext,
    ToolRegistry,
    ToolRisk,
    ToolRouter,
    default_tools,
)
from openab_voice.tools.output import truncate


def _strict(
    name: str, properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=name,
        parameters={
            "type": "object",
            "properties": properties or {},
            "required": required or [],
            "additionalProperties": False,
        },
    )


NOTE = _strict("note", {"text": {"type": "string"}, "count": {"type": "integer"}}, ["text"])
PROPOSE = _strict("start_agent_task", {"goal": {"type": "string"}}, ["goal"])
SLOW = _strict("slow", {"seconds": {"type": "number"}}, ["seconds"])
BIG = _strict("big", {"kind": {"type": "string"}}, ["kind"])


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[ToolCallAudit] = []

    def record(self, entry: ToolCallAudit) -> None:
        self.entries.append(entry)


class BrokenLog:
    def record(self, entry: ToolCallAudit) -> None:
        raise StoreError("the database went away", code="STORE_UNAVAILABLE")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _router(clock: FakeClock, audit: Any = None, **settings: Any) -> ToolRouter:
    registry = default_tools(clock)
    audit = MemoryLog() if audit is None else audit
    router = ToolRouter(registry, clock=clock, settings=RouterSettings(**settings), audit=audit)

    async def note(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"saved": arguments["text"]}

    async def propose(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        if arguments["goal"] == "refuse":
            return {"ok": False, "message": "actions are off"}
        return {"ok": True, "action_id": "a-1", "status": "awaiting_confirmation"}

    async def slow(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        await clock.sleep(float(arguments["seconds"]))  # fake clock: no real time passes
        return {"slept": arguments["seconds"]}

    async def big(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        if arguments["kind"] == "string":
            return {"status": "done", "text": "word " * 2000}
        if arguments["kind"] == "list":
            return {"items": [f"record {i}: " + "x" * 40 for i in range(500)]}
        return {f"key_{i}": i for i in range(2000)}

    router.register(NOTE, note, risk=ToolRisk.WRITE)
    router.register(PROPOSE, propose, risk=ToolRisk.PROPOSE)
    router.register(SLOW, slow, risk=ToolRisk.READ, timeout_s=30.0)
    router.register(BIG, big, risk=ToolRisk.READ)
    return router


def _call(name: str, arguments: dict[str, Any] | str, call_id: str = "c1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, name=name, arguments=text)


def _turn(turn_id: str = "t1", speaker: str = "42") -> ToolContext:
    return ToolContext(session_id="s1", turn_id=turn_id, speaker_id=speaker)


# --- validation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "code", "reason"),
    [
        ("no_such_tool", {}, ErrorCode.TOOL_UNKNOWN, "no tool named 'no_such_tool'"),
        ("note", {}, ErrorCode.TOOL_ARGUMENTS_INVALID, "missing required argument(s): text"),
        (
            "note",
            {"text": 5},
            ErrorCode.TOOL_ARGUMENTS_INVALID,
            "argument 'text' must be string, not integer",
        ),
        (
            "note",
            {"text": "a", "count": 1.5},
            ErrorCode.TOOL_ARGUMENTS_INVALID,
            "argument 'count' must be integer",
        ),
        (
            "note",
            {"text": "a", "colour": "red"},
            ErrorCode.TOOL_ARGUMENTS_INVALID,
            "unexpected argument(s): colour",
        ),
        ("note", "{not json", ErrorCode.TOOL_ARGUMENTS_MALFORMED, "arguments are not valid JSON"),
    ],
)
async def test_schema_errors_are_results_the_model_reads(
    clock: FakeClock, name: str, arguments: dict[str, Any] | str, code: str, reason: str
) -> None:
    log = MemoryLog()
    result = await _router(clock, log).call(_call(name, arguments), _turn())
    assert (result.ok, result.error_code) == (False, code)
    assert result.reason is not None and result.reason.startswith(reason)
    assert json.loads(result.to_json()) == {"error": code, "reason": result.reason}
    (entry,) = log.entries
    assert (entry.tool, entry.outcome, entry.duration_ms) == (name, code, 0.0)


def test_every_tool_needs_a_risk_and_a_closed_schema(clock: FakeClock) -> None:
    registry = ToolRegistry(clock)

    async def handler(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        return {}

    registry.register(_strict("unrated"), handler)
    with pytest.raises(ValueError, match="'unrated' has no risk level"):
        ToolRouter(registry, clock=clock, audit=MemoryLog())
    router = ToolRouter(default_tools(clock), clock=clock, audit=MemoryLog())
    with pytest.raises(ValueError, match="must refuse unknown fields"):
        router.register(ToolSpec(name="open", description="open"), handler, risk=ToolRisk.READ)
    assert "open" not in [spec.name for spec in router.specs()]
    assert router.risk("clock_now") is ToolRisk.READ
    assert router.risk("no_such_tool") is None


# --- closed: off, or nowhere to audit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled", "audit", "code"),
    [
        (False, "memory", ErrorCode.TOOL_ROUTER_DISABLED),
        (False, None, ErrorCode.TOOL_ROUTER_DISABLED),
        (True, None, ErrorCode.TOOL_AUDIT_UNAVAILABLE),
    ],
)
async def test_a_closed_router_runs_nothing_and_says_why(
    clock: FakeClock, enabled: bool, audit: str | None, code: str
) -> None:
    ran: list[dict[str, Any]] = []

    async def note(arguments: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        ran.append(arguments)
        return {"saved": arguments["text"]}

    log = MemoryLog() if audit else None
    router = ToolRouter(default_tools(clock), clock=clock, audit=log, enabled=enabled)
    router.register(NOTE, note, risk=ToolRisk.WRITE)
    assert router.refusal == code and router.specs() == []  # the model is offered nothing
    for call in (_call("note", {"text": "hi"}), _call("note", "{not json"), _call("no_such_tool", {})):
        result = await router.call(call, _turn())
        assert (result.ok, result.error_code) == (False, code)
        assert result.reason is not None and "nothing was run" in result.reason
        assert json.loads(result.to_json()) == {"error": code, "reason": result.reason}
    assert ran == []
    if log is not None:  # refused calls are recorded where there is a log
        assert [(e.tool, e.outcome, e.duration_ms) for e in log.entries] == [
            ("note", code, 0.0),
            ("note", code, 0.0),
            ("no_such_tool", code, 0.0),
        ]


# --- budgets --------------------------------------------------------------------------------------


async def test_call_budget_is_per_turn(clock: FakeClock) -> None:
    router = _router(clock, max_calls_per_turn=2)
    for n in range(2):
        assert (await router.call(_call("note", {"text": str(n)}), _turn())).ok
    refused = await router.call(_call("note", {"text": "3"}), _turn())
    assert (refused.ok, refused.error_code) == (False, ErrorCode.TOOL_BUDGET_EXCEEDED)
    assert refused.reason == "this turn already made 2 tool calls (the limit); answer with what you have"
    # Another turn has its own budget; an unknown tool costs nothing and stays the registry's error.
    assert (await router.call(_call("note", {"text": "4"}), _turn("t2"))).ok
    unknown = await router.call(_call("nope", {}), _turn("t2"))
    assert unknown.error_code == ErrorCode.TOOL_UNKNOWN
    assert (await router.call(_call("note", {"text": "5"}), _turn("t2"))).ok


async def test_one_proposal_per_turn(clock: FakeClock) -> None:
    log = MemoryLog()
    router = _router(clock, log)
    first = await router.call(_call("start_agent_task", {"goal": "fix the build"}), _turn())
    second = await router.call(_call("start_agent_task", {"goal": "and the docs"}), _turn())
    assert first.ok
    assert (second.ok, second.error_code) == (False, ErrorCode.TOOL_BUDGET_EXCEEDED)
    assert "already proposed 1 task" in (second.reason or "")
    assert (await router.call(_call("note", {"text": "still fine"}), _turn())).ok
    refused = await router.call(_call("start_agent_task", {"goal": "refuse"}), _turn("t2"))
    assert refused.ok and refused.content["ok"] is False
    assert [e.confirmation for e in log.entries] == [
        Confirmation.AWAITING_OPERATOR,
        Confirmation.NOT_PROPOSED,
        Confirmation.NOT_REQUIRED,
        Confirmation.NOT_PROPOSED,
    ]
    assert [e.risk for e in log.entries] == [
        ToolRisk.PROPOSE,
        ToolRisk.PROPOSE,
        ToolRisk.WRITE,
        ToolRisk.PROPOSE,
    ]


async def test_runtime_budget_bounds_the_next_call_on_the_injected_clock(clock: FakeClock) -> None:
    log = MemoryLog()
    router = _router(clock, log, max_runtime_s_per_turn=10.0)

    async def run(seconds: float, advance: float) -> Any:
        task = asyncio.create_task(router.call(_call("slow", {"seconds": seconds}), _turn()))
        for _ in range(5):
            await asyncio.sleep(0)
        clock.advance(advance)
        return await task

    first = await run(6.0, 6.0)
    assert first.ok
    # 4 s are left: the tool's own 30 s timeout is cut to them.
    second = await run(20.0, 4.0)
    assert (second.ok, second.error_code, second.reason) == (
        False,
        ErrorCode.TOOL_TIMEOUT,
        "no result within 4 s",
    )
    third = await router.call(_call("slow", {"seconds": 0.5}), _turn())
    assert (third.ok, third.error_code) == (False, ErrorCode.TOOL_BUDGET_EXCEEDED)
    assert third.reason == "this turn spent its 10 s of tool time; answer with what you have"
    assert [round(e.duration_ms) for e in log.entries] == [6000, 4000, 0]


async def test_calls_outside_a_turn_each_get_a_budget(clock: FakeClock) -> None:
    router = _router(clock, max_calls_per_turn=1)
    for _ in range(3):
        assert (await router.call(_call("note", {"text": "x"}), ToolContext())).ok


# --- truncation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["string", "list", "keys"])
async def test_long_results_are_truncated_and_marked(clock: FakeClock, kind: str) -> None:
    log = MemoryLog()
    router = _router(clock, log, max_output_chars=500)
    result = await router.call(_call("big", {"kind": kind}), _turn())
    assert result.ok
    text = result.to_json()
    assert len(text) <= 500
    content = json.loads(text)
    assert content["truncated"] is True
    if kind == "string":
        assert content["status"] == "done"
        assert content["text"].startswith("word word") and content["text"].endswith("…")
    elif kind == "list":
        assert 1 <= len(content["items"]) < 500
    else:
        assert content["preview"].startswith('{"key_0": 0, "key_1": 1')
    assert log.entries[0].truncated is True


async def test_short_results_are_untouched(clock: FakeClock) -> None:
    result = await _router(clock).call(_call("note", {"text": "hello"}), _turn())
    assert result.content == {"saved": "hello"}
    assert truncate({"a": "b"}, 64) == ({"a": "b"}, False)


# --- audit ----------------------------------------------------------------------------------------


@pytest.fixture
def tool_log(db_url: str) -> Iterator[ToolCallLog]:
    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        yield ToolCallLog(engine)
    finally:
        engine.dispose()


async def test_audit_rows_in_the_store(clock: FakeClock, tool_log: ToolCallLog) -> None:
    router = _router(clock, tool_log, max_output_chars=200)
    secret = "sk-" + "A1b2C3d4" * 4
    await router.call(_call("note", {"text": f"my key is {secret}"}, "c1"), _turn())
    await router.call(_call("start_agent_task", {"goal": "run the tests"}, "c2"), _turn())
    await router.call(_call("start_agent_task", {"goal": "again"}, "c3"), _turn())
    await router.call(_call("note", {"text": 1, "password": "hunter2"}, "c4"), _turn("t2", "43"))
    await router.call(_call("big", {"kind": "string"}, "c5"), _turn("t3"))
    rows = tool_log.entries(session_id="s1")
    assert [
        (r.call_id, r.tool, r.risk, r.speaker_id, r.confirmation, r.outcome, r.truncated) for r in rows
    ] == [
        ("c1", "note", ToolRisk.WRITE, "42", Confirmation.NOT_REQUIRED, "ok", False),
        ("c2", "start_agent_task", ToolRisk.PROPOSE, "42", Confirmation.AWAITING_OPERATOR, "ok", False),
        (
            "c3",
            "start_agent_task",
            ToolRisk.PROPOSE,
            "42",
            Confirmation.NOT_PROPOSED,
            ErrorCode.TOOL_BUDGET_EXCEEDED,
            False,
        ),
        (
            "c4",
            "note",
            ToolRisk.WRITE,
            "43",
            Confirmation.NOT_REQUIRED,
            ErrorCode.TOOL_ARGUMENTS_INVALID,
            False,
        ),
        ("c5", "big", ToolRisk.READ, "42", Confirmation.NOT_REQUIRED, "ok", True),
    ]
    assert rows[0].summary == {
        "arguments": {"text": "my key is [redacted]"},
        "result": {"saved": "my key is [redacted]"},
    }
    assert rows[3].summary["arguments"] == {"text": 1, "password": "[redacted]"}
    assert rows[3].summary["reason"] == "unexpected argument(s): password"
    assert secret not in json.dumps([r.summary for r in rows]) and "hunter2" not in json.dumps(
        [r.summary for r in rows]
    )
    assert rows[0].at == clock.wall() and rows[0].turn_id == "t1" and rows[0].session_id == "s1"
    assert tool_log.entries(session_id="other") == []


async def test_a_failed_audit_write_does_not_change_the_answer(clock: FakeClock) -> None:
    router = _router(clock, BrokenLog())
    result = await router.call(_call("note", {"text": "hi"}), _turn())
    assert result.ok and result.content == {"saved": "hi"}
    assert router.audit_failures == 1


# --- in the conversation ----------------------------------------------------------------------------


async def test_the_conversation_calls_through_the_router_with_its_turn_and_speaker() -> None:
    log = MemoryLog()

    def router(clock: FakeClock) -> ToolRouter:
        return ToolRouter(
            default_tools(clock), clock=clock, settings=RouterSettings(max_calls_per_turn=1), audit=log
        )

    def answer(messages: Sequence[ChatMessage]) -> ScriptedReply:
        return ScriptedReply.text(f"The tool said {json.loads(messages[-1].content)['error']}.")

    first = ToolCall(id="c1", name="clock_now", arguments="{}")
    second = ToolCall(id="c2", name="clock_now", arguments="{}")
    async with Rig(
        replies=[ScriptedReply.tool(first), ScriptedReply.tool(second), answer], tools=router
    ) as rig:
        rig.say("What time is it? And again?")
        utt = await rig.until_finished("turn-1")
    assert utt.spoken_text == "The tool said TOOL_BUDGET_EXCEEDED."
    assert [(e.call_id, e.turn_id, e.speaker_id, e.session_id, e.outcome) for e in log.entries] == [
        ("c1", "turn-1", "alice", SESSION, "ok"),
        ("c2", "turn-1", "alice", SESSION, ErrorCode.TOOL_BUDGET_EXCEEDED),
    ]


# --- composition ------------------------------------------------------------------------------------


async def test_the_record_parts_follow_the_switch(tmp_path: Path, clock: FakeClock) -> None:
    # Nothing transcribed, so no dialogue and no tool call: nothing to audit, nothing opened.
    deaf = {"OPENAB_DATA_DIR": str(tmp_path), "OPENAB_TRANSCRIPTION_ENABLED": "false"}
    assert build_record_parts(load_settings(deaf)) is None
    dialogue = {"OPENAB_PLAYBACK_ENABLED": "true", "OPENAB_DIALOGUE_ENABLED": "true"}
    off = {"OPENAB_DATA_DIR": str(tmp_path), "OPENAB_TOOL_ROUTER_ENABLED": "false", **dialogue}
    assert build_record_parts(load_settings(off)) is None  # off: no tool runs, so none is audited
    assert not (tmp_path / "openab-voice.db").exists()
    env = {
        "OPENAB_DATA_DIR": str(tmp_path),
        "OPENAB_TOOL_MAX_CALLS_PER_TURN": "2",
        "OPENAB_TOOL_MAX_OUTPUT_CHARS": "300",
        **dialogue,
    }
    settings = load_settings(env)  # the router's switch at its default
    parts = build_record_parts(settings)
    assert parts is not None and parts.tool_calls is not None
    budgets = session_options(settings).tool_router
    try:
        assert budgets is not None and (budgets.max_calls_per_turn, budgets.max_output_chars) == (2, 300)
        router = ToolRouter(default_tools(clock), clock=clock, settings=budgets, audit=parts.tool_calls)
        await router.call(_call("clock_now", {}), _turn())
        assert [e.tool for e in parts.tool_calls.entries()] == ["clock_now"]
    finally:
        parts.close()
    assert (tmp_path / "openab-voice.db").exists()
