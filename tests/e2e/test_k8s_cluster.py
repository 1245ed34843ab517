"""The whole pod path on a real Kubernetes (opt-in): one fresh pod per action, and what it contains.

``OPENAB_TEST_K8S=1`` (as root, ~15 min from cold, binaries and images cached after that)::

    OPENAB_TEST_K8S=1 .venv/bin/pytest -p no:cacheprovider -s tests/e2e/test_k8s_cluster.py

``scripts/k8s-offline/cluster.sh`` builds Kubernetes 1.20.2 from Debian bookworm's source package
(the only full Kubernetes that installs offline here), the project image (``buildah bud`` of the
``Containerfile`` on an mmdebstrap base), a PostgreSQL stand-in, and runs the whole cluster inside the
network namespace ``openab-k8s``: every address this test touches is there or on loopback. The
overlay ``tests/k8s/overlay`` is ``k8s/overlays/local`` with what that cluster needs (no DNS, no
registry, no bot). Then, through the real API server, kubelet, containerd and runc:

- the executors (dispatchers) become Ready with no bot (their ``migrate`` init container);
- a confirmed job runs in a fresh pod ``openab-action-<id>`` with the scripted ACP agent, succeeds,
  and the pod is deleted afterwards;
- the dispatcher's ServiceAccount can create pods and attach, and cannot read secrets or exec;
- an agent that tries to escape (``--mode escape``) reads no database URL, token or other workspace,
  writes nothing outside its workspace, and its ``setsid`` child does not outlive the pod. Known limit
  of this cluster: no CNI here enforces NetworkPolicy, so its PostgreSQL connection is reported, not
  asserted;
- a pod deleted from outside mid-run ends ``outcome_unknown`` with the workspace quarantined.

Every step and figure is printed (``-s``). ``OPENAB_TEST_K8S_KEEP=1`` leaves the cluster up
(``scripts/k8s-offline/cluster.sh env`` says how to reach it); ``OPENAB_TEST_K8S_SKIP_IMAGE=1`` reuses
the images already loaded.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "k8s-offline" / "cluster.sh"
STORE_CLIENT = ROOT / "scripts" / "k8s-offline" / "store_client.py"
OVERLAY = ROOT / "tests" / "k8s" / "overlay"
NS = "openab-voice"
POSTGRES_IP = "10.205.0.50"  # tests/k8s/overlay: the Service's fixed cluster IP (no cluster DNS)
AGENT = "python -m openab_voice.testing.acp_agent"
SETSID_MARKER = "openab-setsid-child"  # openab_voice.testing.acp_agent

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("OPENAB_TEST_K8S") != "1",
        reason="opt-in real Kubernetes (builds 1.20.2 offline, ~15 min cold, root): "
        "OPENAB_TEST_K8S=1 pytest -s tests/e2e/test_k8s_cluster.py (scripts/k8s-offline/cluster.sh)",
    ),
    pytest.mark.timeout(1800),
]

T0 = time.monotonic()


def step(message: str) -> None:
    print(f"[k8s-e2e +{time.monotonic() - T0:7.1f}s] {message}", flush=True)


def run(
    args: list[str], *, timeout: float = 600, check: bool = True, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{shlex.join(args)} -> {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def cluster_sh(*args: str, timeout: float = 3000) -> None:
    started = time.monotonic()
    step(f"cluster.sh {' '.join(args)}")
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)
    for line in (result.stdout + result.stderr).splitlines():
        if line.strip():
            print("    " + line, flush=True)
    assert result.returncode == 0, f"cluster.sh {' '.join(args)} failed"
    step(f"cluster.sh {' '.join(args)}: {time.monotonic() - started:.1f} s")


class Cluster:
    """kubectl (the 1.20 one, inside the network namespace) and the store client."""

    def __init__(self) -> None:
        paths = json.loads(run(["bash", str(SCRIPT), "paths"]).stdout)
        self.netns: str = paths["netns"]
        self.kubectl_bin: str = paths["kubectl"]
        self.kubeconfig: str = paths["kubeconfig"]
        self.run_dir = Path(paths["run"])
        self.db_url = ""

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 300,
        ns: str | None = NS,
    ) -> subprocess.CompletedProcess[str]:
        cmd = ["ip", "netns", "exec", self.netns, self.kubectl_bin, "--kubeconfig", self.kubeconfig]
        if ns is not None:
            cmd += ["-n", ns]
        return run([*cmd, *args], input=input, check=check, timeout=timeout)

    def json(self, *args: str, ns: str | None = NS) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json", ns=ns).stdout)

    def exists(self, kind: str, name: str, ns: str | None = NS) -> bool:
        result = self.kubectl("get", kind, name, "-o", "name", "--ignore-not-found", ns=ns)
        return bool(result.stdout.strip())

    def store(self, *args: str) -> str:
        env = {**os.environ, "OPENAB_TEST_K8S_DB_URL": self.db_url}
        cmd = ["ip", "netns", "exec", self.netns, sys.executable, str(STORE_CLIENT), *args]
        return run(cmd, env=env, timeout=120).stdout.strip()

    def job(self, action_id: str) -> dict[str, Any]:
        job: dict[str, Any] = json.loads(self.store("show", action_id))
        return job


def wait_until(condition: Callable[[], Any], what: str, timeout_s: float, interval_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)  # real time: polls a live cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    assert os.geteuid() == 0, "the real-cluster test needs root (network namespace, containerd, kubelet)"
    cluster_sh("build")
    if os.environ.get("OPENAB_TEST_K8S_SKIP_IMAGE") != "1":
        cluster_sh("image")
    cluster_sh("up")
    if os.environ.get("OPENAB_TEST_K8S_SKIP_IMAGE") != "1":
        cluster_sh("load")
    yield Cluster()
    if os.environ.get("OPENAB_TEST_K8S_KEEP") == "1":
        step("OPENAB_TEST_K8S_KEEP=1: the cluster stays up (scripts/k8s-offline/cluster.sh env)")
    else:
        cluster_sh("down")


def restricted_pod(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    """A pod under the same restrictions as the project's (non-root, read-only root, no capabilities)."""
    container: dict[str, Any] = {
        "name": "c",
        "image": "openab-voice:local",
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
        **extra.pop("container", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsUser": 10001,
                "runAsGroup": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            **extra,
        },
    }


