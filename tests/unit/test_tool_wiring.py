"""The ToolRouter is the only tool path, as the session factory wires it from settings (ADR 0011).

A session's conversation is built by :class:`~openab_voice.app.sessions.SessionFactory` from
:func:`~openab_voice.app.sessions.session_options` and :func:`~openab_voice.app.records.build_record_parts`,
exactly as the bot builds it; the scripted chat model makes the tool calls. ``start_agent_task`` is the
observable tool: when it runs, the broker records a proposal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import discord

from openab_voice.actions.broker import ActionBroker
from openab_voice.actions.requests import Outcome
from openab_voice.app.records import RecordParts, build_record_parts
from openab_voice.app.sessions import SessionFactory, session_options
from openab_voice.bus import EventBus
from openab_voice.config import Settings, load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.settings import DialogueSettings
from openab_voice.errors import ErrorCode
from openab_voice.providers.chat import ChatMessage, ToolCall
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.dialogue_fakes import FakeChatModel, FakeTextToSpeech, ScriptedReply
from openab_voice.testing.virtual_time import VirtualClock
from openab_voice.tools import Confirmation, ToolRisk
from tests.fakes.sessions import RecordingBroker, SilentStt

GUILD, VOICE, TEXT, BOT, ALICE = 10, 20, 30, 99, 1001
DIALOGUE = {"OPENAB_PLAYBACK_ENABLED": "true", "OPENAB_DIALOGUE_ENABLED": "true"}
PROPOSE = ToolCall(id="c-propose", name="start_agent_task", arguments=json.dumps({"goal": "fix the build"}))
CLOCK = ToolCall(id="c-clock", name="clock_now", arguments=json.dumps({"timezone": "Europe/Paris"}))


def channel() -> discord.VoiceChannel:
    me = SimpleNamespace(id=BOT, display_name="Jarvis")
    alice = SimpleNamespace(id=ALICE, display_name="alice", bot=False)
    guild = SimpleNamespace(id=GUILD, me=me, get_member=lambda _id: None)
    return cast(discord.VoiceChannel, SimpleNamespace(id=VOICE, name="general", guild=guild, members=[alice]))


def tool_message(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    message = messages[-1]
    assert message.role == "tool", message
    content: dict[str, Any] = json.loads(message.content)
    return content


async def converse(
    settings: Settings, records: RecordParts | None, calls: list[ToolCall]
) -> tuple[FakeChatModel, RecordingBroker, list[dict[str, Any]]]:
    """One spoken turn in a session built as the bot builds it; the model makes ``calls``, one per round,
    then answers. Returns the model, the broker, and each tool message the model was given."""
    clock, bus, broker = VirtualClock(), EventBus(), RecordingBroker(Outcome(ok=True, message="proposed"))
    results: list[dict[str, Any]] = []

    def after_tool(reply: ScriptedReply) -> Any:
        def source(messages: Sequence[ChatMessage]) -> ScriptedReply:
            results.append(tool_message(messages))
            return reply

        return source

    replies: list[Any] = [ScriptedReply.tool(calls[0])]
    replies += [after_tool(ScriptedReply.tool(call)) for call in calls[1:]]
    replies.append(after_tool(ScriptedReply.text("Done.")))
    chat = FakeChatModel(clock, replies)
    providers = ConversationProviders(
        stt=SilentStt(), tts=FakeTextToSpeech(clock), chat=chat, dialogue=DialogueSettings()
    )
    factory = SessionFactory(
        bus=bus,
        clock=clock,
        options=session_options(settings),
        providers=providers,
        broker=cast(ActionBroker, broker),
        action_channel_id=TEXT,
        records=records,
    )
    session = factory(channel(), generation=1, text_channel_id=TEXT)
    try:
        assert session.conversation is not None
        await session.conversation.start()
        session.desk.route(
            TranscriptFinal(
                at=clock.monotonic(),
                session_id=session.id,
                speaker_id=str(ALICE),
                utterance_id="u1",
                text="Jarvis, fix the build please.",
                audio_start=0.0,
                audio_end=1.0,
                partials=1,
            )
        )
        with clock.threads():  # the audit write runs on a worker thread
            assert await clock.run_until(lambda: len(chat.requests) == len(calls) + 1), chat.requests
    finally:
        await session.aclose()
    return chat, broker, results


async def test_router_off_runs_no_tool_and_the_model_reads_why(tmp_path: Path) -> None:
    settings = load_settings(
        {"OPENAB_DATA_DIR": str(tmp_path), "OPENAB_TOOL_ROUTER_ENABLED": "false", **DIALOGUE}
    )
    records = build_record_parts(settings)
    assert records is None  # off: nothing to audit, nothing opened
    chat, broker, results = await converse(settings, records, [PROPOSE, CLOCK])
    assert broker.requests == []  # start_agent_task never ran: nothing was proposed
    assert (
        results
        == [
            {
                "error": "TOOL_ROUTER_DISABLED",
                "reason": "tools are turned off on this bot; nothing was run: answer without them",
            }
        ]
        * 2
    )
    assert chat.offered_tools == [()] * 3  # and none was offered
    assert not (tmp_path / "openab-voice.db").exists()


async def test_by_default_every_call_is_budgeted_truncated_and_audited(tmp_path: Path) -> None:
    # The router's switch at its default; small budgets so one turn meets both.
    env = {
        "OPENAB_DATA_DIR": str(tmp_path),
        "OPENAB_TOOL_MAX_CALLS_PER_TURN": "1",
        "OPENAB_TOOL_MAX_OUTPUT_CHARS": "64",
        **DIALOGUE,
    }
    settings = load_settings(env)
    records = build_record_parts(settings)
    assert records is not None and records.tool_calls is not None
    try:
        chat, broker, results = await converse(settings, records, [CLOCK, PROPOSE])
        rows = records.tool_calls.entries()
    finally:
        records.close()
    assert "start_agent_task" in chat.offered_tools[0] and "clock_now" in chat.offered_tools[0]
    clock_result, refused = results
    assert clock_result["truncated"] is True and len(json.dumps(clock_result)) <= 64
    assert refused["error"] == ErrorCode.TOOL_BUDGET_EXCEEDED
    assert broker.requests == []  # the spent budget stopped the proposal before it ran
    assert [
        (r.call_id, r.tool, r.risk, r.speaker_id, r.confirmation, r.outcome, r.truncated) for r in rows
    ] == [
        ("c-clock", "clock_now", ToolRisk.READ, str(ALICE), Confirmation.NOT_REQUIRED, "ok", True),
        (
            "c-propose",
            "start_agent_task",
            ToolRisk.PROPOSE,
            str(ALICE),
            Confirmation.NOT_PROPOSED,
            ErrorCode.TOOL_BUDGET_EXCEEDED,
            False,
        ),
    ]


async def test_without_its_audit_log_the_router_fails_closed(tmp_path: Path) -> None:
    """On, but given no record plane (a harness built without one): no tool runs unaudited."""
    settings = load_settings({"OPENAB_DATA_DIR": str(tmp_path), **DIALOGUE})
    chat, broker, results = await converse(settings, None, [PROPOSE])
    assert broker.requests == []
    (result,) = results
    assert result["error"] == "TOOL_AUDIT_UNAVAILABLE" and "nothing was run" in result["reason"]
    assert chat.offered_tools == [()] * 2


async def test_with_the_router_on_the_observable_tool_does_run(tmp_path: Path) -> None:
    """The control for the tests above: the same turn, router on and audited, proposes the task."""
    settings = load_settings({"OPENAB_DATA_DIR": str(tmp_path), **DIALOGUE})
    records = build_record_parts(settings)
    assert records is not None and records.tool_calls is not None
    try:
        _, broker, results = await converse(settings, records, [PROPOSE])
        rows = records.tool_calls.entries()
    finally:
        records.close()
    assert [r.goal for r in broker.requests] == ["fix the build"]
    assert results[0]["ok"] is True
    assert [(r.tool, r.confirmation, r.outcome) for r in rows] == [
        ("start_agent_task", Confirmation.AWAITING_OPERATOR, "ok")
    ]
