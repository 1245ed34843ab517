"""JobStore actions: creation, idempotency, compare-and-set transitions, updates, queries and audit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from openab_voice.clock import FakeClock
from openab_voice.errors import ActionError, StaleTransition, StoreError
from openab_voice.jobs import EffectCeiling, JobEvent, JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import CREATE_EVENT, ActionRecord, NewAction

MakeProposal = Callable[..., NewAction]
OPERATOR = 111_222_333_444_555_666


def deliver(store: JobStore, record: ActionRecord) -> ActionRecord:
    return store.apply(
        record.id, JobEvent.DELIVER, actor="broker", proposal_message_id=555_000_000_000_000_001
    )


def test_create_records_a_proposal_with_its_first_transition(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    new = make_proposal(workspace_id="ws-main")
    record, created = job_store.create(new)

    assert created
    assert record.status is JobStatus.PROPOSED
    assert record.version == 1
    assert record.created_at == record.updated_at == store_clock.wall()
    assert (record.guild_id, record.proposed_by) == (new.guild_id, new.proposed_by)  # BigInteger round trip
    assert record.effect_hint is EffectCeiling.READ_ONLY
    assert record.effect_ceiling is None and record.result_text is None and record.lease_owner is None
    assert job_store.get(new.id) == record == job_store.require(new.id)
    (first,) = job_store.transitions(new.id)
    assert (first.from_status, first.to_status, first.event) == (None, JobStatus.PROPOSED, CREATE_EVENT)
    assert first.actor == f"user:{new.proposed_by}"


def test_create_with_a_known_idempotency_key_returns_the_existing_action(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    first, created = job_store.create(make_proposal(idempotency_key="turn-7:tool-call-1"))
    again, created_again = job_store.create(make_proposal(idempotency_key="turn-7:tool-call-1"))

    assert created and not created_again
    assert again == first
    assert [r.id for r in job_store.recent()] == [first.id]


def test_racing_creates_with_one_key_make_one_action(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    attempts = [make_proposal(idempotency_key="turn-9:tool-call-1") for _ in range(8)]
    start = threading.Barrier(len(attempts))

    def create(new: NewAction) -> tuple[ActionRecord, bool]:
        start.wait()
        return job_store.create(new)

    with ThreadPoolExecutor(len(attempts)) as pool:
        results = list(pool.map(create, attempts))

    assert sum(created for _, created in results) == 1
    assert len({record.id for record, _ in results}) == 1
    assert len(job_store.recent()) == 1


def test_reusing_an_action_id_is_refused(job_store: JobStore, make_proposal: MakeProposal) -> None:
    first, _ = job_store.create(make_proposal())
    with pytest.raises(StoreError) as duplicate:
        job_store.create(make_proposal(id=first.id, idempotency_key="other"))
    assert duplicate.value.code == "STORE_DUPLICATE"


def test_full_lifecycle_writes_one_transition_per_change(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    record, _ = job_store.create(make_proposal())
    store_clock.advance(1)
    record = deliver(job_store, record)
    record = job_store.apply(
        record.id,
        JobEvent.CONFIRM,
        actor=f"operator:{OPERATOR}",
        reason="button",
        expected_version=record.version,
        effect_ceiling=EffectCeiling.WORKSPACE_WRITE,
        confirmed_by=OPERATOR,
    )
    record = job_store.apply(record.id, JobEvent.START, actor="executor", workspace_id="ws-main")
    store_clock.advance(2)
    record = job_store.apply(
        record.id, JobEvent.SUCCEED, actor="executor", result_text="all 12 tests pass", stop_reason="end_turn"
    )
    record = job_store.update(record.id, expected_version=record.version, delivery_outcome="posted")

    assert record.status is JobStatus.SUCCEEDED
    assert record.version == 6
    assert record.effect_ceiling is EffectCeiling.WORKSPACE_WRITE
    assert (record.confirmed_by, record.workspace_id) == (OPERATOR, "ws-main")
    assert record.proposal_message_id == 555_000_000_000_000_001
    assert (record.result_text, record.stop_reason, record.delivery_outcome) == (
        "all 12 tests pass",
        "end_turn",
        "posted",
    )
    assert record.updated_at == store_clock.wall()
    assert job_store.get(record.id) == record
    steps = [(t.from_status, t.event, t.to_status) for t in job_store.transitions(record.id)]
    assert steps == [
        (None, CREATE_EVENT, JobStatus.PROPOSED),
        (JobStatus.PROPOSED, JobEvent.DELIVER, JobStatus.DELIVERED),
        (JobStatus.DELIVERED, JobEvent.CONFIRM, JobStatus.CONFIRMED),
        (JobStatus.CONFIRMED, JobEvent.START, JobStatus.RUNNING),
        (JobStatus.RUNNING, JobEvent.SUCCEED, JobStatus.SUCCEEDED),
    ]
    confirm = job_store.transitions(record.id)[2]
    assert (confirm.actor, confirm.reason) == (f"operator:{OPERATOR}", "button")


def test_illegal_event_raises_and_writes_nothing(job_store: JobStore, make_proposal: MakeProposal) -> None:
    record, _ = job_store.create(make_proposal())
    with pytest.raises(ActionError) as illegal:
        job_store.apply(record.id, JobEvent.START, actor="executor", workspace_id="ws-main")

    assert illegal.value.code == "ACTION_ILLEGAL_TRANSITION"
    assert job_store.get(record.id) == record
    assert len(job_store.transitions(record.id)) == 1


def test_stale_version_raises_and_writes_nothing(job_store: JobStore, make_proposal: MakeProposal) -> None:
    record, _ = job_store.create(make_proposal())
    delivered = deliver(job_store, record)

    with pytest.raises(StaleTransition):
        job_store.apply(record.id, JobEvent.REJECT, actor="operator", expected_version=record.version)
    with pytest.raises(StaleTransition):
        job_store.update(record.id, expected_version=record.version, detail="late")

    assert job_store.get(record.id) == delivered
    assert len(job_store.transitions(record.id)) == 2


def test_two_racing_confirmations_one_wins(job_store: JobStore, make_proposal: MakeProposal) -> None:
    created, _ = job_store.create(make_proposal())
    seen = deliver(job_store, created)  # what both confirmations were decided on
    start = threading.Barrier(2)

    def confirm(operator: int) -> ActionRecord | StaleTransition:
        start.wait()
        try:
            return job_store.apply(
                seen.id,
                JobEvent.CONFIRM,
                actor=f"operator:{operator}",
                expected_version=seen.version,
                confirmed_by=operator,
            )
        except StaleTransition as lost:
            return lost

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(confirm, [1, 2]))

    winners = [o for o in outcomes if isinstance(o, ActionRecord)]
    assert len(winners) == 1
    assert sum(isinstance(o, StaleTransition) for o in outcomes) == 1
    assert job_store.get(seen.id) == winners[0]
    assert [t.event for t in job_store.transitions(seen.id)].count(JobEvent.CONFIRM) == 1


def test_unknown_actions_and_fields_are_refused(job_store: JobStore, make_proposal: MakeProposal) -> None:
    assert job_store.get("a-missing") is None
    for call in (
        lambda: job_store.require("a-missing"),
        lambda: job_store.apply("a-missing", JobEvent.DELIVER, actor="broker"),
        lambda: job_store.update("a-missing", expected_version=1, detail="x"),
    ):
        with pytest.raises(ActionError) as unknown:
            call()
        assert unknown.value.code == "ACTION_UNKNOWN"

    record, _ = job_store.create(make_proposal())
    with pytest.raises(TypeError, match="status"):
        job_store.update(record.id, expected_version=1, status="succeeded")  # type: ignore[call-arg]
    assert job_store.get(record.id) == record


def test_recent_and_in_status(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    ours = []
    for _ in range(3):
        ours.append(job_store.create(make_proposal())[0])
        store_clock.advance(1)
    other, _ = job_store.create(make_proposal(guild_id=42))
    deliver(job_store, ours[0])

    assert [r.id for r in job_store.recent(guild_id=ours[0].guild_id, limit=2)] == [ours[2].id, ours[1].id]
    assert [r.id for r in job_store.recent()] == [other.id, ours[2].id, ours[1].id, ours[0].id]
    assert [r.id for r in job_store.in_status(JobStatus.PROPOSED)] == [ours[1].id, ours[2].id, other.id]
    assert [r.id for r in job_store.in_status(JobStatus.DELIVERED, JobStatus.RUNNING)] == [ours[0].id]


def test_audit_entries_round_trip_json(job_store: JobStore, make_proposal: MakeProposal) -> None:
    record, _ = job_store.create(make_proposal())
    detail = {"reason": "not the operator", "user": 987_654_321_098_765_432, "ok": False, "tags": ["a", None]}
    job_store.audit("confirm.refused", actor="user:9", action_id=record.id, detail=detail)
    job_store.audit("unknown.action", actor="user:9", action_id="a-nowhere")  # no foreign key on purpose
    job_store.audit("startup", actor="app", detail={"nested": {"é": 1.5}})

    refused = job_store.audit_entries(action_id=record.id)
    assert [(e.kind, e.actor, e.detail) for e in refused] == [("confirm.refused", "user:9", detail)]
    assert [e.detail for e in job_store.audit_entries(kind="startup")] == [{"nested": {"é": 1.5}}]
    assert job_store.audit_entries(kind="unknown.action")[0].detail == {}
    assert [e.kind for e in job_store.audit_entries()] == ["confirm.refused", "unknown.action", "startup"]


def test_effect_ceilings_are_stored_as_their_values(job_store: JobStore, make_proposal: MakeProposal) -> None:
    record, _ = job_store.create(make_proposal())
    record = deliver(job_store, record)
    with pytest.raises(ValueError):
        job_store.apply(record.id, JobEvent.CONFIRM, actor="operator", effect_ceiling="root")  # type: ignore[typeddict-item]
    assert job_store.get(record.id) == record

    confirmed = job_store.apply(
        record.id, JobEvent.CONFIRM, actor="operator", effect_ceiling=EffectCeiling.EXTERNAL
    )
    assert confirmed.effect_ceiling is EffectCeiling.EXTERNAL