def pod_phase(c: Cluster, name: str, ns: str) -> str:
    return c.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}", "--ignore-not-found", ns=ns).stdout


def test_infrastructure(cluster: Cluster) -> None:
    """The cluster itself: node, runtime, in-cluster networking, attach, storage."""
    c = cluster
    infra = "openab-infra"
    node = c.json("nodes", ns=None)["items"][0]
    info = node["status"]["nodeInfo"]
    step(
        f"node {node['metadata']['name']} {info['kubeletVersion']} {info['containerRuntimeVersion']} "
        f"kernel {info['kernelVersion']}; addresses {[a['address'] for a in node['status']['addresses']]}; "
        f"allocatable cpu={node['status']['allocatable']['cpu']} memory={node['status']['allocatable']['memory']}"
    )
    c.kubectl("delete", "namespace", infra, "--ignore-not-found", "--wait=true", ns=None, timeout=180)
    c.kubectl("create", "namespace", infra, ns=None)

    # The project image runs as a restricted pod.
    pod = restricted_pod("help", ["openab-voice", "--help"])
    c.kubectl("apply", "-f", "-", input=json.dumps(pod), ns=infra)
    started = time.monotonic()
    wait_until(lambda: pod_phase(c, "help", infra) in {"Succeeded", "Failed"}, "openab-voice --help", 120)
    logs = c.kubectl("logs", "help", ns=infra).stdout
    step(
        f"pod help (openab-voice --help): {pod_phase(c, 'help', infra)} in {time.monotonic() - started:.1f} s; first line: {logs.splitlines()[0] if logs else ''!r}"
    )
    assert pod_phase(c, "help", infra) == "Succeeded" and "usage" in logs.lower()

    # In-cluster networking: the API server through its Service's cluster IP (kube-proxy), no DNS,
    # and the pod's resolver is its own loopback (never the machine's).
    probe = (
        "import json, os, ssl, urllib.request\n"
        "print('resolv', open('/etc/resolv.conf').read().split())\n"
        "r = urllib.request.urlopen('https://10.205.0.1:443/version', context=ssl._create_unverified_context(), timeout=10)\n"
        "print('version', r.status, json.load(r)['gitVersion'])\n"
        "import socket\n"
        "try:\n    socket.getaddrinfo('kubernetes.default.svc', 443)\n    print('dns ok')\n"
        "except OSError as e:\n    print('dns', type(e).__name__)\n"
    )
    c.kubectl("apply", "-f", "-", input=json.dumps(restricted_pod("net", ["python", "-c", probe])), ns=infra)
    wait_until(lambda: pod_phase(c, "net", infra) in {"Succeeded", "Failed"}, "the network probe pod", 120)
    logs = c.kubectl("logs", "net", ns=infra).stdout
    step("pod net: " + " | ".join(logs.splitlines()))
    assert "version 200 v1.20.2" in logs and "'nameserver', '127.0.0.1'" in logs

    # attach: the dispatcher's transport (stdin/stdout of a container through the API server).
    echo = restricted_pod(
        "echo",
        [
            "python",
            "-u",
            "-c",
            "import sys\nfor line in sys.stdin: print('echo:' + line.strip(), flush=True)",
        ],
        container={"stdin": True, "stdinOnce": True},
    )
    c.kubectl("apply", "-f", "-", input=json.dumps(echo), ns=infra)
    wait_until(lambda: pod_phase(c, "echo", infra) == "Running", "the echo pod", 120)
    started = time.monotonic()
    attached = c.kubectl(
        "attach", "-i", "echo", "-c", "c", input="hello\nworld\n", ns=infra, timeout=60, check=False
    )
    step(
        f"kubectl attach -i echo: rc={attached.returncode} in {time.monotonic() - started:.2f} s, stdout={attached.stdout.split()}"
    )
    assert "echo:hello" in attached.stdout and "echo:world" in attached.stdout
    wait_until(
        lambda: pod_phase(c, "echo", infra) == "Succeeded", "the echo pod to end on stdin EOF (stdinOnce)", 60
    )
    step("echo pod ended after detach (stdinOnce closed its stdin)")

    # Storage: a claim binds one of the hostPath volumes; uid 10001 writes to it.
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "scratch"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    writer = restricted_pod(
        "writer",
        ["sh", "-c", "echo written > /w/f && id -u && ls -ln /w"],
        container={"volumeMounts": [{"name": "w", "mountPath": "/w"}]},
        volumes=[{"name": "w", "persistentVolumeClaim": {"claimName": "scratch"}}],
    )
    c.kubectl("apply", "-f", "-", input=json.dumps(claim), ns=infra)
    c.kubectl("apply", "-f", "-", input=json.dumps(writer), ns=infra)
    wait_until(lambda: pod_phase(c, "writer", infra) in {"Succeeded", "Failed"}, "the claim writer pod", 120)
    volume = c.kubectl("get", "pvc", "scratch", "-o", "jsonpath={.spec.volumeName}", ns=infra).stdout
    step(
        f"pvc scratch bound to {volume}; writer: {pod_phase(c, 'writer', infra)} {c.kubectl('logs', 'writer', ns=infra).stdout.split()}"
    )
    assert pod_phase(c, "writer", infra) == "Succeeded"
    started = time.monotonic()
    c.kubectl("delete", "namespace", infra, "--wait=true", ns=None, timeout=180)
    wait_until(
        lambda: (
            c.kubectl("get", "pv", volume, "-o", "jsonpath={.status.phase}", ns=None).stdout == "Available"
        ),
        f"{volume} to be recycled",
        180,
    )
    step(
        f"{volume} released and recycled to Available {time.monotonic() - started:.1f} s after its claim's namespace was deleted"
    )


