"""The action plane through the loopback emulator, on SQLite and on PostgreSQL.

The real bot joins with ``/voice join``; the task phrase arrives as a final transcript on the bus
(speech → transcript is covered by the dialogue and demo tests); the proposal must appear pinned in
the text channel with Confirm / Reject buttons; clicks go through the emulator's INTERACTION_CREATE,
so only the operator's click runs the scripted ACP agent, and everyone else gets an ephemeral refusal.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import discord
import pytest

from openab_voice.actions.events import ActionChanged, ActionResultPosted, AgentProcessStarted
from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.ports import CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL, REJECT, button_id
from openab_voice.actions.requests import ActionRequest
from openab_voice.actions.results import result_text
from openab_voice.app import build_action_parts
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.discord.host.control import DiscordControlChannel
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.store.database import open_engine
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.emulator.wire import JsonObject
from openab_voice.testing.harness import BotOnEmulator
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

OPERATOR, GUEST = 1001, 1002


def agent(mode: str = "normal") -> str:
    return shlex.join([sys.executable, "-m", "openab_voice.testing.acp_agent", "--mode", mode])


@pytest.fixture
async def rig(
    request: pytest.FixtureRequest, db_url: str, tmp_path: Path
) -> AsyncIterator[tuple[BotOnEmulator, ActionPlane]]:
    """The bot with actions on; ``indirect`` parametrization picks the scripted agent's mode."""
    async with bot_with_actions(db_url, tmp_path, mode=getattr(request, "param", "normal")) as built:
        yield built


@pytest.fixture
async def external_rig(db_url: str, tmp_path: Path) -> AsyncIterator[tuple[BotOnEmulator, ActionPlane]]:
    """The bot with ``OPENAB_ACTION_MAX_EFFECT=external``: the widest policy an operator can set."""
    async with bot_with_actions(db_url, tmp_path, action_max_effect="external") as built:
        yield built


@asynccontextmanager
async def bot_with_actions(
    db_url: str, tmp_path: Path, *, mode: str = "normal", **overrides: Any
) -> AsyncIterator[tuple[BotOnEmulator, ActionPlane]]:
    clock = SystemClock()
    bus = EventBus()
    settings = load_settings(
        {},
        transcription_enabled=False,
        actions_enabled=True,
        operator_user_id=OPERATOR,
        acp_agent_command=agent(mode),
        acp_turn_timeout_s=20.0,
        acp_cancel_grace_s=1.0,
        database_url=db_url,
        data_dir=tmp_path / "data",
        **overrides,
    )
    parts = build_action_parts(settings, clock=clock)
    assert parts is not None
    try:
        async with BotOnEmulator(
            settings,
            EmulatorConfig(dave=False),
            users={OPERATOR: "olivia", GUEST: "gus"},
            clock=clock,
            bus=bus,
            actions=parts,
        ) as h:
            assert h.actions is not None
            yield h, h.actions
    finally:
        parts.store.close()


def say(h: BotOnEmulator, user_id: int, text: str, n: int) -> None:
    """A final transcript of ``user_id`` as the transcriber hands it out (SSRC-attributed):
    published for observers, then routed by the session's desk."""
    now = h.clock.monotonic()
    final = TranscriptFinal(
        at=now,
        session_id=h.session.id,
        speaker_id=str(user_id),
        utterance_id=f"{user_id}-{n}",
        text=text,
        audio_start=now - 2.0,
        audio_end=now - 0.1,
        partials=1,
    )
    h.bus.publish(final)
    h.session.desk.route(final)


def proposals(h: BotOnEmulator) -> list[JsonObject]:
    return [m for m in h.emulator.messages() if "Action proposal" in str(m.get("content", ""))]


def buttons(message: JsonObject) -> list[str]:
    return [
        str(b["custom_id"]) for row in message.get("components") or [] for b in row.get("components") or []
    ]


async def only_action(plane: ActionPlane, h: BotOnEmulator) -> ActionRecord:
    actions = await plane.broker.recent(h.emulator.guild_id)
    assert len(actions) == 1, actions
    return actions[0]


async def delivered_action(plane: ActionPlane, h: BotOnEmulator) -> ActionRecord:
    """The only action, once delivered (posted and pinned). The message is visible as soon as it is
    posted; a click before the store says delivered is refused ("click again"), so a test that
    clicks on the message alone lost its click under load."""
    await until(
        lambda: [a.status for a in plane.store.recent(guild_id=h.emulator.guild_id)] == [JobStatus.DELIVERED],
        "the delivered write",
    )
    return await only_action(plane, h)


