"""``openab-voice executor`` as real worker processes on real PostgreSQL, with the scripted ACP agent.

Every job runs exactly once across N workers; a worker killed with SIGKILL mid-job leaves that job
``running`` until its lease expires, then another worker's reaper makes it ``outcome_unknown`` with
its workspace quarantined, and the other jobs are unaffected; SIGTERM drains (the agent is cancelled
per ACP, the job settled, the worker exits 0 within its bound); ``--health`` follows the heartbeat;
a bot with remote executors queues a confirmation and delivers what a real worker did, its cancel
reaches the worker holding the lease (at once by the store's notification; by the heartbeat when the
notification is missed), and its restart leaves a running worker's job untouched.

The test waits for the workers by reading the store (they are other processes: there is no gate to
hold them at), with a deadline per wait.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from openab_voice.acp.spawn import STDERR_LOG
from openab_voice.actions.events import AgentProcessStarted
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.audit_rows import add_audit
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.job_leases import LEASE_EXPIRED_REASON
from openab_voice.store.jobs import JobStore
from openab_voice.store.lease_rows import CANCEL_REQUESTED
from openab_voice.store.records import WorkerState, WorkspaceState
from openab_voice.testing.acp_agent import CANCEL_RECEIVED, PROMPT_RECEIVED, received_at
from openab_voice.testing.jobs import confirm_job
from tests.fakes.actions import OPERATOR, PlaneRig, plane_rig, propose_and_confirm

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)

# The issue asks for 200; 24 keeps the shared 2-core test machine usable (each job is a fresh agent
# process): OPENAB_TEST_EXECUTOR_JOBS=200 runs the full count.
JOBS = int(os.environ.get("OPENAB_TEST_EXECUTOR_JOBS", "24"))
WORKERS = 4
WAIT_S = 180.0
# Each job is a fresh agent process (about 1 s of CPU here, more under load): scale the bounds with it.
JOBS_WAIT_S = max(WAIT_S, 5.0 * JOBS)


@pytest.fixture
def store(db_url: str) -> Iterator[JobStore]:
    upgrade(db_url)
    store = JobStore(open_engine(db_url), SystemClock())
    try:
        yield store
    finally:
        store.close()


def confirm_jobs(store: JobStore, count: int, goal: str = "write a haiku") -> list[str]:
    """``count`` jobs confirmed by the operator (as the bot writes them), oldest first."""
    return [confirm_job(store, goal=f"{goal} {n}", expires_at=time.time() + 600) for n in range(count)]


async def running_on(rig: PlaneRig, action_id: str, worker: Worker) -> None:
    """Wait until ``action_id`` runs and ``worker`` has its agent."""
    await asyncio.to_thread(
        wait_until,
        lambda: rig.store.require(action_id).status is JobStatus.RUNNING and bool(worker.agents()),
        "the agent",
    )


class Worker:
    """One ``openab-voice executor`` process."""

    def __init__(self, db_url: str, root: Path, node: str, *, mode: str = "normal", **settings: str) -> None:
        self.node = node
        self.data_dir = root / node
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")}
        self.env.update(
            {
                "OPENAB_DATABASE_URL": db_url,
                "OPENAB_DATA_DIR": str(self.data_dir),
                "OPENAB_NODE_ID": node,
                "OPENAB_ACP_AGENT_COMMAND": f"{sys.executable} -m openab_voice.testing.acp_agent --mode {mode}",
                "OPENAB_ACP_SANDBOX": "off",
                "OPENAB_EXECUTOR_POLL_S": "0.05",
                "OPENAB_LEASE_S": "2",
                "OPENAB_HEARTBEAT_S": "0.5",
                "OPENAB_ACP_CANCEL_GRACE_S": "1",
                "OPENAB_LOG_LEVEL": "WARNING",
                **settings,
            }
        )
        self.log = root / f"{node}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "openab_voice", "executor"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def health(self) -> int:
        return subprocess.run(
            [sys.executable, "-m", "openab_voice", "executor", "--health"],
            env=self.env,
            capture_output=True,
            timeout=60,
        ).returncode

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait for the exit (a drain)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def agents(self) -> list[int]:
        """Live agent processes working in this worker's workspaces (their cwd is under its data dir)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(self.data_dir) + os.sep):
                pids.append(int(entry.name))
        return pids


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(node: str, **kwargs: str) -> Worker:
        worker = Worker(db_url, tmp_path, node, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(30)
        for pid in worker.agents():  # an agent orphaned by a SIGKILLed worker (no sandbox here)
            os.kill(pid, signal.SIGKILL)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)  # real time: polls worker processes and the store they write