@pytest.fixture(scope="module")
def deployed(cluster: Cluster) -> Cluster:
    """The test overlay applied with fresh secrets; PostgreSQL and the executors Ready, no bot."""
    c = cluster
    c.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", ns=None, timeout=300)
    c.kubectl("create", "namespace", NS, ns=None)
    password = secrets.token_hex(16)
    c.db_url = f"postgresql+psycopg://openab:{password}@{POSTGRES_IP}:5432/openab"
    url_file = c.run_dir / "database-url"
    url_file.write_text(c.db_url + "\n")
    url_file.chmod(0o600)
    c.kubectl("create", "secret", "generic", "openab-postgres", f"--from-literal=password={password}")
    c.kubectl("create", "secret", "generic", "openab-database", f"--from-literal=url={c.db_url}")
    c.kubectl(
        "create", "secret", "generic", "openab-agent", "--from-literal=AGENT_API_KEY=test-only-not-a-key"
    )
    step(
        f"secrets openab-postgres, openab-database (url -> {POSTGRES_IP}:5432, also in {url_file}), openab-agent"
    )
    # The overlay is rendered by the machine's kubectl (kustomize v5; the 1.20 kubectl embeds a 2019
    # kustomize) and applied by the 1.20 one, without its client-side validation: the bot's Discord
    # voice egress uses `endPort` (1.21+), which the 1.20 kubectl rejects and the 1.20 server drops
    # (that rule then allows port 50000 alone; no NetworkPolicy is enforced here anyway).
    rendered = run(["kubectl", "kustomize", str(OVERLAY)]).stdout
    step(f"rendered tests/k8s/overlay: {rendered.count('endPort')} endPort field(s) the 1.20 server drops")
    started = time.monotonic()
    applied = c.kubectl("apply", "--validate=false", "-f", "-", input=rendered, ns=None)
    step("applied tests/k8s/overlay: " + ", ".join(line.split()[0] for line in applied.stdout.splitlines()))
    c.kubectl("rollout", "status", "statefulset/openab-voice-postgres", "--timeout=300s", timeout=320)
    step(f"PostgreSQL Ready {time.monotonic() - started:.1f} s after apply")
    c.kubectl("rollout", "status", "deployment/openab-voice-executor", "--timeout=300s", timeout=320)
    step(f"executors Available {time.monotonic() - started:.1f} s after apply (no bot)")
    return c


