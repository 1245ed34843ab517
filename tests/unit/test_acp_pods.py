"""The dispatcher's pod path: one fresh pod per action, the outcome rules over a pod, its workspace claim.

Each "pod" is a real process in a bubblewrap box shaped like the pod (``tests/fakes/pods.py``), so the
scripted ACP agent runs for real and the driver speaks ACP to it through the attach streams. What a
real API server, kubelet and attach WebSocket add is the opt-in real-cluster test's
(``tests/e2e/test_k8s_cluster.py``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from openab_voice.acp.pod import (
    PodLauncher,
    PodSettings,
    claim_manifest,
    claim_name,
    pod_manifest,
    pod_name,
    reap_pod,
)
from openab_voice.acp.sandbox import find_bwrap
from openab_voice.acp.workspace import QUARANTINE_MARKER
from openab_voice.actions.events import AgentPromptSent
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobStatus
from openab_voice.testing.acp_agent import SETSID_MARKER
from tests.fakes.actions import OPERATOR, PlaneRig, agent_command, plane_rig, propose_and_confirm
from tests.fakes.pods import FakePodApi
from tests.fakes.waiting import until

AGENT_KEY = "sk-agent-own-key"
SETTINGS = PodSettings(namespace="openab-test", image="openab-voice:local", deadline_s=600)


@asynccontextmanager
async def pod_rig(
    db_url: str, tmp_path: Path, mode: str, *, image: str = SETTINGS.image, **kwargs: object
) -> AsyncIterator[tuple[PlaneRig, FakePodApi]]:
    bwrap = find_bwrap()
    if bwrap is None:
        pytest.fail("bubblewrap is not installed: run scripts/setup.sh", pytrace=False)
    api = FakePodApi(
        root=tmp_path / "cluster",
        bwrap=bwrap,
        hidden=(tmp_path / "ws",),
        secrets={"openab-agent": {"ANTHROPIC_API_KEY": AGENT_KEY}},
        unpullable=frozenset({"missing:image"}),
        never_scheduled=frozenset({"pending:image"}),
    )
    settings = PodSettings(namespace=SETTINGS.namespace, image=image, start_timeout_s=10.0, deadline_s=600)
    launcher = PodLauncher(api, settings, clock=SystemClock())
    try:
        async with plane_rig(
            db_url,
            tmp_path,
            clock=SystemClock(),
            mode=mode,
            pods=launcher,
            **kwargs,  # type: ignore[arg-type]
        ) as rig:
            yield rig, api
    finally:
        await api.aclose()


async def start(rig: PlaneRig, goal: str = "write a haiku about the sea") -> str:
    return await propose_and_confirm(rig, goal)


def setsid_children_in_pods() -> list[str]:
    """Live processes the escape agent left (its sleeper names the marker and its cwd, /workspace)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if SETSID_MARKER.encode() in cmdline and b"/workspace" in cmdline:
                found.append(entry.name)
    return found


def test_the_action_pod_holds_the_agent_its_own_secret_and_its_workspace_only() -> None:
    pod = pod_manifest("a-1f2e", ("claude-code-acp",), {"LANG": "C.UTF-8", "PATH": "/x"}, SETTINGS)
    spec = pod["spec"]
    [container] = spec["containers"]
    assert pod["metadata"]["name"] == pod_name("a-1f2e") == "openab-action-a-1f2e"
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "openab-voice-action"  # its NetworkPolicy
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 600
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 10001
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "512Mi"}
    # The only secret: the agent's own, as its environment. No secret volume, no database, no token.
    assert container["envFrom"] == [{"secretRef": {"name": "openab-agent"}}]
    assert [v for v in spec["volumes"] if "secret" in v or "projected" in v] == []
    assert {v["name"] for v in spec["volumes"]} == {"workspace", "tmp"}
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim_name("a-1f2e")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"LANG": "C.UTF-8", "HOME": "/tmp/home", "TMPDIR": "/tmp"}  # the image keeps its PATH
    assert container["stdin"] and container["stdinOnce"] and not container["tty"]


