"""ActionBroker policy without any agent: who may confirm, expiry, stale sessions, replays, delivery.

Every test runs on SQLite and PostgreSQL (``db_url``). Nothing here confirms an action, so time is a
:class:`FakeClock` and the broker's sweeper is never started (``expire_due`` is called directly).
"""

from __future__ import annotations

from pathlib import Path

from openab_voice.actions.events import ActionRequestRefused, ConfirmationRefused
from openab_voice.actions.ports import CONFIRM, REJECT
from openab_voice.clock import FakeClock
from openab_voice.jobs import JobStatus
from openab_voice.store.records import CREATE_EVENT
from tests.fakes.actions import (
    GENERATION,
    OPERATOR,
    STRANGER,
    CallLog,
    FakeControlChannel,
    PlaneRig,
    plane_rig,
    request,
)

EXPIRY_S = 300.0


async def proposed(rig: PlaneRig, goal: str = "write a haiku about the sea", call_id: str = "t1:c1") -> str:
    outcome = await rig.broker.propose(request(goal, call_id=call_id))
    assert outcome.ok and outcome.created and outcome.action is not None
    assert outcome.action.status is JobStatus.DELIVERED
    return outcome.action.id


async def test_proposal_is_stored_delivered_and_pinned_before_anything_runs(
    db_url: str, tmp_path: Path
) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig, "  write a haiku about the sea  ")

        record = rig.store.require(action_id)
        assert record.goal == "write a haiku about the sea"
        assert record.proposed_by == OPERATOR and record.session_generation == GENERATION
        assert record.proposal_message_id == rig.channel.message_ids[action_id]
        assert record.expires_at == rig.clock.wall() + EXPIRY_S
        assert rig.log.names() == ["post_proposal", "pin"]
        [view] = rig.channel.proposals()
        assert (view.action_id, view.goal, view.effect_ceiling) == (action_id, record.goal, "workspace_write")
        assert [(t.from_status, t.to_status) for t in rig.store.transitions(action_id)] == [
            (None, JobStatus.PROPOSED),
            (JobStatus.PROPOSED, JobStatus.DELIVERED),
        ]
        assert [e.kind for e in rig.store.audit_entries(action_id=action_id)] == ["proposed"]
        assert rig.executor.running == [] and not rig.workspace(action_id).private.parent.exists()


async def test_non_operator_click_is_refused_audited_and_changes_nothing(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)
        before = rig.store.require(action_id)

        for decision in (CONFIRM, REJECT):
            outcome = await rig.broker.click(
                decision=decision,
                action_id=action_id,
                user_id=STRANGER,
                message_id=rig.channel.message_ids[action_id],
            )
            assert not outcome.ok and outcome.code == "ACTION_NOT_OPERATOR"

        assert rig.store.require(action_id) == before
        refused = rig.store.audit_entries(action_id=action_id, kind="confirmation_refused")
        assert [(e.actor, e.detail["code"]) for e in refused] == [(str(STRANGER), "ACTION_NOT_OPERATOR")] * 2
        assert [e.code for e in rig.published(ConfirmationRefused)] == ["ACTION_NOT_OPERATOR"] * 2
        assert "close_proposal" not in rig.log.names()
        assert rig.executor.running == []


async def test_operator_reject_closes_the_proposal(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)
        outcome = await rig.broker.click(
            decision=REJECT, action_id=action_id, user_id=OPERATOR, message_id=None
        )

        assert outcome.ok and rig.store.require(action_id).status is JobStatus.REJECTED
        [close] = rig.log.of("close_proposal")
        assert close.data["message_id"] == rig.channel.message_ids[action_id]
        assert f"Rejected by <@{OPERATOR}>" in close.data["note"]
        again = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=None
        )
        assert again.code == "ACTION_ALREADY_DECIDED"
        assert rig.store.require(action_id).status is JobStatus.REJECTED
        assert rig.executor.running == []