def starts(store: JobStore, action_id: str) -> int:
    return sum(1 for t in store.transitions(action_id) if t.event == JobEvent.START)


@pytest.mark.timeout(60 + 6 * JOBS)
def test_n_workers_run_every_job_exactly_once(store: JobStore, workers: Callable[..., Worker]) -> None:
    jobs = confirm_jobs(store, JOBS)
    # A long lease: on a loaded 2-core machine a 2 s lease can miss a heartbeat, and a live job is
    # then (rightly) reaped; this test is about sharing the work out, the next one about leases.
    pool = [workers(f"w{n}", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="1") for n in range(WORKERS)]

    wait_until(
        lambda: all(store.require(j).status.terminal for j in jobs), f"{JOBS} jobs to settle", JOBS_WAIT_S
    )

    records = [store.require(j) for j in jobs]
    nodes = set()
    assert {r.status for r in records} == {JobStatus.SUCCEEDED}, [(r.id, r.status, r.detail) for r in records]
    assert all(starts(store, j) == 1 for j in jobs)
    for record in records:
        # Ran where its lease says, and only there: its workspace exists in exactly one worker.
        assert record.lease_owner is not None
        node = record.lease_owner.split(":", 1)[1].split("/", 1)[0]
        ran_in = [
            w.node for w in pool if (w.data_dir / "workspaces" / record.id / "work" / "RESULT.md").is_file()
        ]
        assert ran_in == [node], (record.id, ran_in)
        nodes.add(node)
        assert record.result_text and "haiku" in record.result_text
    assert len(nodes) > 1, nodes  # shared out, not run by one worker while the others skipped
    assert [w.health() for w in pool] == [0] * WORKERS

    assert [w.stop() for w in pool] == [0] * WORKERS
    assert {w.state for w in store.workers()} == {WorkerState.STOPPED}
    assert [w.health() for w in pool] == [1] * WORKERS


def test_a_killed_workers_job_is_lost_once_its_lease_expires_and_nothing_else_is(
    store: JobStore, workers: Callable[..., Worker]
) -> None:
    [victim] = confirm_jobs(store, 1, "hang forever")
    doomed = workers("wa", mode="hang")
    wait_until(
        lambda: store.require(victim).status is JobStatus.RUNNING and bool(doomed.agents()),
        "the agent to run",
    )
    running = store.require(victim)
    assert running.lease_owner is not None and running.lease_owner.startswith("executor:wa/")

    others = confirm_jobs(store, 6)
    survivor = workers("wb")
    # Killed while the survivor works beside it (wa runs one job at a time: it takes none of these).
    wait_until(lambda: any(store.require(j).status is not JobStatus.CONFIRMED for j in others), "wb to start")
    doomed.process.kill()  # SIGKILL: no drain, no settle, the lease is simply no longer renewed
    doomed.process.wait(30)

    wait_until(
        lambda: all(store.require(j).status.terminal for j in [victim, *others]), "every job to settle"
    )
    lost = store.require(victim)
    assert (lost.status, lost.error_code) == (JobStatus.OUTCOME_UNKNOWN, "ACTION_LOST")
    [*_, last] = store.transitions(victim)
    assert last.event == JobEvent.LOSE and last.reason == LEASE_EXPIRED_REASON
    assert last.actor.startswith("reaper:executor:wb/")
    assert last.at >= (running.lease_until or 0)  # not before the lease had expired
    workspace = store.workspace(f"scratch:{victim}")
    assert workspace is not None and workspace.state is WorkspaceState.QUARANTINED
    assert starts(store, victim) == 1  # never re-run
    assert {store.require(j).status for j in others} == {JobStatus.SUCCEEDED}
    assert survivor.stop() == 0