async def test_an_action_runs_in_a_fresh_pod_which_is_deleted_when_it_settles(
    db_url: str, tmp_path: Path
) -> None:
    environ = {"LANG": "C.UTF-8", "DISCORD_TOKEN": "bot-secret", "OPENAB_DATABASE_URL": "postgresql://x"}
    async with pod_rig(db_url, tmp_path, "env", environ=environ, env_allowlist=("LANG",)) as (rig, api):
        action_id = await start(rig)
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.SUCCEEDED, record.detail
        assert "action pod deleted" in (record.detail or "")
        name = pod_name(action_id)
        assert api.calls[:3] == [
            f"create PersistentVolumeClaim {claim_name(action_id)}",
            f"create Pod {name}",
            f"attach {name}/agent",
        ]
        assert api.pods[name].gone and api.pods[name].deleted_by == "dispatcher"
        seen = json.loads(record.result_text.split("ENV ", 1)[1]) if record.result_text else {}
        assert seen["ANTHROPIC_API_KEY"] == AGENT_KEY and seen["LANG"] == "C.UTF-8"
        assert "DISCORD_TOKEN" not in seen and not [k for k in seen if k.startswith("OPENAB_")]
        # Settled, not quarantined: the claim is given back; the dispatcher keeps only its logs.
        assert claim_name(action_id) not in api.claims
        assert f"delete PersistentVolumeClaim {claim_name(action_id)}" in api.calls
        assert rig.workspace(action_id).path == Path("/workspace")


async def test_an_agent_in_its_pod_reaches_none_of_the_dispatchers_files_nor_outlives_it(
    db_url: str, tmp_path: Path
) -> None:
    secret_file = tmp_path / "ws" / "database-url"  # the dispatcher's data dir: not in any pod
    neighbour = tmp_path / "cluster" / "claims" / "openab-ws-a-other"  # another action's claim
    command = (
        *agent_command("escape"),
        "--probe-read",
        str(secret_file),
        "--probe-read",
        str(neighbour),
        "--probe-write",
        "/etc/escaped",
        "--probe-write",
        str(Path(sys.prefix) / "escaped"),
    )
    async with pod_rig(db_url, tmp_path, "escape", command=command) as (rig, api):
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        secret_file.write_text("postgresql://openab:pw@db/openab")
        neighbour.mkdir(parents=True)
        (neighbour / "notes.md").write_text("someone else's work")
        action_id = await start(rig)
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.SUCCEEDED, record.detail
        report = json.loads((record.result_text or "").split("ESCAPE ", 1)[1])
        for kind in ("read", "write"):
            for probe, answer in report[kind].items():
                assert answer.startswith("denied"), (kind, probe, answer)
        assert report["secret_env"] == []
        assert report["child"] > 0  # a pid in the pod's own PID namespace: look for its marker instead
        assert not setsid_children_in_pods(), "the agent's setsid child outlived its pod"
        assert api.pods[pod_name(action_id)].gone


async def test_a_cancel_reaches_the_agent_in_its_pod_per_acp(db_url: str, tmp_path: Path) -> None:
    async with pod_rig(db_url, tmp_path, "slow", cancel_grace_s=3.0) as (rig, api):
        action_id = await start(rig)
        await rig.until_published(AgentPromptSent, action_id)
        assert (await rig.broker.cancel(action_id, user_id=OPERATOR)).ok
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.CANCELLED and record.stop_reason == "cancelled", record.detail
        assert api.pods[pod_name(action_id)].gone
        log = rig.workspace(action_id).logs / "agent-stderr.log"
        assert "session/cancel received at" in log.read_text()


