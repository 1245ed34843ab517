"""``openab-voice executor``: an executor worker built from settings, and its health check.

A worker needs only the job store (``OPENAB_DATABASE_URL``, PostgreSQL), the agent command and the
agent's own credentials (``OPENAB_ACP_*``): no Discord token, no provider keys. It does not migrate
the store (the bot or ``openab-voice db upgrade`` does); it refuses a schema that is not at head.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from typing import Any

from openab_voice.acp.kube import KubernetesPodApi
from openab_voice.acp.pod import PodLauncher, reap_pod
from openab_voice.acp.pod_workspace import PodWorkspaces
from openab_voice.acp.workspace import WorkspaceManager, Workspaces
from openab_voice.actions.execution import ActionExecutor, workspace_root
from openab_voice.actions.leases import EXECUTOR_ROLE, LeaseKeeper, default_node
from openab_voice.actions.worker import ExecutorWorker, StoredResults, WorkerSettings
from openab_voice.actions.writer import JobWriter
from openab_voice.app.actions import agent_settings, lease_settings, pod_settings
from openab_voice.bus import EventBus
from openab_voice.clock import Clock
from openab_voice.config import Settings
from openab_voice.errors import AcpError, ConfigError, ErrorCode
from openab_voice.store.database import ensure_schema, open_engine, resolve_url
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import ActionRecord, WorkerState
from openab_voice.tasks import TaskOwner


def worker_url(settings: Settings) -> str:
    """The store a worker claims from: PostgreSQL only.

    Raises:
        ConfigError: ``OPENAB_DATABASE_URL`` is unset or not PostgreSQL (workers share the store; an
            SQLite file is one process's).
    """
    if settings.database_url is None:
        raise ConfigError(
            "openab-voice executor needs OPENAB_DATABASE_URL (PostgreSQL)",
            setting="OPENAB_DATABASE_URL",
            code=ErrorCode.CONFIG_EXECUTOR_NEEDS_POSTGRES,
        )
    url = resolve_url(settings)
    if not url.startswith(("postgresql", "postgres")):
        raise ConfigError(
            "openab-voice executor needs a PostgreSQL OPENAB_DATABASE_URL",
            setting="OPENAB_DATABASE_URL",
            code=ErrorCode.CONFIG_EXECUTOR_NEEDS_POSTGRES,
        )
    return url


def worker_settings(settings: Settings) -> WorkerSettings:
    """How a worker takes jobs (``OPENAB_EXECUTOR_*``)."""
    return WorkerSettings(
        concurrency=settings.executor_concurrency,
        poll_s=settings.executor_poll_s,
        drain_s=settings.executor_drain_s,
    )


async def run_worker(
    settings: Settings, *, clock: Clock, bus: EventBus, environ: Mapping[str, str] | None = None
) -> ExecutorWorker:
    """Run a worker until SIGTERM (or SIGINT) has drained it; returns the drained worker.

    Raises:
        ConfigError: no PostgreSQL URL, no agent command, or no containment (a worker that cannot
            contain an agent refuses to start: ``ACP_CONTAINMENT_UNAVAILABLE``).
        StoreError: the store is unreachable or its schema is not at head.
    """
    url = worker_url(settings)
    if not settings.acp_agent_command.strip():
        raise ConfigError(
            "openab-voice executor needs OPENAB_ACP_AGENT_COMMAND",
            setting="OPENAB_ACP_AGENT_COMMAND",
            code=ErrorCode.CONFIG_MISSING,
        )
    pods = (
        await _pod_launcher(settings, clock=clock, environ=environ) if settings.acp_sandbox == "pod" else None
    )
    try:
        return await _run_worker(settings, url, pods, clock=clock, bus=bus, environ=environ)
    finally:
        if pods is not None:
            await pods.api.aclose()


async def _pod_launcher(
    settings: Settings, *, clock: Clock, environ: Mapping[str, str] | None
) -> PodLauncher:
    """The action pods' launcher, on the pod's own service account (or a kubeconfig outside one)."""
    try:
        api = await KubernetesPodApi.connect(settings.action_pod_namespace, clock=clock, environ=environ)
    except AcpError as exc:
        raise ConfigError(exc.message, setting="OPENAB_ACP_SANDBOX", code=exc.code) from None
    return PodLauncher(api, pod_settings(settings, namespace=api.namespace), clock=clock)


async def _run_worker(
    settings: Settings,
    url: str,
    pods: PodLauncher | None,
    *,
    clock: Clock,
    bus: EventBus,
    environ: Mapping[str, str] | None,
) -> ExecutorWorker:
    agent = agent_settings(settings, url=url, environ=environ, pods=pods)
    if agent.containment.refusal is not None:
        # Fail closed: a worker that cannot contain an agent claims nothing (another one may).
        raise ConfigError(
            f"openab-voice executor refuses to start: {agent.containment.refusal}",
            setting="OPENAB_ACP_SANDBOX",
            code=ErrorCode.ACP_CONTAINMENT_UNAVAILABLE,
        )
    engine = open_engine(url)
    ensure_schema(engine)
    store = JobStore(engine, clock)
    try:
        root = workspace_root(settings.data_dir)
        workspaces: Workspaces = (
            PodWorkspaces(pods.api, pods.settings, root, clock=clock)
            if pods is not None
            else WorkspaceManager(root, settings.workspace_repo, clock=clock)
        )

        orphans = TaskOwner("orphaned action pods", clock=clock)

        def lost(record: ActionRecord) -> None:
            # Only where the lost job's workspace is on this machine (it ran in this pod before).
            workspace = workspaces.locate(record.id)
            if workspace.private.is_dir():
                workspaces.quarantine(workspace, record.detail or "its executor stopped renewing the lease")
            if pods is not None:  # whichever dispatcher ran it, its pod must not outlive the job
                grace = round(settings.acp_cancel_grace_s)
                orphans.spawn(reap_pod(pods.api, record.id, grace_s=grace), name=f"reap-pod-{record.id}")

        leases = LeaseKeeper(
            JobWriter(store, bus=bus, clock=clock),
            lease_settings(settings, role=EXECUTOR_ROLE),
            on_reaped=lost,
        )
        executor = ActionExecutor(
            store=store,
            workspaces=workspaces,
            agent=agent,
            bus=bus,
            clock=clock,
            leases=leases,
            results=StoredResults(),
        )
        worker = ExecutorWorker(
            store=store,
            executor=executor,
            leases=leases,
            settings=worker_settings(settings),
            clock=clock,
        )
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, worker.drain)
        try:
            await worker.run()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            await orphans.aclose(grace_s=10.0)
        return worker
    finally:
        store.close()


def worker_health(settings: Settings, *, clock: Clock) -> dict[str, Any]:
    """``openab-voice executor --health``: is a worker of this node alive and heartbeating?

    Healthy when the store answers, its schema is at head, and a worker of ``OPENAB_NODE_ID`` (the
    host name: the pod's) reported itself running or draining within one lease. Never raises for an
    unhealthy state; the ``ok`` key says it, ``reason`` says why not.
    """
    node = settings.node_id or default_node()
    result: dict[str, Any] = {"ok": False, "node": node, "workers": []}
    try:
        url = worker_url(settings)
        engine = open_engine(url)
        try:
            ensure_schema(engine)
            store = JobStore(engine, clock)
            workers = store.workers(node=node)
        finally:
            engine.dispose()
    except Exception as exc:  # the probe reports; it does not crash
        result["reason"] = str(exc)
        return result
    now = clock.wall()
    live = [
        w for w in workers if w.state is not WorkerState.STOPPED and now - w.heartbeat_at <= settings.lease_s
    ]
    result["workers"] = [
        {
            "id": w.id,
            "state": w.state.value,
            "running": w.running,
            "heartbeat_age_s": round(now - w.heartbeat_at, 3),
        }
        for w in workers
    ]
    result["ok"] = bool(live)
    if not live:
        result["reason"] = f"no worker of node {node} heartbeat within {settings.lease_s:g} s"
    return result