def test_sigterm_drains_cancels_the_agent_per_acp_and_exits_in_bound(
    store: JobStore, workers: Callable[..., Worker]
) -> None:
    job, queued = confirm_jobs(store, 2, "a long piece of work")
    worker = workers("wd", mode="slow", OPENAB_EXECUTOR_DRAIN_S="10")
    wait_until(lambda: store.require(job).status is JobStatus.RUNNING and bool(worker.agents()), "the agent")
    assert worker.health() == 0

    began = time.monotonic()
    assert worker.stop(timeout_s=30) == 0, worker.output()
    assert time.monotonic() - began < 12  # the drain bound, and the agent's cancel well inside it

    settled = store.require(job)
    assert settled.status is JobStatus.CANCELLED, (settled.status, settled.detail)
    assert worker.agents() == []
    assert store.require(queued).status is JobStatus.CONFIRMED  # not claimed while draining
    [me] = store.workers(node="wd")
    assert me.state is WorkerState.STOPPED
    assert worker.health() != 0
    workspace = store.workspace(f"scratch:{job}")
    assert workspace is not None and workspace.state is WorkspaceState.FREE


async def test_a_remote_bot_queues_the_confirmation_and_delivers_what_a_real_worker_did(
    db_url: str, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    async with plane_rig(db_url, tmp_path / "bot", clock=SystemClock(), remote_poll_s=0.1) as rig:
        await rig.plane.start()
        worker = workers("wr", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="1")
        action_id = await propose_and_confirm(rig, "write a haiku about the sea", call_id="turn-1:call-1")

        await rig.log.wait_for("say", timeout_s=WAIT_S)  # after the post and its stored outcome

        [text] = rig.channel.results()
        assert "haiku about the sea" in text
        record = rig.store.require(action_id)
        assert (record.status, record.delivery_outcome) == (JobStatus.SUCCEEDED, "delivered")
        assert record.lease_owner is not None and record.lease_owner.startswith("executor:wr/")
        assert (worker.data_dir / "workspaces" / action_id / "work" / "RESULT.md").is_file()
        assert rig.published(AgentProcessStarted) == []  # the bot spawned nothing
        names = rig.log.names()
        assert names.index("post_result") < names.index("say")
        assert worker.stop() == 0


async def test_a_cancel_from_the_bot_reaches_the_worker_holding_the_lease(
    db_url: str, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    async with plane_rig(db_url, tmp_path / "bot", clock=SystemClock(), remote_poll_s=0.1) as rig:
        await rig.plane.start()
        worker = workers("wc", mode="slow", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="0.5")
        action_id = await propose_and_confirm(rig, "a long piece of work", call_id="turn-1:call-1")
        await running_on(rig, action_id, worker)

        cancel = await rig.broker.cancel(action_id, user_id=OPERATOR)
        assert cancel.ok and "on its worker" in cancel.message, cancel
        await rig.log.wait_for("say", timeout_s=WAIT_S)

        record = rig.store.require(action_id)
        # Cancelled by the agent (stop reason `cancelled`) or, when the cancel came before the prompt
        # was sent, before anything was asked of it: either way the worker settled it, not the bot.
        assert record.status is JobStatus.CANCELLED, (record.status, record.detail)
        [*_, last] = rig.store.transitions(action_id)
        assert last.actor in ("agent", "system"), last
        assert record.lease_owner is not None and record.lease_owner.startswith("executor:wc/")
        [text] = rig.channel.results()
        assert "cancel" in text.lower()
        assert worker.agents() == []
        assert worker.stop() == 0


async def test_a_bot_restart_while_a_worker_runs_touches_no_live_job(
    db_url: str, tmp_path: Path, workers: Callable[..., Worker]
) -> None:
    worker = workers("wk", mode="slow", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="0.5")
    async with plane_rig(db_url, tmp_path / "bot", clock=SystemClock(), remote_poll_s=0.1) as before:
        await before.plane.start()
        action_id = await propose_and_confirm(before, "a long piece of work", call_id="turn-1:call-1")
        await running_on(before, action_id, worker)
        running = before.store.require(action_id)
    # The bot is gone and comes back (same node, a new incarnation): the worker's live lease decides.
    async with plane_rig(db_url, tmp_path / "bot", clock=SystemClock(), remote_poll_s=0.1) as after:
        await after.plane.start()
        now = after.store.require(action_id)
        # Not lost, not even rewritten (its worker's heartbeat moves only the lease's expiry).
        assert (now.status, now.version, now.lease_owner) == (
            running.status,
            running.version,
            running.lease_owner,
        )
        assert worker.agents()

        cancel = await after.broker.cancel(action_id, user_id=OPERATOR)  # still reachable
        assert cancel.ok, cancel
        await after.log.wait_for("say", timeout_s=WAIT_S)
        assert after.store.require(action_id).status is JobStatus.CANCELLED
        assert len(after.channel.results()) == 1  # the new bot delivered the worker's verdict
    assert worker.stop() == 0


def agent_log(worker: Worker, action_id: str) -> Path:
    return worker.data_dir / "workspaces" / action_id / "private" / "logs" / STDERR_LOG


def test_a_cancel_reaches_the_worker_by_notification_long_before_its_heartbeat(
    store: JobStore, workers: Callable[..., Worker]
) -> None:
    # A 20 s heartbeat: a cancel carried only by it would take up to 20 s (10 s on average).
    worker = workers("wn", mode="slow", OPENAB_LEASE_S="60", OPENAB_HEARTBEAT_S="20")
    [job] = confirm_jobs(store, 1, "a long piece of work")
    log = agent_log(worker, job)
    wait_until(lambda: bool(received_at(log, PROMPT_RECEIVED)), "the prompt at the agent")

    asked = time.time()
    assert store.request_cancel(job, actor="111222333444555666")
    wait_until(lambda: bool(received_at(log, CANCEL_RECEIVED)), "session/cancel at the agent", 30.0)
    [arrived] = received_at(log, CANCEL_RECEIVED)
    assert arrived - asked < 2.0, f"cancel took {arrived - asked:.3f} s"
    wait_until(lambda: store.require(job).status.terminal, "the job to settle", 30.0)
    assert store.require(job).status is JobStatus.CANCELLED
    assert worker.stop() == 0, worker.output()


def test_a_cancel_whose_notification_is_missed_still_arrives_with_the_heartbeat(
    db_url: str, store: JobStore, workers: Callable[..., Worker]
) -> None:
    worker = workers("wh", mode="slow", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="1")
    [job] = confirm_jobs(store, 1, "a long piece of work")
    log = agent_log(worker, job)
    wait_until(lambda: bool(received_at(log, PROMPT_RECEIVED)), "the prompt at the agent")

    # The request row without its NOTIFY (as if the worker's listener were reconnecting).
    engine = open_engine(db_url)
    with Session(engine) as session, session.begin():
        add_audit(session, now=time.time(), kind=CANCEL_REQUESTED, actor="test", action_id=job, detail={})
    engine.dispose()
    wait_until(lambda: store.require(job).status.terminal, "the job to settle", 30.0)
    assert store.require(job).status is JobStatus.CANCELLED
    assert len(received_at(log, CANCEL_RECEIVED)) == 1
    assert worker.stop() == 0, worker.output()