async def test_spoken_task_is_pinned_confirmed_by_the_operator_and_reported_in_text(
    rig: tuple[BotOnEmulator, ActionPlane],
) -> None:
    h, plane = rig
    seen: list[Event] = []
    sub = h.bus.subscribe(Event, seen.append)
    say(h, OPERATOR, "Start a task: write the release notes for version two.", 1)
    await until(lambda: bool(proposals(h)), "the proposal")
    message = proposals(h)[0]
    action = await delivered_action(plane, h)
    assert action.status is JobStatus.DELIVERED and action.goal == "write the release notes for version two."
    assert action.proposed_by == OPERATOR and action.proposal_message_id == int(message["id"])
    assert int(message["id"]) in h.emulator.pins()
    assert buttons(message) == [button_id(CONFIRM, action.id), button_id(REJECT, action.id)]
    assert "write the release notes for version two." in message["content"]
    assert not [e for e in seen if isinstance(e, AgentProcessStarted)]  # delivered, nothing runs yet

    # A guest's click is refused, only to them, and audited; the operator's click runs it.
    refused = await h.emulator.click_button(GUEST, int(message["id"]), button_id(CONFIRM, action.id))
    reply = await refused.reply()
    assert reply.ephemeral and "only the operator" in reply.content
    assert (await plane.broker.get(action.id)).status is JobStatus.DELIVERED  # type: ignore[union-attr]
    audit = plane.store.audit_entries(action_id=action.id, kind="confirmation_refused")
    assert [a.actor for a in audit] == [str(GUEST)] and audit[0].detail["code"] == "ACTION_NOT_OPERATOR"

    confirmed = await h.emulator.click_button(OPERATOR, int(message["id"]), button_id(CONFIRM, action.id))
    assert "Confirmed" in (await confirmed.reply()).content
    await until(lambda: any(isinstance(e, ActionResultPosted) for e in seen), "the result")
    sub.close()
    final = await plane.broker.get(action.id)
    assert final is not None and final.status is JobStatus.SUCCEEDED
    assert final.delivery_outcome == "delivered" and final.confirmed_by == OPERATOR
    result = [m for m in h.emulator.messages() if f"Action `{action.id}` succeeded" in str(m.get("content"))]
    assert len(result) == 1 and "Wrote RESULT.md" in result[0]["content"]
    # The proposal lost its buttons and says who confirmed it; a replayed click is refused.
    closed = next(m for m in h.emulator.messages() if m["id"] == message["id"])
    assert "Confirmed by" in closed["content"] and not buttons(closed)
    statuses = [e.status for e in seen if isinstance(e, ActionChanged) and e.action_id == action.id]
    assert statuses == ["proposed", "delivered", "confirmed", "running", "succeeded"]


async def test_spoken_approval_approves_nothing_and_reject_and_replay_are_final(
    rig: tuple[BotOnEmulator, ActionPlane],
) -> None:
    h, plane = rig
    say(h, OPERATOR, "Start a task: delete the old branches.", 1)
    await until(lambda: bool(proposals(h)), "the proposal")
    action = await delivered_action(plane, h)
    for n, words in enumerate(["Yes.", "I approve, confirm the task.", "Jarvis, yes, go ahead."], start=2):
        say(h, OPERATOR, words, n)
    await asyncio.sleep(0.5)  # real time: a window for a wrong approval to act; nothing signals "ignored"
    assert (await plane.broker.get(action.id)).status is JobStatus.DELIVERED  # type: ignore[union-attr]
    assert len(proposals(h)) == 1 and not plane.executor.running

    message_id = int(proposals(h)[0]["id"])
    rejected = await h.emulator.click_button(OPERATOR, message_id, button_id(REJECT, action.id))
    assert "Rejected" in (await rejected.reply()).content
    assert (await plane.broker.get(action.id)).status is JobStatus.REJECTED  # type: ignore[union-attr]
    # The buttons are gone from the message; a replayed confirm through the broker is refused.
    outcome = await plane.broker.click(
        decision=CONFIRM, action_id=action.id, user_id=OPERATOR, message_id=message_id
    )
    assert not outcome.ok and outcome.code == "ACTION_ALREADY_DECIDED"
    assert not plane.executor.running


async def test_slash_actions_lists_and_cancel_stops_a_pending_proposal(
    rig: tuple[BotOnEmulator, ActionPlane],
) -> None:
    h, plane = rig
    say(h, OPERATOR, "Start a task: summarize the open issues.", 1)
    say(h, GUEST, "Start a task: mine some coins.", 2)  # not the operator: audit data only
    await until(lambda: bool(proposals(h)), "the proposal")
    action = await delivered_action(plane, h)
    await until(lambda: plane.store.audit_entries(kind="request_refused"), "the guest's refused request")
    refused = plane.store.audit_entries(kind="request_refused")
    assert len(refused) == 1 and refused[0].actor == str(GUEST)

    listing = await h.command("actions", user_id=GUEST)
    assert action.id in listing and "delivered" in listing and "summarize the open issues" in listing
    denied = await h.command("cancel", user_id=GUEST, action_id=action.id)
    assert "only the operator or the proposer" in denied
    done = await h.command("cancel", user_id=OPERATOR, action_id=action.id)
    assert f"Cancelled `{action.id}`" in done
    assert (await plane.broker.get(action.id)).status is JobStatus.CANCELLED  # type: ignore[union-attr]
    assert "cancelled" in await h.command("actions", user_id=OPERATOR)