async def test_click_on_another_message_or_unknown_action_is_refused(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)
        wrong = await rig.broker.click(decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=42)
        unknown = await rig.broker.click(
            decision=CONFIRM, action_id="a-00000000", user_id=OPERATOR, message_id=None
        )

        assert (wrong.code, unknown.code) == ("ACTION_WRONG_MESSAGE", "ACTION_UNKNOWN")
        assert rig.store.require(action_id).status is JobStatus.DELIVERED
        codes = [e.detail["code"] for e in rig.store.audit_entries(kind="confirmation_refused")]
        assert codes == ["ACTION_WRONG_MESSAGE", "ACTION_UNKNOWN"]


async def test_confirmation_after_expiry_is_refused_and_expires_the_action(
    db_url: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    async with plane_rig(db_url, tmp_path, clock=clock) as rig:
        action_id = await proposed(rig)
        clock.advance(EXPIRY_S)  # the deadline itself is too late

        outcome = await rig.broker.click(
            decision=CONFIRM,
            action_id=action_id,
            user_id=OPERATOR,
            message_id=rig.channel.message_ids[action_id],
        )

        assert not outcome.ok and outcome.code == "ACTION_EXPIRED"
        record = rig.store.require(action_id)
        assert record.status is JobStatus.EXPIRED and record.confirmed_by is None
        assert [t.to_status for t in rig.store.transitions(action_id)][-1] is JobStatus.EXPIRED
        assert "Expired" in rig.log.of("close_proposal")[0].data["note"]
        assert rig.executor.running == []


async def test_expire_due_expires_only_overdue_proposals(db_url: str, tmp_path: Path) -> None:
    clock = FakeClock()
    async with plane_rig(db_url, tmp_path, clock=clock) as rig:
        old = [await proposed(rig, f"old task {i}", call_id=f"t1:c{i}") for i in range(2)]
        clock.advance(EXPIRY_S / 2)
        young = await proposed(rig, "young task", call_id="t2:c1")
        assert await rig.broker.expire_due() == 0

        clock.advance(EXPIRY_S / 2 + 1)
        assert await rig.broker.expire_due() == 2

        assert [rig.store.require(a).status for a in old] == [JobStatus.EXPIRED] * 2
        assert rig.store.require(young).status is JobStatus.DELIVERED
        closed = sorted(c.data["message_id"] for c in rig.log.of("close_proposal"))
        assert closed == sorted(rig.channel.message_ids[a] for a in old)
        assert await rig.broker.expire_due() == 0, "a second sweep changes nothing"


async def test_click_from_a_stale_voice_session_is_refused(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)
        rig.voice.current_generation = GENERATION + 1  # the bot reconnected since

        outcome = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=None
        )

        assert not outcome.ok and outcome.code == "ACTION_STALE_SESSION"
        assert rig.store.require(action_id).status is JobStatus.EXPIRED
        assert rig.executor.running == []


async def test_click_after_a_restart_on_a_proposal_of_the_old_process_is_refused(
    db_url: str, tmp_path: Path
) -> None:
    """The generation counter starts again after a restart, so the old proposal's generation matches
    the new session's; its random voice session id does not."""
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)
        rig.voice.current_session = "0123456789ab"  # the new process's session, same generation

        outcome = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=None
        )

        assert not outcome.ok and outcome.code == "ACTION_STALE_SESSION"
        assert rig.store.require(action_id).status is JobStatus.EXPIRED
        assert rig.executor.running == []