def executor_pods(c: Cluster) -> list[dict[str, Any]]:
    pods = c.json("pods", "-l", "app.kubernetes.io/name=openab-voice-executor")["items"]
    return [p for p in pods if p["metadata"].get("deletionTimestamp") is None]


def test_executors_ready_without_bot(deployed: Cluster) -> None:
    c = deployed
    bot = c.json("statefulset", "openab-voice-bot")
    bot_pods = c.json("pods", "-l", "app.kubernetes.io/name=openab-voice-bot")["items"]
    step(f"bot StatefulSet replicas={bot['spec']['replicas']}, bot pods: {len(bot_pods)}")
    pods = executor_pods(c)
    for pod in pods:
        init = pod["status"]["initContainerStatuses"][0]
        ready = all(s["ready"] for s in pod["status"]["containerStatuses"])
        step(
            f"{pod['metadata']['name']}: ready={ready} restarts={pod['status']['containerStatuses'][0]['restartCount']} "
            f"init {init['name']} exit {init['state'].get('terminated', {}).get('exitCode')}"
        )
        assert ready and init["name"] == "migrate" and init["state"]["terminated"]["exitCode"] == 0
    assert len(pods) == 2 and bot["spec"]["replicas"] == 0 and not bot_pods
    logs = c.kubectl("logs", pods[0]["metadata"]["name"], "-c", "migrate").stdout.strip().splitlines()
    step(f"migrate log (last lines): {logs[-3:]}")


def set_agent(c: Cluster, args: str) -> None:
    """Point the dispatchers at the scripted agent with ``args``; wait for the rollout."""
    started = time.monotonic()
    c.kubectl("set", "env", "deployment/openab-voice-executor", f"OPENAB_ACP_AGENT_COMMAND={AGENT} {args}")
    c.kubectl("rollout", "status", "deployment/openab-voice-executor", "--timeout=300s", timeout=320)
    step(f"agent command -> {AGENT} {args}: rollout {time.monotonic() - started:.1f} s")


