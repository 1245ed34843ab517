"""One fresh Kubernetes pod per action: what it holds, how the dispatcher talks to it, and its end.

The dispatcher (``openab-voice executor`` with ``OPENAB_ACP_SANDBOX=pod``) never runs agent code: per
action it creates a PersistentVolumeClaim ``openab-ws-<id>`` (the workspace; a quarantined one
outlives the pod) and a locked-down pod ``openab-action-<id>`` holding only the agent image, its own
credentials and the workspace. ACP runs over the pod's ``attach`` stream; deleting the pod is the kill
boundary ("deleted and gone" is "process group quiescent"). The local path's outcome rules hold
unchanged (``acp/driver.py``). What the pod holds and why: docs/adr/0016-action-pods.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from openab_voice.clock import Clock, bounded
from openab_voice.errors import AcpError, ErrorCode
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.defaults import default_of

log = logging.getLogger(__name__)

ACTION_LABEL = "openab.dev/action-id"
ACTION_POD_NAME = "openab-voice-action"  # app.kubernetes.io/name of action pods (their NetworkPolicy)
WORKSPACE_NAME = "openab-voice-workspace"  # app.kubernetes.io/name of workspace claims
AGENT_CONTAINER = "agent"
WORKSPACE_MOUNT = Path("/workspace")
# The pods' user: the image's (Containerfile) and the other pods' (k8s/).
POD_UID = 10001
# Names become parts of object names and label values: lower case, at most 63 characters in all.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Set in the agent's environment by us; the image's own PATH stays (the dispatcher's may not fit it).
_NOT_PASSED = frozenset({"PATH", "HOME", "TMPDIR"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSettings:
    """How action pods are made (``OPENAB_ACTION_POD_*``)."""

    namespace: str
    image: str
    agent_secret: str = default_of(ActionSettings, "action_pod_agent_secret")
    service_account: str = default_of(ActionSettings, "action_pod_service_account")
    cpu: str = default_of(ActionSettings, "action_pod_cpu")
    memory: str = default_of(ActionSettings, "action_pod_memory")
    workspace_size: str = default_of(ActionSettings, "action_pod_workspace_size")
    storage_class: str | None = None
    start_timeout_s: float = default_of(ActionSettings, "action_pod_start_timeout_s")
    # activeDeadlineSeconds: the cluster ends the pod even if the dispatcher is gone.
    deadline_s: int = 3600


def pod_name(action_id: str) -> str:
    return _object_name("openab-action-", action_id)


def claim_name(action_id: str) -> str:
    return _object_name("openab-ws-", action_id)


def _object_name(prefix: str, action_id: str) -> str:
    name = prefix + action_id.lower()
    if len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise AcpError(
            f"action id {action_id!r} cannot name a Kubernetes object", code=ErrorCode.ACP_WORKSPACE_INVALID
        )
    return name


def _labels(action_id: str, name: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/part-of": "openab-voice",
        ACTION_LABEL: action_id.lower(),
    }


def claim_manifest(action_id: str, settings: PodSettings) -> dict[str, Any]:
    """The workspace claim of ``action_id``."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": settings.workspace_size}},
    }
    if settings.storage_class is not None:
        spec["storageClassName"] = settings.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim_name(action_id), "labels": _labels(action_id, WORKSPACE_NAME)},
        "spec": spec,
    }


def pod_manifest(
    action_id: str, command: Sequence[str], env: Mapping[str, str], settings: PodSettings
) -> dict[str, Any]:
    """The action pod of ``action_id``: the agent, its own secret, its workspace, nothing else.

    ``env`` holds non-secret values only (the allowlist); the agent's keys come from
    ``settings.agent_secret`` through ``envFrom``, so the dispatcher never reads them.
    """
    environment = [{"name": k, "value": v} for k, v in sorted(env.items()) if k not in _NOT_PASSED]
    environment += [{"name": "HOME", "value": "/tmp/home"}, {"name": "TMPDIR", "value": "/tmp"}]
    container = {
        "name": AGENT_CONTAINER,
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "workingDir": str(WORKSPACE_MOUNT),
        # The ACP stream: the dispatcher attaches to stdin/stdout; stdinOnce closes the agent's stdin
        # when it detaches, so an agent that outlives its conversation sees EOF.
        "stdin": True,
        "stdinOnce": True,
        "tty": False,
        "env": environment,
        "envFrom": [{"secretRef": {"name": settings.agent_secret}}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": _quarter(settings.cpu), "memory": _quarter(settings.memory)},
            "limits": {"cpu": settings.cpu, "memory": settings.memory},
        },
        "volumeMounts": [
            {"name": "workspace", "mountPath": str(WORKSPACE_MOUNT)},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(action_id), "labels": _labels(action_id, ACTION_POD_NAME)},
        "spec": {
            "serviceAccountName": settings.service_account,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": settings.deadline_s,
            "terminationGracePeriodSeconds": 5,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": POD_UID,
                "runAsGroup": POD_UID,
                "fsGroup": POD_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": [
                {"name": "workspace", "persistentVolumeClaim": {"claimName": claim_name(action_id)}},
                {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            ],
        },
    }


