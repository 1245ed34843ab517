"""PostgreSQL NOTIFY of settled jobs, and the remote bot's delivery woken by it (no 60 s poll waited)."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from pathlib import Path

import pytest

from openab_voice.clock import SystemClock
from openab_voice.errors import ActionError
from openab_voice.jobs import JobEvent
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import NewAction
from tests.fakes.actions import plane_rig
from tests.unit.test_actions_remote import WORKER, confirmed, worker_starts

MakeProposal = Callable[..., NewAction]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_only_a_committed_settlement_is_notified(job_store: JobStore, make_proposal: MakeProposal) -> None:
    heard: queue.Queue[str] = queue.Queue()
    listener = job_store.listen_settled(heard.put)
    assert listener is not None
    listener.start()
    try:
        assert listener.wait_listening(10)
        job, _ = job_store.create(make_proposal())
        job_store.apply(job.id, JobEvent.DELIVER, actor="test")  # not terminal: nothing
        with pytest.raises(ActionError):
            job_store.apply(job.id, JobEvent.SUCCEED, actor="test")  # refused: rolled back, nothing
        job_store.apply(job.id, JobEvent.REJECT, actor="test")

        assert heard.get(timeout=10) == job.id
        with pytest.raises(queue.Empty):
            heard.get(timeout=0.5)
    finally:
        listener.close()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_cancel_request_is_notified_on_its_own_channel_only_when_written(
    job_store: JobStore, make_proposal: MakeProposal
) -> None:
    cancels: queue.Queue[str] = queue.Queue()
    settled: queue.Queue[str] = queue.Queue()
    listeners = [job_store.listen_cancels(cancels.put), job_store.listen_settled(settled.put)]
    for listener in listeners:
        assert listener is not None
        listener.start()
    try:
        assert all(listener.wait_listening(10) for listener in listeners if listener is not None)
        job, _ = job_store.create(make_proposal())
        job_store.apply(job.id, JobEvent.DELIVER, actor="test")
        assert not job_store.request_cancel(job.id, actor="test")  # not running: nothing written
        job_store.apply(job.id, JobEvent.CONFIRM, actor="test", confirmed_by=1)
        running = worker_starts(job_store)
        assert job_store.request_cancel(running.id, actor="test")

        assert cancels.get(timeout=10) == job.id
        with pytest.raises(queue.Empty):
            cancels.get(timeout=0.5)
        assert settled.empty()  # a request settles nothing
    finally:
        for listener in listeners:
            if listener is not None:
                listener.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_has_no_listener(job_store: JobStore) -> None:
    assert job_store.listen_settled(lambda _id: None) is None
    assert job_store.listen_cancels(lambda _id: None) is None


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_a_settled_result_is_delivered_at_its_notification(db_url: str, tmp_path: Path) -> None:
    async with plane_rig(db_url, tmp_path, clock=SystemClock(), remote_poll_s=60.0) as rig:
        await rig.plane.start()
        assert rig.plane.remote is not None and rig.plane.remote.listener is not None
        assert await asyncio.to_thread(rig.plane.remote.listener.wait_listening, 10)
        action_id = await confirmed(rig)
        running = worker_starts(rig.store)
        assert running.lease_owner == WORKER
        rig.store.apply(
            action_id, JobEvent.SUCCEED, actor="agent", expected_version=running.version, result_text="done"
        )

        await rig.log.wait_for("post_result", timeout_s=10)  # the poll alone would take 60 s
        [text] = rig.channel.results()
        assert "done" in text
