"""Actions benchmark: proposal → pinned message, confirm → agent process started, store transitions/s.

* ``proposal_to_pin_ms``: the real bot on the loopback emulator (DAVE off, no speech models); a
  proposal goes through the broker exactly as a tool call or the task phrase would, and the clock
  stops when the emulator holds the message pinned (observed from the emulator, not from the bot).
* ``confirm_to_spawn_ms``: the operator's Confirm click is sent by the emulator (INTERACTION_CREATE
  over the gateway); the clock stops at ``AgentProcessStarted`` for that action — a fresh scripted
  ACP agent process (:mod:`openab_voice.testing.acp_agent`) per action. Each action then runs to its
  end before the next trial, so trials do not overlap.
* ``store``: compare-and-set transitions through :class:`~openab_voice.store.jobs.JobStore`, one
  full lifecycle (create, deliver, confirm, start, succeed) per action, on SQLite (a file) and on
  PostgreSQL (``--postgres-url``, ``TEST_POSTGRES_URL``, or a throwaway local cluster started
  with ``scripts/pg-test-cluster.sh`` from a source checkout). A PostgreSQL that cannot be reached is
  reported as an error entry, never as a number.
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

from openab_voice.actions.events import AgentProcessStarted
from openab_voice.actions.jobs import EffectCeiling, JobEvent
from openab_voice.actions.ports import CONFIRM, button_id
from openab_voice.actions.requests import ActionRequest
from openab_voice.app import build_action_plane
from openab_voice.bench.stats import summary
from openab_voice.bus import EventBus
from openab_voice.clock import Clock, SystemClock, perf_ns
from openab_voice.config import load_settings
from openab_voice.errors import OpenabError
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import NewAction
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["run"]

OPERATOR = 1001
_CLUSTER_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-test-cluster.sh"
_LIFECYCLE = (JobEvent.DELIVER, JobEvent.CONFIRM, JobEvent.START, JobEvent.SUCCEED)


def run(*, trials: int = 10, transitions: int = 2000, postgres_url: str | None = None) -> dict[str, Any]:
    """Run every part; returns the JSON-ready result."""
    with tempfile.TemporaryDirectory(prefix="openab-bench-actions-") as scratch:
        data_dir = Path(scratch)
        result: dict[str, Any] = asyncio.run(_bot_trials(trials, data_dir))
        store: dict[str, Any] = {"sqlite": _store_rate(f"sqlite:///{data_dir / 'rate.db'}", transitions)}
        with _postgres(postgres_url, data_dir) as url:
            store["postgresql"] = url if isinstance(url, dict) else _store_rate(url, transitions)
    result["store"] = store
    result["trials"] = trials
    return result


async def _bot_trials(trials: int, data_dir: Path) -> dict[str, Any]:
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
    plane = build_action_plane(settings, bus=bus, clock=clock)
    assert plane is not None
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
            actions=plane,
        ) as h:
            for trial in range(trials):
                request = ActionRequest(
                    goal=f"write the benchmark note number {trial}",
                    effect_hint=EffectCeiling.WORKSPACE_WRITE,
                    call_id=f"bench-{trial}",
                    source="tool",
                    guild_id=h.emulator.guild_id,
                    voice_channel_id=h.emulator.voice_channel_id,
                    text_channel_id=h.emulator.text_channel_id,
                    session_generation=h.session.generation,
                    voice_session_id=h.session.id,
                    speaker_id=OPERATOR,
                )
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
    finally:
        sub.close()
        plane.store.close()
    return {
        "proposal_to_pin_ms": summary(to_pin),
        "confirm_to_spawn_ms": summary(to_spawn),
        "final_statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
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
            "error": {"code": "BENCH_NO_POSTGRES", "message": "pass --postgres-url (no cluster script here)"}
        }
        return
    # Not under the scratch dir: as root the server runs as `postgres`, which must enter the directory.
    cluster = Path(tempfile.mkdtemp(prefix="openab-bench-pg-", dir="/tmp"))
    started = subprocess.run(
        ["bash", str(_CLUSTER_SCRIPT), "start", str(cluster)], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        yield {"error": {"code": "BENCH_NO_POSTGRES", "message": started.stderr.strip()[-300:]}}
        return
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(_CLUSTER_SCRIPT), "stop", str(cluster)], capture_output=True, check=False)
