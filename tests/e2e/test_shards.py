"""Many guilds: two bot pods as two processes, each running its shard of two, on one emulator that
hosts two guilds (one per shard), against one PostgreSQL, with one shared executor worker.

Each process IDENTIFYs with its shard and is given only its guild; the ``/voice join`` of a guild
reaches only its shard, which alone holds that voice session; a task requested in each guild (the
operator's final transcript handed to that process's session as the transcriber would: no audio) is proposed,
confirmed, run once by the worker and delivered by that guild's shard only (its result in its own
guild's channel). The bot processes are the application's own bot on a link to the emulator
(``tests/e2e/shard_bot.py``), configured by environment as a pod is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from openab_voice.actions.ports import CONFIRM, button_id
from openab_voice.clock import SystemClock
from openab_voice.jobs import JobEvent, JobStatus
from openab_voice.shards import shard_of
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.jobs import JobStore
from openab_voice.testing.emulator import DiscordEmulator, EmulatorConfig
from tests.e2e.test_executor_workers import Worker
from tests.fakes.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)]

OPERATOR = 1001
WAIT_S = 90.0  # per wait: two pods and a worker start on a shared 2-core machine


class ShardProcess:
    """One bot pod: ``python -m tests.e2e.shard_bot`` with shard ``ordinal`` of 2."""

    def __init__(self, process: asyncio.subprocess.Process, ordinal: int) -> None:
        self.process = process
        self.ordinal = ordinal
        self.seen: list[dict[str, Any]] = []

    async def next(self, key: str) -> dict[str, Any]:
        """The next stdout record with ``key`` (earlier ones kept in :attr:`seen`)."""
        assert self.process.stdout is not None
        async with asyncio.timeout(WAIT_S):
            while True:
                line = await self.process.stdout.readline()
                if not line:
                    raise AssertionError(f"shard {self.ordinal} exited waiting for {key}")
                record: dict[str, Any] = json.loads(line)
                self.seen.append(record)
                if key in record:
                    return record

    async def say(self, guild_id: int, text: str) -> bool:
        """A final transcript of the operator in ``guild_id``: True when this process held its session."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"say {guild_id} {OPERATOR} {text}\n".encode())
        await self.process.stdin.drain()
        async with asyncio.timeout(WAIT_S):
            while True:
                record = json.loads(await self.process.stdout.readline())
                self.seen.append(record)
                if "said" in record or "no_session" in record:
                    return "said" in record

    def actions(self) -> set[str]:
        return {r["action"] for r in self.seen if "action" in r}


