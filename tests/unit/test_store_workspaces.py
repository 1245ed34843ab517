"""JobStore workspaces (one running action each, quarantine, reconcile) and restart reconciliation."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from openab_voice.clock import FakeClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.job_leases import RESTART_REASON
from openab_voice.store.job_transitions import EXPIRY_REASON
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction, WorkspaceState

MakeProposal = Callable[..., NewAction]


def advance(store: JobStore, record: ActionRecord, *events: JobEvent) -> ActionRecord:
    for event in events:
        record = store.apply(record.id, event, actor="test", expected_version=record.version)
    return record


def test_a_workspace_holds_one_action_at_a_time(job_store: JobStore) -> None:
    assert job_store.workspace("ws-main") is None
    assert job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-1")
    assert not job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-2")
    assert not job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-1")

    held = job_store.workspace("ws-main")
    assert held is not None
    assert (held.state, held.action_id, held.path, held.version) == (
        WorkspaceState.BUSY,
        "a-1",
        "/srv/ws/main",
        1,
    )

    assert not job_store.release_workspace("ws-main", action_id="a-2")  # only the holder frees it
    assert job_store.release_workspace("ws-main", action_id="a-1")
    assert not job_store.release_workspace("ws-main", action_id="a-1")
    assert job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-2")
    taken = job_store.workspace("ws-main")
    assert taken is not None and (taken.action_id, taken.version) == ("a-2", 3)


def race_for_workspace(store: JobStore, contenders: list[str]) -> list[bool]:
    start = threading.Barrier(len(contenders))

    def acquire(action_id: str) -> bool:
        start.wait()
        return store.acquire_workspace("ws-race", path="/srv/ws/race", action_id=action_id)

    with ThreadPoolExecutor(len(contenders)) as pool:
        return list(pool.map(acquire, contenders))


def test_racing_acquisitions_have_one_winner(job_store: JobStore) -> None:
    for round_ in ("create", "take-free"):  # first the row is created, then a free row is taken
        contenders = [f"a-{round_}-{n}" for n in range(6)]
        won = race_for_workspace(job_store, contenders)
        assert sum(won) == 1
        holder = job_store.workspace("ws-race")
        assert holder is not None and holder.action_id == contenders[won.index(True)]
        assert job_store.release_workspace("ws-race", action_id=holder.action_id)


def test_quarantine_blocks_until_reconciled(job_store: JobStore) -> None:
    assert job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-1")
    job_store.quarantine_workspace("ws-main", action_id="a-1", reason="agent timed out after the prompt")

    assert not job_store.release_workspace("ws-main", action_id="a-1")  # a late release does not free it
    assert not job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-2")
    (blocked,) = job_store.quarantined_workspaces()
    assert (blocked.id, blocked.state, blocked.action_id, blocked.reason) == (
        "ws-main",
        WorkspaceState.QUARANTINED,
        "a-1",
        "agent timed out after the prompt",
    )

    assert job_store.reconcile_workspace("ws-main", actor="operator:7")
    assert not job_store.reconcile_workspace("ws-main", actor="operator:7")  # already free
    assert job_store.quarantined_workspaces() == []
    assert job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id="a-2")

    kinds = [(e.kind, e.actor, e.action_id) for e in job_store.audit_entries()]
    assert kinds == [
        ("workspace.quarantined", "executor", "a-1"),
        ("workspace.reconciled", "operator:7", "a-1"),
    ]
    reconciled = job_store.audit_entries(kind="workspace.reconciled")[0]
    assert reconciled.detail == {
        "workspace_id": "ws-main",
        "quarantine_reason": "agent timed out after the prompt",
    }


def test_quarantining_an_unknown_workspace_still_blocks_it(job_store: JobStore) -> None:
    job_store.quarantine_workspace("ws-new", action_id="a-1", reason="crashed before acquiring")
    assert not job_store.acquire_workspace("ws-new", path="/srv/ws/new", action_id="a-2")
    assert not job_store.reconcile_workspace("ws-missing", actor="operator:7")


def test_restart_loses_running_jobs_and_expires_stale_proposals(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    running, _ = job_store.create(make_proposal(workspace_id="ws-main"))
    running = advance(job_store, running, JobEvent.DELIVER, JobEvent.CONFIRM)
    assert job_store.acquire_workspace("ws-main", path="/srv/ws/main", action_id=running.id)
    running = advance(job_store, running, JobEvent.START)
    stale, _ = job_store.create(make_proposal(expires_at=store_clock.wall() + 10))
    waiting, _ = job_store.create(make_proposal(expires_at=store_clock.wall() + 600))
    waiting = advance(job_store, waiting, JobEvent.DELIVER)
    queued, _ = job_store.create(make_proposal())
    queued = advance(job_store, queued, JobEvent.DELIVER, JobEvent.CONFIRM)
    store_clock.advance(60)

    changed = job_store.reconcile_after_restart()

    assert [(r.id, r.status) for r in changed] == [
        (running.id, JobStatus.OUTCOME_UNKNOWN),
        (queued.id, JobStatus.FAILED),
        (stale.id, JobStatus.EXPIRED),
    ]
    lost = job_store.transitions(running.id)[-1]
    assert (lost.event, lost.actor, lost.reason) == (JobEvent.LOSE, "startup", RESTART_REASON)
    assert job_store.transitions(stale.id)[-1].reason == EXPIRY_REASON
    (blocked,) = job_store.quarantined_workspaces()
    assert (blocked.id, blocked.action_id, blocked.reason) == ("ws-main", running.id, RESTART_REASON)
    assert job_store.get(waiting.id) == waiting  # not yet expired
    # Confirmed but never started: nothing ran, and the confirmation's voice session is gone.
    not_started = job_store.get(queued.id)
    assert not_started is not None and not_started.error_code == "ACTION_NOT_STARTED"

    assert job_store.reconcile_after_restart() == []

    store_clock.advance(600)
    (expired,) = job_store.expire_overdue(actor="broker")
    assert (expired.id, expired.status) == (waiting.id, JobStatus.EXPIRED)
