"""A bot pod's share of the store: with its shards given, the store hands it only its own guilds'
proposals to expire, confirmed jobs to reconcile and results to deliver (both databases)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from openab_voice.jobs import AWAITING_CONFIRMATION, JobEvent, JobStatus
from openab_voice.shards import ShardRange, shard_of
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, NewAction

both_databases = pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)

MakeProposal = Callable[..., NewAction]
# Real-sized snowflakes on shard 0 and shard 1 of 2 (the low 22 bits do not count).
GUILD_0 = (1_300_000_000_002 << 22) | 0x3FFFFF
GUILD_1 = (1_300_000_000_001 << 22) | 5
POD_0, POD_1 = ShardRange(ids=(0,), count=2), ShardRange(ids=(1,), count=2)
WORKER = "executor:w0/abc"


def test_the_guilds_are_on_the_shards_this_test_says() -> None:
    assert (shard_of(GUILD_0, 2), shard_of(GUILD_1, 2)) == (0, 1)


def proposals(job_store: JobStore, make_proposal: MakeProposal, **fields: object) -> tuple[str, str]:
    zero, _ = job_store.create(make_proposal(guild_id=GUILD_0, **fields))
    one, _ = job_store.create(make_proposal(guild_id=GUILD_1, **fields))
    return zero.id, one.id


def ids(records: Sequence[ActionRecord]) -> set[str]:
    return {r.id for r in records}


@both_databases
def test_each_pod_sees_only_its_guilds_waiting(job_store: JobStore, make_proposal: MakeProposal) -> None:
    zero, one = proposals(job_store, make_proposal)
    assert ids(job_store.in_status(*AWAITING_CONFIRMATION, shards=POD_0)) == {zero}
    assert ids(job_store.in_status(*AWAITING_CONFIRMATION, shards=POD_1)) == {one}
    assert ids(job_store.in_status(*AWAITING_CONFIRMATION)) == {zero, one}


@both_databases
def test_a_pod_expires_and_reconciles_only_its_guilds(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    zero, one = proposals(job_store, make_proposal, expires_at=0.0)  # overdue at once
    unstarted = []
    for guild in (GUILD_0, GUILD_1):  # confirmed, never started, no lease: dead after a restart
        job, _ = job_store.create(make_proposal(guild_id=guild))
        job_store.apply(job.id, JobEvent.DELIVER, actor="test")
        job_store.apply(job.id, JobEvent.CONFIRM, actor="test", confirmed_by=1)
        unstarted.append(job.id)

    changed = job_store.reconcile_after_restart(shards=POD_1)
    assert ids(changed) == {one, unstarted[1]}
    assert job_store.require(zero).status is JobStatus.PROPOSED  # pod 0's to expire
    assert job_store.require(unstarted[0]).status is JobStatus.CONFIRMED  # pod 0's to settle
    assert ids(job_store.expire_overdue(actor="test", shards=POD_0)) == {zero}


@both_databases
def test_a_pod_delivers_only_its_guilds_results(job_store: JobStore, make_proposal: MakeProposal) -> None:
    settled = []
    for guild in (GUILD_0, GUILD_1):
        job, _ = job_store.create(make_proposal(guild_id=guild))
        job_store.apply(job.id, JobEvent.DELIVER, actor="test")
        job_store.apply(job.id, JobEvent.CONFIRM, actor="test", confirmed_by=1)
        claimed = job_store.claim_next(worker_id=WORKER, lease_s=30)
        assert claimed is not None
        running = job_store.apply(
            claimed.id, JobEvent.START, actor="system", expected_version=claimed.version, lease_owner=WORKER
        )
        job_store.apply(running.id, JobEvent.SUCCEED, actor="agent", result_text="done")
        settled.append(running.id)

    assert ids(job_store.undelivered_results(owner_prefix="executor:", shards=POD_0)) == {settled[0]}
    assert ids(job_store.undelivered_results(owner_prefix="executor:", shards=POD_1)) == {settled[1]}
    assert ids(job_store.undelivered_results(owner_prefix="executor:")) == set(settled)