async def test_request_from_a_stale_or_foreign_source_is_never_stored(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        stale = await rig.broker.propose(request(generation=GENERATION - 1))
        stranger = await rig.broker.propose(request(speaker=STRANGER))
        nobody = await rig.broker.propose(request(speaker=None))
        empty = await rig.broker.propose(request("   "))

        assert [o.code for o in (stale, stranger, nobody, empty)] == [
            "ACTION_STALE_SESSION",
            "ACTION_NOT_OPERATOR",
            "ACTION_UNATTRIBUTED",
            "ACTION_EMPTY_GOAL",
        ]
        assert all(not o.ok and o.action is None for o in (stale, stranger, nobody, empty))
        assert rig.store.recent() == [] and rig.log.calls == []
        refused = rig.store.audit_entries(kind="request_refused")
        assert [e.detail["code"] for e in refused] == [o.code for o in (stale, stranger, nobody, empty)]
        assert refused[1].actor == str(STRANGER)
        assert len(rig.published(ActionRequestRefused)) == 4


async def test_same_call_id_twice_is_one_action(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        first = await rig.broker.propose(request(call_id="t1:c1"))
        again = await rig.broker.propose(request(call_id="t1:c1"))
        other = await rig.broker.propose(request(call_id="t1:c2"))

        assert first.action is not None and again.action is not None and other.action is not None
        assert again.ok and not again.created and again.action.id == first.action.id
        assert other.action.id != first.action.id
        assert [p.action_id for p in rig.channel.proposals()] == [first.action.id, other.action.id]
        assert len(rig.store.recent()) == 2


async def test_pin_failure_is_delivery_failed_and_a_later_click_runs_nothing(
    db_url: str, tmp_path: Path
) -> None:
    channel = FakeControlChannel(CallLog(), fail_pin=True)
    async with plane_rig(db_url, tmp_path, clock=FakeClock(), channel=channel) as rig:
        outcome = await rig.broker.propose(request())

        assert not outcome.ok and outcome.code == "ACTION_DELIVERY_FAILED"
        assert outcome.action is not None
        action_id = outcome.action.id
        record = rig.store.require(action_id)
        assert record.status is JobStatus.DELIVERY_FAILED and record.error_code == "ACTION_DELIVERY_FAILED"
        assert [t.event for t in rig.store.transitions(action_id)] == [CREATE_EVENT, "deliver_fail"]

        click = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=None
        )

        assert not click.ok and click.code == "ACTION_ALREADY_DECIDED"
        assert rig.store.require(action_id).status is JobStatus.DELIVERY_FAILED
        assert rig.executor.running == [] and not rig.workspace(action_id).private.parent.exists()
        assert rig.log.names() == ["post_proposal", "pin"]


async def test_cancel_before_confirmation_by_proposer_only(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=FakeClock()) as rig:
        action_id = await proposed(rig)

        stranger = await rig.broker.cancel(action_id, user_id=STRANGER)
        anonymous = await rig.broker.cancel(action_id, user_id=None)
        assert (stranger.code, anonymous.code) == ("ACTION_NOT_OPERATOR", "ACTION_NOT_OPERATOR")
        assert rig.store.require(action_id).status is JobStatus.DELIVERED

        cancelled = await rig.broker.cancel(action_id, user_id=OPERATOR)
        assert cancelled.ok and rig.store.require(action_id).status is JobStatus.CANCELLED
        again = await rig.broker.cancel(action_id, user_id=OPERATOR)
        assert again.code == "ACTION_ALREADY_DECIDED"
        click = await rig.broker.click(
            decision=CONFIRM, action_id=action_id, user_id=OPERATOR, message_id=None
        )
        assert click.code == "ACTION_ALREADY_DECIDED" and rig.executor.running == []


async def test_retried_call_after_a_failed_delivery_is_not_reported_as_proposed(
    db_url: str, tmp_path: Path
) -> None:
    """A model that retries the call (same provider id) must hear the same answer: not proposed."""
    channel = FakeControlChannel(CallLog(), fail_pin=True)
    async with plane_rig(db_url, tmp_path, clock=FakeClock(), channel=channel) as rig:
        first = await rig.broker.propose(request(call_id="t1:c1"))
        channel.fail_pin = False
        retry = await rig.broker.propose(request(call_id="t1:c1"))

        assert first.action is not None and retry.action is not None
        assert retry.action.id == first.action.id
        assert retry.action.status is JobStatus.DELIVERY_FAILED
        assert len(rig.log.of("post_proposal")) == 1, "one action, posted once"
        assert (retry.ok, retry.code) == (False, "ACTION_DELIVERY_FAILED"), retry