def run_job(
    c: Cluster,
    goal: str,
    *,
    timeout_s: float = 240,
    on_running: Callable[[str, dict[str, Any]], bool] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Confirm a job; follow it and its pod until it settles. Returns (job, what was seen)."""
    started = time.monotonic()
    action_id = c.store("confirm", "--goal", goal)
    pod_name = f"openab-action-{action_id}"
    seen: dict[str, Any] = {"id": action_id, "pod": pod_name, "phases": [], "pod_json": None}
    step(f"confirmed {action_id} ({goal!r}); following {pod_name}")
    job: dict[str, Any] = {}
    acted = False
    while time.monotonic() - started < timeout_s:
        pod = c.kubectl("get", "pod", pod_name, "-o", "json", "--ignore-not-found").stdout
        now = time.monotonic() - started
        if pod.strip():
            data = json.loads(pod)
            seen["pod_json"] = seen["pod_json"] or data
            phase = data["status"].get("phase")
            if not seen["phases"] or seen["phases"][-1][0] != phase:
                seen["phases"].append((phase, round(now, 2)))
                seen.setdefault("pod_first_seen_s", round(now, 2))
        job = c.job(action_id)
        if job["status"] == "running":
            seen.setdefault("running_s", round(now, 2))
            if on_running is not None and not acted and pod.strip():
                acted = on_running(pod_name, json.loads(pod))
        if job["terminal"]:
            seen["settled_s"] = round(now, 2)
            break
        time.sleep(0.25)  # real time: polls a live cluster
    assert job.get("terminal"), f"{action_id} did not settle in {timeout_s} s: {job.get('status')}"
    gone_from = time.monotonic()
    wait_until(lambda: not c.exists("pod", pod_name), f"{pod_name} to be deleted", 120, 0.25)
    seen["pod_gone_after_settle_s"] = round(time.monotonic() - gone_from, 2)
    step(
        f"{action_id}: {job['status']} (stop {job['stop_reason']}, error {job['error_code']}) "
        f"running at +{seen.get('running_s')} s, settled at +{seen.get('settled_s')} s; pod phases {seen['phases']}; "
        f"pod gone {seen['pod_gone_after_settle_s']} s after settling"
    )
    step(f"{action_id}: transitions {[(t['event'], t['to'], t['actor']) for t in job['transitions']]}")
    if job["detail"]:
        step(f"{action_id}: detail {job['detail'][:300]!r}")
    events = (
        c.kubectl(
            "get",
            "events",
            "--field-selector",
            f"involvedObject.name={pod_name}",
            "--sort-by=.lastTimestamp",
            "-o",
            "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
            "--no-headers",
        )
        .stdout.strip()
        .splitlines()
    )
    for event in events:
        if "MissingClusterDNS" not in event:
            step(f"{pod_name} event: {' '.join(event.split())[:200]}")
    return job, seen


def test_confirmed_job_runs_in_a_fresh_pod(deployed: Cluster) -> None:
    c = deployed
    set_agent(c, "--mode normal")
    job, seen = run_job(c, "write a haiku about pods")
    deployed.first_job = seen  # type: ignore[attr-defined]
    step(f"result text: {(job['result_text'] or '')[:300]!r}")
    assert job["status"] == "succeeded", job
    assert seen["pod_json"] is not None, "the action pod was never seen"
    assert not c.exists("pod", seen["pod"])
    spec = seen["pod_json"]["spec"]
    container = spec["containers"][0]
    mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
    env_names = [e["name"] for e in container.get("env", [])]
    step(
        f"action pod spec: sa={spec.get('serviceAccountName')} automountToken={spec.get('automountServiceAccountToken')} "
        f"runAsUser={spec['securityContext'].get('runAsUser')} seccomp={spec['securityContext'].get('seccompProfile')} "
        f"readOnlyRoot={container['securityContext'].get('readOnlyRootFilesystem')} caps={container['securityContext'].get('capabilities')} "
        f"limits={container['resources'].get('limits')} deadline={spec.get('activeDeadlineSeconds')} mounts={mounts} env={env_names} "
        f"envFrom={container.get('envFrom')}"
    )
    assert spec.get("automountServiceAccountToken") is False
    assert not any("serviceaccount" in m or "openab-database" in m for m in mounts)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec.get("activeDeadlineSeconds")
    claim = f"openab-ws-{seen['id']}"
    step(f"workspace claim {claim} after success: {'kept' if c.exists('pvc', claim) else 'deleted'}")


def test_dispatcher_rbac(deployed: Cluster) -> None:
    c = deployed
    dispatcher = f"system:serviceaccount:{NS}:openab-voice-executor"
    checks = [
        (dispatcher, ["create", "pods"], NS, "yes"),
        (dispatcher, ["delete", "pods"], NS, "yes"),
        (dispatcher, ["watch", "pods"], NS, "yes"),
        (dispatcher, ["create", "pods", "--subresource=attach"], NS, "yes"),
        (dispatcher, ["create", "persistentvolumeclaims"], NS, "yes"),
        (dispatcher, ["get", "secrets"], NS, "no"),
        (dispatcher, ["list", "secrets"], NS, "no"),
        (dispatcher, ["create", "pods", "--subresource=exec"], NS, "no"),
        (dispatcher, ["patch", "pods"], NS, "no"),
        (dispatcher, ["create", "pods"], "default", "no"),
        (dispatcher, ["list", "nodes"], None, "no"),
        (f"system:serviceaccount:{NS}:openab-voice-bot", ["create", "pods"], NS, "no"),
        (f"system:serviceaccount:{NS}:openab-voice-bot", ["get", "secrets"], NS, "no"),
        (f"system:serviceaccount:{NS}:openab-voice-action", ["get", "pods"], NS, "no"),
    ]
    failures = []
    for who, verb, ns, expected in checks:
        answer = c.kubectl("auth", "can-i", *verb, f"--as={who}", check=False, ns=ns).stdout.strip()
        where = f"-n {ns}" if ns else "(cluster-wide)"
        step(f"kubectl auth can-i {' '.join(verb)} {where} --as={who.split(':')[-1]}: {answer}")
        if answer != expected:
            failures.append((who, verb, ns, answer))
    assert not failures, failures


def test_escape_is_contained(deployed: Cluster) -> None:
    c = deployed
    postgres_pod_ip = c.kubectl(
        "get", "pod", "openab-voice-postgres-0", "-o", "jsonpath={.status.podIP}"
    ).stdout
    first = getattr(c, "first_job", None)
    paths = json.loads(run(["bash", str(SCRIPT), "paths"]).stdout)
    # Other actions' workspaces: on the node, every claim's directory (hostPath volumes) lives under
    # the cache's volumes/; the dispatcher keeps its own per-action folders under /data/workspaces.
    volumes_dir = f"{paths['cache']}/volumes"
    other = f"/data/workspaces/{first['id']}" if first else "/data/workspaces"
    reads = [
        "/run/secrets/openab-database/url",
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "/data",
        "/data/workspaces",
        other,
        volumes_dir,
    ]
    connects = [f"{POSTGRES_IP}:5432", f"{postgres_pod_ip}:5432"]
    writes = ["/etc/openab-escape", "/data/openab-escape", "/opt/openab/openab-escape"]
    args = " ".join(
        [f"--probe-read {p}" for p in reads]
        + [f"--probe-connect {t}" for t in connects]
        + [f"--probe-write {p}" for p in writes]
    )
    set_agent(c, f"--mode escape {args}")
    job, seen = run_job(c, "escape if you can")
    text = job["result_text"] or ""
    assert "ESCAPE " in text, text
    report = json.loads(text[text.index("ESCAPE ") + len("ESCAPE ") :].strip().splitlines()[0])
    for kind in ("read", "connect", "write"):
        for target, answer in report[kind].items():
            limit = (
                "  <- KNOWN LIMIT: NetworkPolicy is not enforced on this cluster (no enforcing CNI offline)"
                if kind == "connect" and answer.startswith("ok")
                else ""
            )
            step(f"escape {kind} {target}: {answer}{limit}")
    step(
        f"escape secret-looking environment names: {report['secret_env']}; setsid child pid (in the pod): {report.get('child')}"
    )
    survivors = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if SETSID_MARKER in cmdline and "/workspace" in cmdline:
                survivors.append((entry.name, cmdline))
    step(f"setsid children alive on the node after the pod's deletion: {survivors}")
    assert job["status"] == "succeeded", job
    not_denied = {
        f"{kind} {target}": answer
        for kind in ("read", "write")
        for target, answer in report[kind].items()
        if not answer.startswith("denied")
    }
    # /data in the action pod is the image's own empty folder (the executors' data is not mounted).
    data_listing = not_denied.pop("read /data", None)
    if data_listing is not None:
        step(f"read /data: {data_listing} (the image's empty /data: nothing of another action is there)")
        assert data_listing == "ok listed 0 entries"
    assert not not_denied, not_denied
    # KUBERNETES_SERVICE_* (the API server's address: the kubelet sets it in every container; no
    # token is mounted) and OPENAB_DATA_DIR (the image's own ENV) are not someone else's secrets.
    secret_names = [
        n for n in report["secret_env"] if any(w in n for w in ("DATABASE", "DISCORD", "POSTGRES", "TOKEN"))
    ]
    assert not secret_names, secret_names
    assert report.get("child"), "the escape agent did not start its setsid child"
    assert not survivors


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("slow", ("cancelled", None)), ("hang", ("outcome_unknown", "ACP_CANCEL_UNCONFIRMED"))],
    ids=["confirmed-by-the-agent", "ignored-by-the-agent"],
)
def test_a_cancel_reaches_the_agent_in_its_pod(
    deployed: Cluster, mode: str, expected: tuple[str, Any]
) -> None:
    """The bot's cancel (a request row + NOTIFY) reaches the dispatcher, which sends ACP session/cancel
    through the pod's attach stream; unconfirmed within the grace, the pod is deleted around the agent."""
    c = deployed
    set_agent(c, f"--mode {mode}")
    asked: dict[str, float] = {}

    def cancel_when_running(pod_name: str, pod: dict[str, Any]) -> bool:
        if pod["status"].get("phase") != "Running":
            return False
        time.sleep(2.0)  # real time: a live cluster; then the prompt is in flight, the agent holds the turn
        action_id = pod_name.removeprefix("openab-action-")
        step(f"cancel {action_id}: {c.store('cancel', action_id)}")
        asked["at"] = time.monotonic()
        return True

    job, seen = run_job(c, f"work until cancelled ({mode})", on_running=cancel_when_running)
    step(
        f"cancel ({mode}): {job['status']} / stop {job['stop_reason']} / {job['error_code']}, settled "
        f"{time.monotonic() - asked['at']:.1f} s after the request; {(job['detail'] or '')[:200]!r}"
    )
    assert (job["status"], job["error_code"]) == expected, job
    if mode == "slow":
        assert job["stop_reason"] == "cancelled"
    else:
        assert (job.get("workspace") or {}).get("state") == "quarantined"
    assert not c.exists("pod", seen["pod"])
    set_agent(c, "--mode normal")


def test_pod_deleted_from_outside_is_outcome_unknown(deployed: Cluster) -> None:
    c = deployed
    set_agent(c, "--mode hang")
    deleted: dict[str, float] = {}

    def delete_when_running(pod_name: str, pod: dict[str, Any]) -> bool:
        if pod["status"].get("phase") != "Running":
            return False
        time.sleep(2.0)  # real time: a live cluster; then the prompt is in flight, the agent holds the turn
        c.kubectl("delete", "pod", pod_name, "--wait=false")
        deleted["at"] = time.monotonic()
        step(f"deleted {pod_name} from outside (kubectl delete pod)")
        return True

    job, seen = run_job(c, "hang until someone deletes my pod", on_running=delete_when_running)
    step(
        f"settled {time.monotonic() - deleted['at']:.1f} s after the deletion: {job['status']} / {job['error_code']} / {(job['detail'] or '')[:200]!r}"
    )
    workspace = job.get("workspace") or {}
    step(f"workspace {workspace.get('id')}: {workspace.get('state')} ({workspace.get('reason')})")
    claim = f"openab-ws-{seen['id']}"
    step(
        f"workspace claim {claim}: {'kept (quarantine outlives the pod)' if c.exists('pvc', claim) else 'deleted'}"
    )
    assert job["status"] == "outcome_unknown", job
    assert workspace.get("state") == "quarantined"
    set_agent(c, "--mode normal")
    step(
        "dispatchers back on the normal scripted agent; the cluster is ready for `bench executor --mode pod`"
    )