_BINARY = {"Ki": 1, "Mi": 1024, "Gi": 1024**2, "Ti": 1024**3}


def _quarter(quantity: str) -> str:
    """A quarter of a CPU or memory quantity (the request beside a limit), in the largest exact unit."""
    if quantity.endswith("m"):
        return f"{max(1, int(float(quantity[:-1]) / 4))}m"
    found = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", quantity)
    if found is None:
        return quantity
    number, unit = float(found.group(1)), found.group(2)
    if unit == "":  # CPUs
        return f"{max(1, int(number * 1000 / 4))}m"
    if unit not in _BINARY:
        return quantity
    kib = max(1, int(number * _BINARY[unit] / 4))
    for name, size in reversed(_BINARY.items()):
        if kib % size == 0:
            return f"{kib // size}{name}"
    return f"{kib}Ki"


class PodPhase(StrEnum):
    """Where a pod is, as far as the dispatcher cares."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
    GONE = "Gone"  # no such pod (deleted, or never created)


@dataclass(frozen=True, slots=True, kw_only=True)
class PodState:
    phase: PodPhase
    reason: str = ""  # why it is not running (a waiting container's reason: ErrImagePull, ...)


class AttachedStreams(Protocol):
    """The agent container's stdin and stdout through the API server."""

    reader: asyncio.StreamReader  # the agent's stdout (ACP from it); EOF when the stream ends

    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def close(self) -> None: ...
    def is_closing(self) -> bool: ...
    async def wait_closed(self) -> None: ...


class PodApi(Protocol):
    """The few Kubernetes calls the dispatcher makes (its Role allows exactly these, k8s/)."""

    namespace: str

    async def create(self, manifest: Mapping[str, Any]) -> None:
        """Create a Pod or PersistentVolumeClaim. Raises AcpError (``ACP_POD_FAILED``) when refused."""

    async def delete_pod(self, name: str, *, grace_s: int) -> None:
        """Delete a pod (absent: nothing to do)."""

    async def delete_claim(self, name: str) -> None:
        """Delete a PersistentVolumeClaim (absent: nothing to do)."""

    async def pod_state(self, name: str) -> PodState: ...

    async def wait_pod(self, name: str, *, until: frozenset[PodPhase], timeout_s: float) -> PodState:
        """Wait until the pod reaches a phase in ``until`` (or a container cannot start); the last state."""

    async def attach(self, name: str, container: str, *, stderr_log: Path) -> AttachedStreams:
        """Attach to the container's stdin/stdout; its stderr goes to ``stderr_log``."""

    async def aclose(self) -> None: ...


_STARTED = frozenset({PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.GONE})
_ENDED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.GONE})
_GONE = frozenset({PodPhase.GONE})
# How long a detached agent gets to exit by itself before its pod is deleted around it.
_EXIT_WAIT_S = 1.0


