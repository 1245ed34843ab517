"""``openab-voice bench executor``: N ``openab-voice executor`` worker processes on real PostgreSQL.

For each N (``--workers 1,2,4``), in a fresh schema, with the scripted ACP agent: ``confirm_to_running_ms``,
``jobs_per_s``, ``queued_confirm_to_running_ms``, ``double_executions``, ``not_succeeded``,
``cancel`` (``to_acp_cancel_ms``, ``heartbeat_only_ms``) and ``confirm_to_prompt_at_agent_ms``.
``--mode pod`` measures in-process agents, then action pods on the cluster ``KUBECONFIG`` names.
PostgreSQL: ``--postgres-url``, ``TEST_POSTGRES_URL``, or a throwaway local cluster.
What each figure measures: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session

from openab_voice.acp.spawn import STDERR_LOG
from openab_voice.bench.actions import _postgres
from openab_voice.bench.stats import summary
from openab_voice.clock import SystemClock
from openab_voice.errors import ErrorCode
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.store.audit_rows import add_audit
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.jobs import JobStore
from openab_voice.store.lease_rows import CANCEL_REQUESTED
from openab_voice.testing.acp_agent import CANCEL_RECEIVED, PROMPT_RECEIVED, received_at
from openab_voice.testing.jobs import confirm_job

_WAIT_S = 900.0
_HEARTBEAT_S = 10.0  # the default: what a cancel waited for before it was notified
_CLOCK = SystemClock()


def run(
    *,
    workers: Sequence[int] = (1, 2, 4),
    jobs: int = 200,
    latency_jobs: int = 10,
    poll_s: float = 0.1,
    cancels: int = 10,
    heartbeat_cancels: int = 3,
    postgres_url: str | None = None,
    mode: str = "process",
    pod_image: str = "openab-voice:local",
    pod_namespace: str | None = None,
) -> dict[str, Any]:
    """Measure each worker count in ``workers``, then ``cancels`` cancels; the JSON report."""
    if mode == "pod" and not os.environ.get("KUBECONFIG"):
        return {
            "error": {
                "code": ErrorCode.BENCH_NO_CLUSTER,
                "message": "--mode pod needs KUBECONFIG naming a cluster",
            }
        }
    with (
        tempfile.TemporaryDirectory(prefix="openab-bench-executor-") as scratch,
        _postgres(postgres_url, Path(scratch)) as server,
    ):
        if isinstance(server, dict):
            return server
        by_count = {
            str(n): _measure(server, n, jobs, latency_jobs, poll_s, Path(scratch) / f"n{n}") for n in workers
        }
        pods = None
        if mode == "pod":
            pod = _PodMode(image=pod_image, namespace=pod_namespace)
            pods = {
                str(n): _measure(server, n, jobs, latency_jobs, poll_s, Path(scratch) / f"pod{n}", pod=pod)
                for n in workers
            }
        cancel = (
            _measure_cancels(server, cancels, heartbeat_cancels, poll_s, Path(scratch) / "cancel")
            if cancels
            else None
        )
    return {
        "jobs": jobs,
        "latency_jobs": latency_jobs,
        "poll_s": poll_s,
        "mode": mode,
        "workers": by_count,
        "pod_workers": pods,
        "double_executions": sum(
            r["double_executions"] for r in [*by_count.values(), *(pods or {}).values()]
        ),
        "cancel": cancel,
    }


def _measure_cancels(
    server: str, cancels: int, heartbeat_cancels: int, poll_s: float, root: Path
) -> dict[str, Any]:
    url, drop = _fresh_schema(server)
    try:
        upgrade(url)
        engine = open_engine(url)
        store = JobStore(engine, SystemClock())
        worker = _Worker(url, root, "bench-cancel", poll_s, mode="slow")
        try:
            notified = [_cancel_once(store, engine, worker, notify=True) for _ in range(cancels)]
            quiet = [_cancel_once(store, engine, worker, notify=False) for _ in range(heartbeat_cancels)]
            statuses = [store.require(j).status.value for j, _ in notified + quiet]
        finally:
            exit_code = worker.stop()
            store.close()
        return {
            "heartbeat_s": _HEARTBEAT_S,
            "to_acp_cancel_ms": summary([ms for _, ms in notified]),
            "heartbeat_only_ms": summary([ms for _, ms in quiet]),
            "not_cancelled": sum(s != JobStatus.CANCELLED.value for s in statuses),
            "worker_exit_code": exit_code,
        }
    finally:
        drop()


def _cancel_once(store: JobStore, engine: Engine, worker: _Worker, *, notify: bool) -> tuple[str, float]:
    """One slow job, cancelled once its prompt arrived: (its id, cancel → ``session/cancel`` in ms)."""
    [job] = _confirm(store, 1)
    log = worker.data_dir / "workspaces" / job / "private" / "logs" / STDERR_LOG
    _wait(lambda: bool(received_at(log, PROMPT_RECEIVED)), "the prompt at the agent")
    asked = _CLOCK.wall()
    if notify:
        store.request_cancel(job, actor="bench")
    else:  # the request row alone, as if the notification were lost: only the heartbeat carries it
        with Session(engine) as session, session.begin():
            add_audit(session, now=asked, kind=CANCEL_REQUESTED, actor="bench", action_id=job, detail={})
    _wait(lambda: bool(received_at(log, CANCEL_RECEIVED)), "session/cancel at the agent")
    _wait(lambda: store.require(job).status.terminal, "the cancelled job to settle")
    return job, (received_at(log, CANCEL_RECEIVED)[0] - asked) * 1000.0


@dataclass(frozen=True, slots=True)
class _PodMode:
    image: str
    namespace: str | None


def _measure(
    server: str,
    count: int,
    jobs: int,
    latency_jobs: int,
    poll_s: float,
    root: Path,
    *,
    pod: _PodMode | None = None,
) -> dict[str, Any]:
    url, drop = _fresh_schema(server)
    try:
        upgrade(url)
        store = JobStore(open_engine(url), SystemClock())
        pool = [_Worker(url, root, f"bench-w{i}", poll_s, pod=pod) for i in range(count)]
        try:
            _wait(lambda: len([w for w in store.workers() if w.state == "running"]) == count, "workers up")
            latency_ids = []
            for _ in range(latency_jobs):  # one at a time: the workers are idle when it is confirmed
                [job] = _confirm(store, 1)
                _wait(lambda job=job: store.require(job).status.terminal, "a job to settle")  # type: ignore[misc]
                latency_ids.append(job)
            queued = _confirm(store, jobs)
            _wait(lambda: all(store.require(j).status.terminal for j in queued), f"{jobs} jobs to settle")
            first_confirm = min(_at(store, j, JobEvent.CONFIRM) for j in queued)
            last_settled = max(store.transitions(j)[-1].at for j in queued)
            every = latency_ids + queued
            doubles = sum(
                1
                for j in every
                if _starts(store, j) > 1
                or sum((w.data_dir / "workspaces" / j / "private").is_dir() for w in pool) > 1
            )
            result = {
                "jobs_per_s": round(jobs / max(last_settled - first_confirm, 1e-9), 2),
                "actions_per_min": round(60 * jobs / max(last_settled - first_confirm, 1e-9), 1),
                "confirm_to_running_ms": summary(_delays(store, latency_ids)),
                "confirm_to_prompt_at_agent_ms": summary(_prompt_delays(store, latency_ids, pool)),
                "queued_confirm_to_running_ms": summary(_delays(store, queued)),
                "double_executions": doubles,
                "not_succeeded": sum(store.require(j).status is not JobStatus.SUCCEEDED for j in every),
            }
        finally:
            result_rc = [w.stop() for w in pool]
            store.close()
        result["worker_exit_codes"] = result_rc
        return result
    finally:
        drop()


class _Worker:
    def __init__(
        self,
        url: str,
        root: Path,
        node: str,
        poll_s: float,
        *,
        mode: str = "normal",
        pod: _PodMode | None = None,
    ) -> None:
        self.data_dir = root / node
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")}
        # In a pod the agent is the image's python; here, ours.
        python = "python" if pod is not None else sys.executable
        env.update(
            {
                "OPENAB_DATABASE_URL": url,
                "OPENAB_DATA_DIR": str(self.data_dir),
                "OPENAB_NODE_ID": node,
                "OPENAB_ACP_AGENT_COMMAND": f"{python} -m openab_voice.testing.acp_agent --mode {mode}",
                # Today's figures: the agent as a plain local process (the sandbox off, said explicitly).
                "OPENAB_ACP_SANDBOX": "off" if pod is None else "pod",
                "OPENAB_EXECUTOR_POLL_S": str(poll_s),
                "OPENAB_HEARTBEAT_S": str(_HEARTBEAT_S),
                "OPENAB_LOG_LEVEL": "WARNING",
            }
        )
        if pod is not None:
            env["OPENAB_ACTION_POD_IMAGE"] = pod.image
            if pod.namespace is not None:
                env["OPENAB_ACTION_POD_NAMESPACE"] = pod.namespace
        root.mkdir(parents=True, exist_ok=True)
        self._log = (root / f"{node}.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "openab_voice", "executor"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(30)
        finally:
            self._log.close()


def _fresh_schema(server: str) -> tuple[str, Callable[[], None]]:
    parsed = make_url(server)
    if parsed.drivername in ("postgres", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    schema = f"openab_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(parsed, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()

    url = parsed.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )
    return url, drop


def _confirm(store: JobStore, count: int) -> list[str]:
    return [
        confirm_job(
            store,
            goal=f"write a haiku {n}",
            guild_id=1,
            text_channel_id=2,
            user_id=3,
            expires_at=_CLOCK.wall() + 3600,
            deliverer="bench",
        )
        for n in range(count)
    ]


def _at(store: JobStore, action_id: str, event: JobEvent) -> float:
    return next(t.at for t in store.transitions(action_id) if t.event == event)


def _starts(store: JobStore, action_id: str) -> int:
    return sum(1 for t in store.transitions(action_id) if t.event == JobEvent.START)


def _delays(store: JobStore, ids: list[str]) -> list[float]:
    return [
        (_at(store, j, JobEvent.START) - _at(store, j, JobEvent.CONFIRM)) * 1000.0
        for j in ids
        if _starts(store, j)
    ]


def _prompt_delays(store: JobStore, ids: list[str], pool: list[_Worker]) -> list[float]:
    """Confirmation → the prompt at the agent (its stamp in the stderr log of whichever worker ran it)."""
    delays = []
    for job in ids:
        for worker in pool:
            stamps = received_at(
                worker.data_dir / "workspaces" / job / "private" / "logs" / STDERR_LOG, PROMPT_RECEIVED
            )
            if stamps:
                delays.append((stamps[0] - _at(store, job, JobEvent.CONFIRM)) * 1000.0)
                break
    return delays


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = _CLOCK.monotonic() + _WAIT_S
    while not condition():
        if _CLOCK.monotonic() > deadline:
            raise TimeoutError(f"bench executor: timed out waiting for {what}")
        time.sleep(0.02)  # noqa: TID251 -- the bench watches other processes through the store