async def test_an_unconfirmed_cancel_is_outcome_unknown_with_the_pod_deleted(
    db_url: str, tmp_path: Path
) -> None:
    async with pod_rig(db_url, tmp_path, "hang", cancel_grace_s=0.5) as (rig, api):
        action_id = await start(rig)
        await rig.until_published(AgentPromptSent, action_id)
        assert (await rig.broker.cancel(action_id, user_id=OPERATOR)).ok
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert (record.status, record.error_code) == (JobStatus.OUTCOME_UNKNOWN, "ACP_CANCEL_UNCONFIRMED")
        pod = api.pods[pod_name(action_id)]
        assert pod.gone and pod.deleted_by == "dispatcher"
        assert pod.proc is not None and pod.proc.returncode is not None
        assert (rig.workspace(action_id).private / QUARANTINE_MARKER).is_file()
        assert claim_name(action_id) in api.claims  # the quarantined workspace survives its pod


async def test_a_pod_lost_mid_turn_is_outcome_unknown_and_quarantined(db_url: str, tmp_path: Path) -> None:
    async with pod_rig(db_url, tmp_path, "slow") as (rig, api):
        action_id = await start(rig)
        await rig.until_published(AgentPromptSent, action_id)
        await api.lose(pod_name(action_id))
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert (record.status, record.error_code) == (JobStatus.OUTCOME_UNKNOWN, "ACP_AGENT_EXITED"), (
            record.detail
        )
        assert (rig.workspace(action_id).private / QUARANTINE_MARKER).is_file()
        assert claim_name(action_id) in api.claims
        assert "UNKNOWN" in rig.channel.results()[0]


async def test_a_pod_that_cannot_run_fails_before_anything_is_asked(db_url: str, tmp_path: Path) -> None:
    async with pod_rig(db_url, tmp_path, "normal", image="missing:image") as (rig, api):
        action_id = await start(rig)
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert (record.status, record.error_code) == (JobStatus.FAILED, "ACP_POD_FAILED"), record.detail
        assert "ErrImagePull" in (record.detail or "")
        assert not [e for e in rig.published(AgentPromptSent) if e.action_id == action_id]
        assert api.pods[pod_name(action_id)].gone
        assert not (api.root / "claims" / claim_name(action_id) / "RESULT.md").exists()  # noqa: ASYNC240


async def test_a_cancel_while_the_pod_is_pending_deletes_it_and_nothing_ran(
    db_url: str, tmp_path: Path
) -> None:
    async with pod_rig(db_url, tmp_path, "normal", image="pending:image") as (rig, api):
        action_id = await start(rig)
        name = pod_name(action_id)
        await until(lambda: name in api.pods, f"pod {name} to be created")
        assert (await rig.broker.cancel(action_id, user_id=OPERATOR)).ok
        await rig.executor.wait_idle()

        record = rig.store.require(action_id)
        assert record.status is JobStatus.CANCELLED, record.detail
        assert "cancelled before the agent was started" in (record.detail or "")
        assert api.pods[name].gone and f"attach {name}/agent" not in api.calls


async def test_a_pod_left_by_a_lost_dispatcher_is_reaped_and_its_claim_kept(tmp_path: Path) -> None:
    """A dispatcher died mid-turn with an agent that ignores EOF: another dispatcher's reaper (the job
    is already ``outcome_unknown``) deletes the pod; the quarantined claim stays."""
    bwrap = find_bwrap()
    assert bwrap is not None
    api = FakePodApi(root=tmp_path / "cluster", bwrap=bwrap)
    try:
        await api.create(claim_manifest("a-lost", SETTINGS))
        await api.create(pod_manifest("a-lost", agent_command("hang"), {}, SETTINGS))
        assert (await api.pod_state(pod_name("a-lost"))).phase.value == "Running"
        await reap_pod(api, "a-lost", grace_s=0)
        assert api.pods[pod_name("a-lost")].gone and claim_name("a-lost") in api.claims
    finally:
        await api.aclose()