@pytest.mark.parametrize("rig", ["crash"], indirect=True)
async def test_agent_crash_is_outcome_unknown_until_the_operator_reconciles(
    rig: tuple[BotOnEmulator, ActionPlane],
) -> None:
    h, plane = rig
    say(h, OPERATOR, "Start a task: refactor the parser.", 1)
    await until(lambda: bool(proposals(h)), "the proposal")
    action = await delivered_action(plane, h)
    clicked = await h.emulator.click_button(
        OPERATOR, int(proposals(h)[0]["id"]), button_id(CONFIRM, action.id)
    )
    assert "Confirmed" in (await clicked.reply()).content
    await until(
        lambda: any("UNKNOWN outcome" in str(m.get("content")) for m in h.emulator.messages()), "result"
    )
    final = await plane.broker.get(action.id)
    assert final is not None and final.status is JobStatus.OUTCOME_UNKNOWN and final.workspace_id
    workspace = plane.store.workspace(final.workspace_id)
    assert workspace is not None and workspace.state.value == "quarantined"

    assert "only the operator" in await h.command("reconcile", user_id=GUEST, action_id=action.id)
    assert "reconciled" in await h.command("reconcile", user_id=OPERATOR, action_id=action.id)
    freed = plane.store.workspace(final.workspace_id)
    assert freed is not None and freed.state.value == "free"
    assert (await plane.broker.get(action.id)).status is JobStatus.OUTCOME_UNKNOWN  # type: ignore[union-attr]
    assert "not quarantined" in await h.command("reconcile", user_id=OPERATOR, action_id=action.id)


async def test_long_results_are_split_or_attached_and_delivered(
    rig: tuple[BotOnEmulator, ActionPlane],
) -> None:
    h, _ = rig
    channel = DiscordControlChannel(h.bot)
    long_output = "\n".join(f"line {i}: " + "x" * 60 for i in range(60))  # ~4,300 characters
    text = result_text(action_id="a-1", goal="g", execution="succeeded", output=long_output)
    assert len(text.parts) == 3 and text.attachment is None
    sent = await channel.post_result(
        channel_id=h.emulator.text_channel_id, parts=text.parts, attachment=text.attachment
    )
    posted = [m["content"] for m in h.emulator.messages()][-3:]
    assert sent == 3 and posted == list(text.parts) and all(len(p) <= 2000 for p in posted)
    huge = result_text(action_id="a-2", goal="g", execution="succeeded", output=long_output * 4)
    assert len(huge.parts) == 1 and huge.attachment is not None
    # Sent as a multipart upload (payload_json + the file), as discord.py does for files.
    assert (
        await channel.post_result(
            channel_id=h.emulator.text_channel_id, parts=huge.parts, attachment=huge.attachment
        )
        == 1
    )
    assert h.emulator.messages()[-1]["content"].endswith("(full output attached)")


async def test_a_spoken_task_after_a_restart_on_the_same_store_is_proposed(
    db_url: str, tmp_path: Path
) -> None:
    """Issue 10, finding 2: after a restart the voice-session generation and the utterance numbers
    start again at 1, so the second process's first task had the same idempotency key as the first
    process's and vanished (no proposal, no message, no audit row). The key now holds the voice
    session's random id."""
    goals = ("write the changelog.", "update the changelog.")
    for goal in goals:  # two processes, one after the other, on one store and one data dir
        async with bot_with_actions(db_url, tmp_path) as (h, _):
            assert h.session.generation == 1
            say(h, OPERATOR, f"Start a task: {goal}", 1)  # utterance "1001-1" both times
            await until(lambda h=h: bool(proposals(h)), f"the proposal of {goal!r}")
            assert goal in str(proposals(h)[0]["content"])

    store = JobStore(open_engine(db_url), SystemClock())
    try:
        actions = store.recent(limit=10)
        assert sorted(a.goal for a in actions) == sorted(goals)
        assert len({a.idempotency_key for a in actions}) == 2
        assert len({a.voice_session_id for a in actions}) == 2
        assert len(store.audit_entries(kind="proposed")) == 2
    finally:
        store.close()


