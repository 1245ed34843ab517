"""The dispatcher's Kubernetes calls on ``kubernetes_asyncio`` (docs/adr/0016 says why that library).

Only what :class:`~openab_voice.acp.pod.PodApi` needs, which is what the dispatcher's Role grants
(``k8s/base``): pods (create, get, list, watch, delete), ``pods/attach``, and workspace claims
(create, get, list, delete). In a pod it uses the mounted service-account token; elsewhere the
kubeconfig (``KUBECONFIG``), for an operator or a test running the dispatcher outside the cluster.

The agent's stdio crosses the API server's ``attach`` WebSocket in the ``v4.channel.k8s.io``
framing: every binary message starts with its channel (0 stdin, 1 stdout, 2 stderr, 3 error status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES

from openab_voice.acp.pod import PodPhase, PodState
from openab_voice.clock import Clock, bounded
from openab_voice.errors import AcpError, ErrorCode

log = logging.getLogger(__name__)

_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_STDIN, _STDOUT, _STDERR, _ERROR = 0, 1, 2, 3
# An image that cannot be had: the pod cannot become Running (fail now, not at the start timeout).
# CreateContainerConfigError / CreateContainerError are not here: the kubelet retries them, and a
# fresh deploy shows one while its secret cache syncs ("failed to sync secret cache"), seen on the
# real test cluster; the start timeout bounds them.
_STUCK = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})


def _missing() -> AcpError:
    return AcpError(
        "OPENAB_ACP_SANDBOX=pod needs the Kubernetes client: pip install 'openab-voice[kubernetes]'",
        code=ErrorCode.ACP_POD_UNAVAILABLE,
    )


def default_namespace() -> str | None:
    """The namespace of the pod we run in (its service-account mount), if we run in one."""
    try:
        return _NAMESPACE_FILE.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


class AttachStream:
    """One pod attach: a StreamReader for the agent's stdout, a writer for its stdin, stderr to a log."""

    def __init__(self, ws: Any, *, stderr_log: Path) -> None:
        self._ws = ws
        self.reader = asyncio.StreamReader(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
        self._stderr_log = stderr_log
        self._closed = asyncio.Event()
        self.status: str | None = None  # the error channel's final status, when one came
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._send_error: Exception | None = None
        self._closing: asyncio.Future[None] | None = None
        self._pump = asyncio.ensure_future(self._read())
        self._sender = asyncio.ensure_future(self._send())

    async def _read(self) -> None:
        import aiohttp

        try:
            with self._stderr_log.open("ab") as stderr:
                async for msg in self._ws:
                    if msg.type is not aiohttp.WSMsgType.BINARY or not msg.data:
                        continue
                    channel, data = msg.data[0], msg.data[1:]
                    if not data:
                        continue
                    if channel == _STDOUT:
                        self.reader.feed_data(data)
                    elif channel == _STDERR:
                        stderr.write(data)  # never into our logs: an agent may echo its key
                        stderr.flush()
                    elif channel == _ERROR:
                        self.status = data.decode("utf-8", "replace")[:300]
        except Exception as exc:  # the connection broke: for the agent's reader that is an EOF
            log.info("attach stream ended: %s", type(exc).__name__)
        finally:
            self.reader.feed_eof()
            self._closed.set()

    def write(self, data: bytes) -> None:
        if self._closed.is_set():
            raise ConnectionResetError("the action pod's attach stream is closed")
        self._outbox.put_nowait(bytes([_STDIN]) + data)

    async def _send(self) -> None:
        # One sender keeps the frames in order (concurrent send_bytes calls could interleave).
        while True:
            frame = await self._outbox.get()
            try:
                await self._ws.send_bytes(frame)
            except Exception as exc:
                self._send_error = exc
            finally:
                self._outbox.task_done()

    async def drain(self) -> None:
        await self._outbox.join()
        if self._send_error is not None:
            raise ConnectionResetError(f"writing to the action pod failed: {self._send_error}")

    def is_closing(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Detach: with ``stdinOnce`` the agent's stdin closes."""
        if not self._ws.closed and self._closing is None:
            self._closing = asyncio.ensure_future(self._close())

    async def _close(self) -> None:
        self._sender.cancel()
        with contextlib.suppress(Exception):
            await self._ws.close()

    async def wait_closed(self) -> None:
        await self._closed.wait()


class KubernetesPodApi:
    """:class:`~openab_voice.acp.pod.PodApi` on ``kubernetes_asyncio``. Build with :meth:`connect`."""

    def __init__(self, namespace: str, api_client: Any, ws_client: Any, *, clock: Clock) -> None:
        from kubernetes_asyncio import client

        self.namespace = namespace
        self._api_client = api_client
        self._ws_client = ws_client
        self._core = client.CoreV1Api(api_client)
        self._ws_core = client.CoreV1Api(ws_client)
        self._clock = clock

    @classmethod
    async def connect(
        cls, namespace: str | None, *, clock: Clock, environ: Mapping[str, str] | None = None
    ) -> KubernetesPodApi:
        """In-cluster credentials in a pod, else the kubeconfig.

        Raises:
            AcpError: ``ACP_POD_UNAVAILABLE`` without the library, credentials or a namespace.
        """
        try:
            from kubernetes_asyncio import client, config
            from kubernetes_asyncio.stream import WsApiClient
        except ImportError:
            raise _missing() from None
        env = os.environ if environ is None else environ
        configuration = client.Configuration()
        try:
            if env.get("KUBERNETES_SERVICE_HOST") and not env.get("KUBECONFIG"):
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                await config.load_kube_config(
                    config_file=env.get("KUBECONFIG"), client_configuration=configuration
                )
        except Exception as exc:
            raise AcpError(
                f"no Kubernetes credentials: {exc}"[:300], code=ErrorCode.ACP_POD_UNAVAILABLE
            ) from None
        namespace = namespace or default_namespace()
        if namespace is None:
            raise AcpError(
                "set OPENAB_ACTION_POD_NAMESPACE (not running in a pod, so there is no namespace to default to)",
                code=ErrorCode.ACP_POD_UNAVAILABLE,
            )
        return cls(
            namespace,
            client.ApiClient(configuration),
            WsApiClient(configuration),
            clock=clock,
        )

    async def create(self, manifest: Mapping[str, Any]) -> None:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            if kind == "Pod":
                await self._core.create_namespaced_pod(self.namespace, cast(Any, manifest))
            else:
                await self._core.create_namespaced_persistent_volume_claim(
                    self.namespace, cast(Any, manifest)
                )
        except Exception as exc:
            raise AcpError(
                f"cannot create {kind} {name}: {_api_error(exc)}", code=ErrorCode.ACP_POD_FAILED
            ) from None

    async def delete_pod(self, name: str, *, grace_s: int) -> None:
        await self._delete(self._core.delete_namespaced_pod, name, grace_period_seconds=grace_s)

    async def delete_claim(self, name: str) -> None:
        await self._delete(self._core.delete_namespaced_persistent_volume_claim, name)

    async def _delete(self, call: Any, name: str, **kwargs: Any) -> None:
        try:
            await call(name, self.namespace, **kwargs)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return
            raise AcpError(
                f"cannot delete {name}: {_api_error(exc)}", code=ErrorCode.ACP_POD_FAILED
            ) from None

    async def pod_state(self, name: str) -> PodState:
        listed = await self._list(name)
        return _state(listed.items[0]) if listed.items else PodState(phase=PodPhase.GONE)

    async def _list(self, name: str) -> Any:
        try:
            return await self._core.list_namespaced_pod(
                self.namespace, field_selector=f"metadata.name={name}"
            )
        except Exception as exc:
            raise AcpError(
                f"cannot read pod {name}: {_api_error(exc)}", code=ErrorCode.ACP_POD_FAILED
            ) from None

    async def wait_pod(self, name: str, *, until: frozenset[PodPhase], timeout_s: float) -> PodState:
        """List, then watch from the list's resource version: no change falls between the two."""
        from kubernetes_asyncio import watch

        listed = await self._list(name)
        state = _state(listed.items[0]) if listed.items else PodState(phase=PodPhase.GONE)
        if _settled(state, until):
            return state
        last = state

        async def follow() -> PodState:
            nonlocal last
            stream = watch.Watch()
            try:
                async for event in stream.stream(
                    self._core.list_namespaced_pod,
                    self.namespace,
                    field_selector=f"metadata.name={name}",
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=max(1, int(timeout_s) + 1),
                ):
                    last = (
                        PodState(phase=PodPhase.GONE)
                        if event["type"] == "DELETED"
                        else _state(event["object"])
                    )
                    if _settled(last, until):
                        return last
            finally:
                stream.stop()
            return last

        finished, result = await bounded(self._clock, timeout_s, follow())
        return result if finished and result is not None else last

    async def attach(self, name: str, container: str, *, stderr_log: Path) -> AttachStream:
        try:
            # With _preload_content=False the client returns aiohttp's ws_connect context; awaiting it
            # opens the WebSocket.
            connecting: Any = await self._ws_core.connect_get_namespaced_pod_attach(
                name,
                self.namespace,
                container=container,
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
            )
            ws = await connecting
        except Exception as exc:
            raise AcpError(
                f"cannot attach to {name}: {_api_error(exc)}", code=ErrorCode.ACP_POD_FAILED
            ) from None
        return AttachStream(ws, stderr_log=stderr_log)

    async def aclose(self) -> None:
        await self._api_client.close()
        await self._ws_client.close()


def _settled(state: PodState, until: frozenset[PodPhase]) -> bool:
    return state.phase in until or (PodPhase.RUNNING in until and state.reason in _STUCK)


def _state(pod: Any) -> PodState:
    status = pod.status
    if pod.metadata.deletion_timestamp is not None and status.phase == "Pending":
        return PodState(phase=PodPhase.FAILED, reason="being deleted")
    try:
        phase = PodPhase(status.phase)
    except ValueError:
        phase = PodPhase.UNKNOWN
    reason = status.reason or ""
    for container in status.container_statuses or []:
        waiting = container.state.waiting if container.state is not None else None
        if waiting is not None and waiting.reason:
            reason = waiting.reason
    return PodState(phase=phase, reason=reason)


def _api_error(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    if status is not None:
        return f"HTTP {status} {reason or ''}".strip()
    return f"{type(exc).__name__}: {exc}"[:200]
