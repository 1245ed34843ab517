"""A fake Kubernetes API for the dispatcher's pod path: each "pod" is a real bubblewrap box.

:class:`FakePodApi` implements :class:`~openab_voice.acp.pod.PodApi`. Creating a pod starts its
container's command (from the manifest the dispatcher built) in a bubblewrap sandbox shaped like the
pod: the system read-only, its claim bound at ``/workspace``, a private ``/tmp``, its own PID
namespace (deleting the pod kills the whole namespace, as the kubelet does a pod's cgroup), exactly
the manifest's environment plus its ``envFrom`` secret, and none of the dispatcher's folders.
``attach`` hands out the process's stdin and stdout. The layer under test is the dispatcher's (the
driver's outcome rules over a pod, the claims, the deletion); the real API server, kubelet and
``attach`` WebSocket are exercised by the opt-in real-cluster test (``tests/e2e/test_k8s_cluster.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openab_voice.acp.pod import PodPhase, PodState
from openab_voice.acp.sandbox import runtime_dirs
from openab_voice.errors import AcpError

_POLL_S = 0.01


@dataclass(slots=True)
class FakePod:
    manifest: dict[str, Any]
    proc: asyncio.subprocess.Process | None = None
    reason: str = ""
    gone: bool = False
    deleted_by: str | None = None
    stderr_task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class PipeStreams:
    """The agent's stdin and stdout, with the StreamWriter surface the ACP SDK uses."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()

    def is_closing(self) -> bool:
        return self.writer.is_closing()

    async def wait_closed(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


@dataclass(slots=True)
class FakePodApi:
    """See the module docstring. ``secrets`` maps a secret's name to its keys and values."""

    root: Path
    bwrap: str
    hidden: tuple[Path, ...] = ()
    namespace: str = "openab-test"
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    unpullable: frozenset[str] = frozenset()
    never_scheduled: frozenset[str] = frozenset()  # images whose pods stay Pending (no node has room)
    pods: dict[str, FakePod] = field(default_factory=dict)
    claims: dict[str, Path] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    async def create(self, manifest: Mapping[str, Any]) -> None:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        self.calls.append(f"create {kind} {name}")
        if kind == "PersistentVolumeClaim":
            if name in self.claims:
                raise AcpError(f"cannot create {kind} {name}: HTTP 409 Conflict", code="ACP_POD_FAILED")
            path = self.root / "claims" / name
            path.mkdir(parents=True)
            self.claims[name] = path
            return
        if name in self.pods and not self.pods[name].gone:
            raise AcpError(f"cannot create {kind} {name}: HTTP 409 Conflict", code="ACP_POD_FAILED")
        pod = FakePod(manifest=dict(manifest))
        self.pods[name] = pod
        [container] = manifest["spec"]["containers"]
        if container["image"] in self.unpullable:
            pod.reason = "ErrImagePull"
            return
        if container["image"] in self.never_scheduled:
            pod.reason = "Unschedulable"
            return
        pod.proc = await asyncio.create_subprocess_exec(
            *self._box(manifest, container),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._environment(container),
            start_new_session=True,
        )

    def _box(self, manifest: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
        [claim] = [
            v["persistentVolumeClaim"]["claimName"]
            for v in manifest["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        ]
        argv = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--new-session"]
        # A root of our own (so /workspace can be a mount point), the system bound read-only into it.
        argv += ["--tmpfs", "/"]
        for entry in sorted(os.listdir("/")):
            path = os.path.join("/", entry)
            if entry in {"proc", "dev", "tmp", "workspace"}:
                continue
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for path in runtime_dirs():  # the "image": our interpreter and checkout, also when under /tmp
            if str(path).startswith("/tmp/"):
                argv += ["--ro-bind", str(path), str(path)]
        for path in self.hidden:  # the dispatcher's own folders are not in the pod
            argv += ["--tmpfs", str(path)]
        argv += ["--bind", str(self.claims[claim]), container["workingDir"]]
        argv += ["--remount-ro", "/", "--chdir", container["workingDir"], "--", *container["command"]]
        return argv

    def _environment(self, container: Mapping[str, Any]) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # the image's own PATH
        for source in container.get("envFrom", []):
            env.update(self.secrets.get(source["secretRef"]["name"], {}))
        env.update({item["name"]: item["value"] for item in container.get("env", [])})
        return env

    async def delete_pod(self, name: str, *, grace_s: int) -> None:
        self.calls.append(f"delete Pod {name} grace={grace_s}")
        await self._kill(name, by="dispatcher", grace_s=grace_s)

    async def lose(self, name: str) -> None:
        """The pod is deleted from outside (an operator, an eviction, a node lost)."""
        await self._kill(name, by="outside", grace_s=0)

    async def _kill(self, name: str, *, by: str, grace_s: int) -> None:
        pod = self.pods.get(name)
        if pod is None or pod.gone:
            return
        pod.deleted_by = pod.deleted_by or by
        if pod.proc is not None and pod.proc.returncode is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pod.proc.pid, sig)
                try:
                    await asyncio.wait_for(pod.proc.wait(), timeout=grace_s if sig is signal.SIGTERM else 10)  # noqa: TID251 -- a real process
                    break
                except TimeoutError:
                    continue
        pod.gone = True

    async def delete_claim(self, name: str) -> None:
        self.calls.append(f"delete PersistentVolumeClaim {name}")
        self.claims.pop(name, None)

    async def pod_state(self, name: str) -> PodState:
        pod = self.pods.get(name)
        if pod is None or pod.gone:
            return PodState(phase=PodPhase.GONE)
        if pod.proc is None:
            return PodState(phase=PodPhase.PENDING, reason=pod.reason)
        if pod.proc.returncode is not None:
            return PodState(phase=PodPhase.SUCCEEDED if pod.proc.returncode == 0 else PodPhase.FAILED)
        return PodState(phase=PodPhase.RUNNING)

    async def wait_pod(self, name: str, *, until: frozenset[PodPhase], timeout_s: float) -> PodState:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            state = await self.pod_state(name)
            stuck = PodPhase.RUNNING in until and state.reason == "ErrImagePull"
            if state.phase in until or stuck or loop.time() >= deadline:
                return state
            await asyncio.sleep(_POLL_S)  # noqa: TID251 -- real time: polls a real process's exit

    async def attach(self, name: str, container: str, *, stderr_log: Path) -> PipeStreams:
        self.calls.append(f"attach {name}/{container}")
        pod = self.pods[name]
        assert pod.proc is not None and pod.proc.stdin is not None and pod.proc.stdout is not None
        pod.stderr_task = asyncio.ensure_future(_copy(pod.proc, stderr_log))
        return PipeStreams(reader=pod.proc.stdout, writer=pod.proc.stdin)

    async def aclose(self) -> None:
        for name in list(self.pods):
            await self._kill(name, by="teardown", grace_s=0)


async def _copy(proc: asyncio.subprocess.Process, log: Path) -> None:
    assert proc.stderr is not None
    with log.open("ab") as out:
        while chunk := await proc.stderr.read(65536):
            out.write(chunk)
            out.flush()