async def external_proposal(h: BotOnEmulator, plane: ActionPlane) -> tuple[ActionRecord, JsonObject]:
    """A proposal the model's ``start_agent_task`` asked ``external`` for, with the voice session's
    trusted facts (as the semantic tool builds it); delivered (posted and pinned) on return."""
    outcome = await plane.broker.propose(
        ActionRequest(
            goal="download the release notes from the project site",
            effect_hint=EffectCeiling.EXTERNAL,
            call_id="turn-1:call-1",
            source="tool",
            guild_id=h.emulator.guild_id,
            voice_channel_id=h.session.channel.id,
            text_channel_id=h.emulator.text_channel_id,
            session_generation=h.session.generation,
            voice_session_id=h.session.id,
            speaker_id=OPERATOR,
        )
    )
    assert outcome.ok and outcome.action is not None, outcome
    [message] = proposals(h)
    return outcome.action, message


@pytest.mark.parametrize(
    ("decision", "granted"),
    [(CONFIRM, EffectCeiling.WORKSPACE_WRITE), (CONFIRM_EXTERNAL, EffectCeiling.EXTERNAL)],
    ids=["plain-confirm", "external-button"],
)
async def test_external_is_granted_only_by_its_own_button(
    external_rig: tuple[BotOnEmulator, ActionPlane], decision: str, granted: EffectCeiling
) -> None:
    """Issue 29: with ``OPENAB_ACTION_MAX_EFFECT=external`` a plain Confirm granted ``external``."""
    h, plane = external_rig
    action, message = await external_proposal(h, plane)
    assert action.effect_hint is EffectCeiling.EXTERNAL
    assert buttons(message) == [
        button_id(CONFIRM, action.id),
        button_id(CONFIRM_EXTERNAL, action.id),
        button_id(REJECT, action.id),
    ]
    labels = [b.get("label") for row in message.get("components") or [] for b in row.get("components") or []]
    assert labels == ["Confirm", "Confirm + network/external effects", "Reject"]
    assert "Effect ceiling: `workspace_write`" in message["content"]
    assert "**Confirm + network/external effects** grants `external`" in message["content"]

    clicked = await h.emulator.click_button(OPERATOR, int(message["id"]), button_id(decision, action.id))
    assert "Confirmed" in (await clicked.reply()).content
    await plane.executor.wait_idle()
    final = await plane.broker.get(action.id)
    assert final is not None and final.confirmed_by == OPERATOR
    assert final.effect_ceiling is granted
    closed = next(m for m in h.emulator.messages() if m["id"] == message["id"])
    assert f"(ceiling {granted.value})" in closed["content"] and not buttons(closed)


async def forge_button(h: BotOnEmulator, message_id: int, custom_id: str) -> None:
    """Show a button the proposal never offered on its message (a tampered or stale message): the
    emulator, like Discord, only lets a user click a button the message has."""
    channel = h.bot.get_channel(h.emulator.text_channel_id)
    assert isinstance(channel, discord.TextChannel)
    message = await channel.fetch_message(message_id)
    view = discord.ui.View(timeout=None)
    view.add_item(discord.ui.Button(label="Confirm (forged)", custom_id=custom_id))
    await message.edit(view=view)


@pytest.mark.parametrize("forged", [CONFIRM_EXEC, CONFIRM_EXTERNAL])
async def test_a_click_on_a_button_the_proposal_did_not_offer_is_refused_and_nothing_runs(
    external_rig: tuple[BotOnEmulator, ActionPlane], forged: str
) -> None:
    """Issue 29: the broker honoured a Confirm + run commands click on a proposal that never offered
    it. The policy (external, sandbox active) would allow both ceilings; the proposal offered neither."""
    h, plane = external_rig
    seen: list[Event] = []
    sub = h.bus.subscribe(Event, seen.append)
    say(h, OPERATOR, "Start a task: write the release notes.", 1)
    await until(lambda: bool(proposals(h)), "the proposal")
    action = await delivered_action(plane, h)
    message = proposals(h)[0]
    assert buttons(message) == [button_id(CONFIRM, action.id), button_id(REJECT, action.id)]

    await forge_button(h, int(message["id"]), button_id(forged, action.id))
    clicked = await h.emulator.click_button(OPERATOR, int(message["id"]), button_id(forged, action.id))
    reply = await clicked.reply()
    sub.close()
    assert reply.ephemeral and f"did not offer the {forged} button" in reply.content
    record = await plane.broker.get(action.id)
    assert record is not None and record.status is JobStatus.DELIVERED
    assert (record.effect_ceiling, record.confirmed_by) == (None, None)
    assert not plane.executor.running and not [e for e in seen if isinstance(e, AgentProcessStarted)]
    [audit] = plane.store.audit_entries(action_id=action.id, kind="confirmation_refused")
    assert audit.actor == str(OPERATOR)
    assert (audit.detail["code"], audit.detail["decision"]) == ("ACTION_DECISION_NOT_OFFERED", forged)
