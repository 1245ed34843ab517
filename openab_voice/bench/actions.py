"""Actions benchmark: proposal → pinned message, confirm → agent process started, store transitions/s.

Figures: ``proposal_to_pin_ms`` and ``confirm_to_spawn_ms`` (the real bot on the loopback emulator,
DAVE off, a fresh scripted ACP agent per action), ``cancel_race`` (lost cancels when the cancel
follows the Confirm click by 0-30 ms), ``sandbox`` (agent sandbox start overhead against a plain
start) and ``store`` (compare-and-set transitions on SQLite and PostgreSQL). Targets: :data:`TARGETS`.
Method and targets: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openab_voice.acp.sandbox import build_containment
from openab_voice.acp.types import Workspace
from openab_voice.actions.events import AgentProcessStarted
from openab_voice.actions.plane import ActionPlane
from openab_voice.actions.ports import CONFIRM, button_id
from openab_voice.actions.requests import ActionRequest
from openab_voice.app import build_action_parts
from openab_voice.bench.stats import summary
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock, perf_ns
from openab_voice.config import load_settings
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.jobs import EffectCeiling, JobEvent
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import NewAction
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["run"]

OPERATOR = 1001
_CLUSTER_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-test-cluster.sh"
_LIFECYCLE = (JobEvent.DELIVER, JobEvent.CONFIRM, JobEvent.START, JobEvent.SUCCEED)


# Each target names the statistic it is compared with.
TARGETS = {"cancel_race.lost": 0, "sandbox.overhead_ms.p95": 50.0}
_RACE_MAX_OFFSET_MS = 30.0


def run(
    *,
    trials: int = 10,
    transitions: int = 2000,
    postgres_url: str | None = None,
    race_trials: int = 200,
    sandbox_trials: int = 50,
) -> dict[str, Any]:
    """Run every part; returns the JSON-ready result."""
    with tempfile.TemporaryDirectory(prefix="openab-bench-actions-") as scratch:
        data_dir = Path(scratch)
        result: dict[str, Any] = asyncio.run(_bot_trials(trials, data_dir, race_trials))
        result["sandbox"] = sandbox_overhead(data_dir / "sandbox", sandbox_trials)
        store: dict[str, Any] = {"sqlite": _store_rate(f"sqlite:///{data_dir / 'rate.db'}", transitions)}
        with _postgres(postgres_url, data_dir) as url:
            store["postgresql"] = url if isinstance(url, dict) else _store_rate(url, transitions)
    result["store"] = store
    result["trials"] = trials
    result["targets"] = dict(TARGETS)
    result["meets_targets"] = meets_targets(result)
    return result


def meets_targets(result: dict[str, Any]) -> dict[str, bool]:
    """Each target against exactly the statistic it names (a missing figure never meets it)."""
    lost = result.get("cancel_race", {}).get("lost")
    p95 = result.get("sandbox", {}).get("overhead_ms", {}).get("p95")
    return {
        "cancel_race.lost": lost is not None and lost <= TARGETS["cancel_race.lost"],
        "sandbox.overhead_ms.p95": p95 is not None and p95 <= TARGETS["sandbox.overhead_ms.p95"],
    }


async def _bot_trials(trials: int, data_dir: Path, race_trials: int) -> dict[str, Any]:
    clock: Clock = SystemClock()
    bus = EventBus()
    settings = load_settings(
        {},
        transcription_enabled=False,
        actions_enabled=True,
        operator_user_id=OPERATOR,
        acp_agent_command=shlex.join([sys.executable, "-m", "openab_voice.testing.acp_agent"]),
        data_dir=data_dir,
    )
    parts = build_action_parts(settings, clock=clock)
    assert parts is not None
    spawned: dict[str, float] = {}
    sub = bus.subscribe(AgentProcessStarted, lambda e: spawned.__setitem__(e.action_id, e.at))
    to_pin: list[float] = []
    to_spawn: list[float] = []
    statuses: list[str] = []
    try:
        async with BotOnEmulator(
            settings,
            EmulatorConfig(dave=False),
            users={OPERATOR: "operator"},
            clock=clock,
            bus=bus,
            actions=parts,
        ) as h:
            plane = h.actions
            assert plane is not None
            for trial in range(trials):
                request = _request(h, f"write the benchmark note number {trial}", f"bench-{trial}")
                started = clock.monotonic()
                outcome = await plane.broker.propose(request)
                assert outcome.action is not None and outcome.action.proposal_message_id is not None
                message_id = outcome.action.proposal_message_id
                await _until(clock, lambda m=message_id: m in h.emulator.pins())
                to_pin.append((clock.monotonic() - started) * 1000.0)
                clicked = clock.monotonic()
                await h.emulator.click_button(OPERATOR, message_id, button_id(CONFIRM, outcome.action.id))
                action_id = outcome.action.id
                await _until(clock, lambda a=action_id: a in spawned)
                to_spawn.append((spawned[action_id] - clicked) * 1000.0)
                await _until(clock, lambda: not plane.executor.running)
                final = await plane.broker.get(action_id)
                statuses.append(final.status.value if final else "missing")
            race = await _cancel_race(h, plane, clock, race_trials)
    finally:
        sub.close()
        parts.store.close()
    return {
        "proposal_to_pin_ms": summary(to_pin),
        "confirm_to_spawn_ms": summary(to_spawn),
        "final_statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "cancel_race": race,
    }


async def _cancel_race(h: BotOnEmulator, plane: ActionPlane, clock: Clock, trials: int) -> dict[str, Any]:
    """Cancel 0-30 ms after the Confirm click; count cancels that were refused or lost."""
    refused: dict[str, int] = {}
    finals: dict[str, int] = {}
    lost = 0
    for trial in range(trials):
        offset_ms = _RACE_MAX_OFFSET_MS * trial / max(1, trials - 1)
        outcome = await plane.broker.propose(_request(h, f"race note {trial}", f"race-{trial}"))
        assert outcome.action is not None and outcome.action.proposal_message_id is not None
        action_id = outcome.action.id
        clicked = await plane.broker.click(
            decision=CONFIRM,
            action_id=action_id,
            user_id=OPERATOR,
            message_id=outcome.action.proposal_message_id,
        )
        assert clicked.ok, clicked.message
        await clock.sleep(offset_ms / 1000.0)
        cancel = await plane.broker.cancel(action_id, user_id=OPERATOR)
        await _until(clock, lambda: not plane.executor.running)
        final = await plane.broker.get(action_id)
        status = final.status.value if final else "missing"
        finals[status] = finals.get(status, 0) + 1
        if not cancel.ok:
            refused[str(cancel.code)] = refused.get(str(cancel.code), 0) + 1
        if not cancel.ok or status == "succeeded":
            lost += 1
    return {
        "trials": trials,
        "offsets_ms": [0.0, _RACE_MAX_OFFSET_MS],
        "lost": lost,
        "refused": refused,
        "final_statuses": dict(sorted(finals.items())),
    }


def _request(h: BotOnEmulator, goal: str, call_id: str) -> ActionRequest:
    return ActionRequest(
        goal=goal,
        effect_hint=EffectCeiling.WORKSPACE_WRITE,
        call_id=call_id,
        source="tool",
        guild_id=h.emulator.guild_id,
        voice_channel_id=h.emulator.voice_channel_id,
        text_channel_id=h.emulator.text_channel_id,
        session_generation=h.session.generation,
        voice_session_id=h.session.id,
        speaker_id=OPERATOR,
    )


def sandbox_overhead(scratch: Path, trials: int) -> dict[str, Any]:
    """``/bin/true`` started inside the agent sandbox vs plainly, paired; overhead P50/P95 in ms."""
    containment = build_containment("auto", data_dir=scratch / "data", environ={})
    sandbox = containment.sandbox
    if sandbox is None:
        return {"error": {"code": ErrorCode.BENCH_NO_SANDBOX, "message": containment.reason}}
    workspace = Workspace(
        id="bench", action_id="bench", path=scratch / "data" / "work", private=scratch / "data" / "p"
    )
    for folder in (workspace.path, workspace.home, workspace.tmp):
        folder.mkdir(parents=True, exist_ok=True)
    plain_argv = ["/bin/true"]
    boxed_argv = sandbox.command(plain_argv, workspace)
    plain: list[float] = []
    boxed: list[float] = []
    for _ in range(trials):
        for argv, samples in ((plain_argv, plain), (boxed_argv, boxed)):
            t0 = perf_ns()
            done = subprocess.run(argv, capture_output=True, check=False)
            samples.append((perf_ns() - t0) / 1e6)
            if done.returncode != 0:
                return {
                    "error": {"code": ErrorCode.BENCH_SANDBOX_FAILED, "message": done.stderr.decode()[-300:]}
                }
    return {
        "trials": trials,
        "plain_start_ms": summary(plain),
        "sandboxed_start_ms": summary(boxed),
        "overhead_ms": summary([b - p for b, p in zip(boxed, plain, strict=True)]),
    }


async def _until(clock: Clock, condition: Any, *, limit_s: float = 30.0) -> None:
    deadline = clock.monotonic() + limit_s
    while not condition():
        if clock.monotonic() > deadline:
            raise TimeoutError("benchmark step did not complete")
        await clock.sleep(0.002)


def _store_rate(url: str, transitions: int) -> dict[str, Any]:
    """Full lifecycles through the store; per-write latency and transitions per second."""
    try:
        upgrade(url)
    except OpenabError as exc:
        return {"error": exc.to_dict()}
    store = JobStore(open_engine(url), SystemClock())
    per_write: list[float] = []
    actions = max(1, transitions // (len(_LIFECYCLE) + 1))
    begin = perf_ns()
    try:
        for i in range(actions):
            t0 = perf_ns()
            record, _ = store.create(
                NewAction(
                    id=f"b-{os.getpid()}-{begin}-{i}",
                    goal="bench",
                    effect_hint=EffectCeiling.READ_ONLY,
                    guild_id=1,
                    text_channel_id=2,
                    session_generation=1,
                    proposed_by=OPERATOR,
                    expires_at=4_000_000_000.0,
                )
            )
            per_write.append((perf_ns() - t0) / 1e6)
            for event in _LIFECYCLE:
                t0 = perf_ns()
                record = store.apply(record.id, event, actor="bench", expected_version=record.version)
                per_write.append((perf_ns() - t0) / 1e6)
    finally:
        store.close()
    seconds = (perf_ns() - begin) / 1e9
    return {
        "transitions": len(per_write),
        "transitions_per_s": round(len(per_write) / seconds, 1),
        "write_ms": summary(per_write),
    }


@contextlib.contextmanager
def _postgres(url: str | None, scratch: Path) -> Iterator[str | dict[str, Any]]:
    """The PostgreSQL URL to measure, starting a throwaway cluster when none is given."""
    url = url or os.environ.get("TEST_POSTGRES_URL")
    if url:
        yield url
        return
    if not _CLUSTER_SCRIPT.is_file():
        yield {
            "error": {
                "code": ErrorCode.BENCH_NO_POSTGRES,
                "message": "pass --postgres-url (no cluster script here)",
            }
        }
        return
    # Not under the scratch dir: as root the server runs as `postgres`, which must enter the directory.
    cluster = Path(tempfile.mkdtemp(prefix="openab-bench-pg-", dir="/tmp"))
    started = subprocess.run(
        ["bash", str(_CLUSTER_SCRIPT), "start", str(cluster)], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        yield {"error": {"code": ErrorCode.BENCH_NO_POSTGRES, "message": started.stderr.strip()[-300:]}}
        return
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(_CLUSTER_SCRIPT), "stop", str(cluster)], capture_output=True, check=False)