class _Bridge:
    """Asyncio streams over a socket pair, pumped to and from the attach stream.

    The ACP SDK takes only a real ``asyncio.StreamWriter`` / ``StreamReader``; a socket pair gives it
    those, and two pumps copy between our end and the pod's attach stream. EOF travels both ways:
    the pod's stdout ending shuts our end (the SDK reads EOF), the SDK closing its writer detaches.
    """

    def __init__(self, streams: AttachedStreams) -> None:
        self._streams = streams
        self._ours, self._theirs = socket.socketpair()
        self._ours.setblocking(False)
        self._pumps: list[asyncio.Task[None]] = []
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            sock=self._theirs, limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES
        )
        self._pumps = [asyncio.ensure_future(self._to_pod()), asyncio.ensure_future(self._from_pod())]

    async def _to_pod(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await loop.sock_recv(self._ours, 65536):
                self._streams.write(data)
                await self._streams.drain()
        except (OSError, ConnectionError) as exc:
            log.info("writing to the action pod ended: %s", type(exc).__name__)
        finally:
            self._streams.close()  # detach: stdinOnce closes the agent's stdin

    async def _from_pod(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await self._streams.reader.read(65536):
                await loop.sock_sendall(self._ours, data)
        except (OSError, ConnectionError) as exc:
            log.info("reading from the action pod ended: %s", type(exc).__name__)
        finally:
            with contextlib.suppress(OSError):
                self._ours.shutdown(socket.SHUT_WR)  # the SDK's reader sees EOF

    def close(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        self._streams.close()
        self.writer.close()
        self._ours.close()


class PodAgent:
    """An agent running in its action pod, attached. Same surface as ``AgentProcess`` for the driver."""

    sandboxed = True  # a pod is the sandbox: a command there can only write the workspace
    pid = 0
    pgid = 0

    def __init__(self, api: PodApi, name: str, bridge: _Bridge, *, clock: Clock, stderr_log: Path):
        self._api = api
        self.name = name
        self._streams = bridge
        self._clock = clock
        self.stderr_log = stderr_log
        self._gone = False
        self._kill: asyncio.Future[None] | None = None

    @property
    def stdin(self) -> asyncio.StreamWriter:
        return self._streams.writer

    @property
    def stdout(self) -> asyncio.StreamReader:
        return self._streams.reader

    @property
    def returncode(self) -> int | None:
        return None

    def kill_now(self) -> None:
        """Detach and delete the pod now, without waiting (an abandoned path; :meth:`stop` follows)."""
        self._streams.close()
        if self._kill is None:
            self._kill = asyncio.ensure_future(self._api.delete_pod(self.name, grace_s=0))
            self._kill.add_done_callback(_log_failure)

    def quiescent(self) -> bool:
        return self._gone

    async def stop(self, grace_s: float, *, kill_wait_s: float = 5.0) -> bool:
        """Detach (the agent's stdin closes); once its container has ended, or after ``grace_s``
        (the kubelet sends SIGTERM, then SIGKILL), the pod goes. Whether nothing of it runs any more.

        An agent whose stdin closed usually exits by itself: its pod is then ``Succeeded`` or
        ``Failed``, every container has ended (a container's processes die with its first one), and
        the pod object can go at once. Waiting for a graceful deletion of a finished pod instead cost
        about 6 s per action on the real test cluster (the kubelet tears the volumes down first).
        """
        try:
            self._streams.close()
            state = await self._api.wait_pod(self.name, until=_ENDED, timeout_s=min(grace_s, _EXIT_WAIT_S))
            if state.phase in _ENDED:
                await self._api.delete_pod(self.name, grace_s=0)
                self._gone = True
                return True
            await self._api.delete_pod(self.name, grace_s=max(0, round(grace_s)))
            state = await self._api.wait_pod(self.name, until=_GONE, timeout_s=grace_s + kill_wait_s)
            if state.phase is not PodPhase.GONE:
                await self._api.delete_pod(self.name, grace_s=0)  # force: the kubelet kills at once
                state = await self._api.wait_pod(self.name, until=_GONE, timeout_s=kill_wait_s)
            self._gone = state.phase is PodPhase.GONE
        except AcpError as exc:
            log.warning("stopping action pod %s: %s", self.name, exc.message)
        except BaseException:
            self.kill_now()
            raise
        if not self._gone:
            log.warning("action pod %s still exists after its deletion", self.name)
        return self._gone


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("deleting an action pod failed: %s", task.exception())


class PodLauncher:
    """Creates and attaches one action pod per agent run (``OPENAB_ACP_SANDBOX=pod``)."""

    def __init__(self, api: PodApi, settings: PodSettings, *, clock: Clock) -> None:
        self.api = api
        self.settings = settings
        self._clock = clock

    async def start(
        self, action_id: str, command: Sequence[str], env: Mapping[str, str], *, stderr_log: Path
    ) -> PodAgent:
        """Create the pod, wait until it runs, attach to the agent.

        Raises:
            AcpError: ``ACP_POD_FAILED`` when the pod cannot be created, does not run within the start
                timeout (image, scheduling) or ends before we attached; the pod is deleted again.
        """
        name = pod_name(action_id)
        await self.api.create(pod_manifest(action_id, command, env, self.settings))
        created = self._clock.monotonic()
        try:
            state = await self.api.wait_pod(name, until=_STARTED, timeout_s=self.settings.start_timeout_s)
            if state.phase is not PodPhase.RUNNING:
                what = f"{state.phase.value} {state.reason}".strip()
                waited = self._clock.monotonic() - created
                raise AcpError(
                    f"action pod {name} did not run ({what} after {waited:.1f} s)",
                    code=ErrorCode.ACP_POD_FAILED,
                )
            bridge = _Bridge(await self.api.attach(name, AGENT_CONTAINER, stderr_log=stderr_log))
            await bridge.open()
        except BaseException:
            # Nothing was asked of the agent: the pod goes, the action fails (or was cancelled).
            await bounded(self._clock, 10.0, self.api.delete_pod(name, grace_s=0))
            raise
        return PodAgent(self.api, name, bridge, clock=self._clock, stderr_log=stderr_log)


async def reap_pod(api: PodApi, action_id: str, *, grace_s: int) -> None:
    """A job lost with the dispatcher that ran it (its lease expired): its pod, if one is left, goes.

    Its agent lost its conversation when that dispatcher died (``stdinOnce``: its stdin closed), but an
    agent that ignores EOF would live until the pod's deadline. The claim stays: the job is
    ``outcome_unknown`` and its workspace quarantined.
    """
    await api.delete_pod(pod_name(action_id), grace_s=grace_s)