@contextlib.asynccontextmanager
async def shard(
    ordinal: int, *, host: DiscordEmulator, db_url: str, root: Path
) -> AsyncIterator[ShardProcess]:
    ca = root / "emulator-ca.pem"
    ca.write_bytes(host.ca_pem)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")}
    env.update(
        {
            "OPENAB_DATABASE_URL": db_url,
            "OPENAB_DATA_DIR": str(root / f"bot-{ordinal}"),
            "OPENAB_NODE_ID": f"openab-bot-{ordinal}",
            "OPENAB_SHARD_COUNT": "2",
            "OPENAB_SHARD_ORDINAL": str(ordinal),
            "OPENAB_EXECUTOR": "remote",
            "OPENAB_EXECUTOR_POLL_S": "0.2",
            "OPENAB_ACTIONS_ENABLED": "true",
            "OPENAB_OPERATOR_USER_ID": str(OPERATOR),
            "OPENAB_TRANSCRIPTION_ENABLED": "false",
            "OPENAB_LOG_LEVEL": "WARNING",
        }
    )
    log = (root / f"bot-{ordinal}.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e.shard_bot",
        "--port",
        str(host.api_port),
        "--ca",
        str(ca),
        "--token",
        host.token,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    try:
        yield ShardProcess(process, ordinal)
    finally:
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()  # the bot closes and exits
        try:
            async with asyncio.timeout(WAIT_S):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        log.close()


def proposal(guild: DiscordEmulator) -> dict[str, Any]:
    [found] = [m for m in guild.messages(guild.text_channel_id) if "Action proposal" in str(m["content"])]
    return found


async def test_each_guild_is_served_by_its_own_shard_and_each_action_runs_once(
    db_url: str, tmp_path: Path
) -> None:
    upgrade(db_url)  # once, before two pods start (each would otherwise migrate at the same time)
    store = JobStore(open_engine(db_url), SystemClock())
    config = EmulatorConfig(dave=False)
    # The executors stay shared: one worker for both pods (started first: it loads while they do).
    worker = Worker(db_url, tmp_path, "shared-worker", OPENAB_LEASE_S="30", OPENAB_HEARTBEAT_S="1")
    try:
        async with DiscordEmulator(config) as first:
            second = DiscordEmulator(config, joined=first, shard=(1 - shard_of(first.guild_id, 2), 2))
            async with second:
                guilds = {shard_of(g.guild_id, 2): g for g in (first, second)}
                assert set(guilds) == {0, 1}
                for guild in guilds.values():
                    guild.add_user(OPERATOR, "olivia")
                async with (
                    shard(0, host=first, db_url=db_url, root=tmp_path) as pod0,
                    shard(1, host=first, db_url=db_url, root=tmp_path) as pod1,
                ):
                    pods = {0: pod0, 1: pod1}
                    # Each pod is given only the guild on its shard.
                    for n, pod in pods.items():
                        assert (await pod.next("ready"))["ready"] == [guilds[n].guild_id]

                    # /voice join in each guild reaches only its own pod, which alone holds the session.
                    for n, guild in guilds.items():
                        await guild.invoke_command(
                            OPERATOR, "voice", subcommand="join", options={"channel": guild.voice_channel_id}
                        )
                        assert (await pods[n].next("joined"))["joined"] == guild.guild_id
                        await guild.wait_voice_ready(timeout=WAIT_S)

                    for n, guild in guilds.items():
                        other = pods[1 - n]
                        assert not await other.say(
                            guild.guild_id, f"Start a task: write a haiku for shard {n}."
                        )
                        assert await pods[n].say(
                            guild.guild_id, f"Start a task: write a haiku for shard {n}."
                        )
                    for guild in guilds.values():
                        await until(
                            lambda guild=guild: bool(
                                [m for m in guild.messages() if "Action proposal" in str(m["content"])]
                            ),
                            "the proposal",
                            within_s=WAIT_S,
                        )

                    ids = {}
                    for n, guild in guilds.items():
                        # Clickable once it is also pinned: the store then says delivered.
                        await until(
                            lambda guild=guild: (
                                [a.status for a in store.recent(guild_id=guild.guild_id)]
                                == [JobStatus.DELIVERED]
                            ),
                            "the delivered write",
                            within_s=WAIT_S,
                        )
                        [action] = store.recent(guild_id=guild.guild_id)
                        ids[n] = action.id
                        message = proposal(guild)
                        click = await guild.click_button(
                            OPERATOR, int(message["id"]), button_id(CONFIRM, action.id)
                        )
                        assert "Confirmed" in (await click.reply()).content
                    for n, pod in pods.items():
                        record = await pod.next("result_posted")
                        assert record == {"action": ids[n], "result_posted": True}
                        assert pod.actions() == {ids[n]}  # nothing of the other guild's action, ever

                    for n, guild in guilds.items():
                        final = store.require(ids[n])
                        assert (final.status, final.delivery_outcome) == (JobStatus.SUCCEEDED, "delivered")
                        assert final.lease_owner is not None and final.lease_owner.startswith(
                            "executor:shared-worker/"
                        )
                        assert sum(t.event == JobEvent.START for t in store.transitions(ids[n])) == 1
                        results = [
                            m for m in guild.messages() if f"Action `{ids[n]}` succeeded" in str(m["content"])
                        ]
                        assert len(results) == 1, results
                        stray = [m for m in guild.messages() if ids[1 - n] in str(m["content"])]
                        assert stray == []  # the other guild's action never shows up here
                    # Drained while the pods close.
                    stopping = asyncio.create_task(asyncio.to_thread(worker.stop))
        assert await stopping == 0, worker.output()
    finally:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(30)
        store.close()
