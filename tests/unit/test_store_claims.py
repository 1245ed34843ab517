"""JobStore.claim_next: executor workers lease confirmed jobs without ever sharing one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from openab_voice.clock import FakeClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction

MakeProposal = Callable[..., NewAction]


def confirmed(store: JobStore, make_proposal: MakeProposal) -> ActionRecord:
    record, _ = store.create(make_proposal())
    for event in (JobEvent.DELIVER, JobEvent.CONFIRM):
        record = store.apply(record.id, event, actor="test")
    return record


def test_claims_the_oldest_confirmed_job_and_leases_it(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    assert job_store.claim_next(worker_id="w1", lease_s=30) is None
    job_store.create(make_proposal())  # proposed: not claimable
    first = confirmed(job_store, make_proposal)
    store_clock.advance(1)
    second = confirmed(job_store, make_proposal)

    claimed = job_store.claim_next(worker_id="w1", lease_s=30)
    assert claimed is not None
    assert (claimed.id, claimed.status, claimed.lease_owner) == (first.id, JobStatus.CONFIRMED, "w1")
    assert claimed.lease_until == store_clock.wall() + 30
    assert claimed.version == first.version + 1

    other = job_store.claim_next(worker_id="w2", lease_s=30)
    assert other is not None and other.id == second.id
    assert job_store.claim_next(worker_id="w3", lease_s=30) is None

    started = job_store.apply(claimed.id, JobEvent.START, actor="w1", expected_version=claimed.version)
    assert started.status is JobStatus.RUNNING


def test_an_expired_lease_can_be_reclaimed(
    job_store: JobStore, make_proposal: MakeProposal, store_clock: FakeClock
) -> None:
    job = confirmed(job_store, make_proposal)
    assert job_store.claim_next(worker_id="w1", lease_s=30) is not None
    store_clock.advance(29)
    assert job_store.claim_next(worker_id="w2", lease_s=30) is None
    store_clock.advance(1)

    reclaimed = job_store.claim_next(worker_id="w2", lease_s=30)
    assert reclaimed is not None
    assert (reclaimed.id, reclaimed.lease_owner) == (job.id, "w2")


def test_concurrent_workers_never_claim_the_same_job(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    jobs = {confirmed(job_store, make_proposal).id for _ in range(12)}
    workers = 4
    start = threading.Barrier(workers)

    def work(n: int) -> list[str]:
        start.wait()
        mine = []
        while (claimed := job_store.claim_next(worker_id=f"w{n}", lease_s=60)) is not None:
            mine.append(claimed.id)
        return mine

    with ThreadPoolExecutor(workers) as pool:
        claims = [job_id for mine in pool.map(work, range(workers)) for job_id in mine]

    assert sorted(claims) == sorted(jobs)  # every job claimed exactly once
