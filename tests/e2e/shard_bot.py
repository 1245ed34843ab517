"""One bot pod as its own process, on a loopback emulator in another process (the shard e2e test).

    python -m tests.e2e.shard_bot --port PORT --ca CA.pem --token TOKEN

Settings come from the environment (``OPENAB_SHARD_COUNT``, ``OPENAB_SHARD_ORDINAL``,
``OPENAB_EXECUTOR=remote``, the PostgreSQL URL ...), exactly as ``openab-voice run`` reads them; the
bot is the application's own (``Application.create_bot``), with the action plane built as ``run``
builds it and no conversation providers (receive-only; no models loaded). Only its link to Discord
differs: discord.com and gateway.discord.gg resolve to the emulator's port, trusting its CA.

Stdout carries one JSON line per observation: ``{"ready": [guild ids]}``; ``{"joined": guild}``;
each ``ActionChanged`` and ``ActionResultPosted`` with its action id; and the answer to each stdin
line ``say GUILD USER TEXT`` (a final transcript of USER in this process's voice session of GUILD, as
the transcriber would publish it: ``{"said": guild}``, or ``{"no_session": guild}`` when this process
holds no voice session there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import aiohttp

from openab_voice.actions.events import ActionChanged, ActionResultPosted
from openab_voice.app import Application, build_action_parts
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.emulator import certs
from openab_voice.testing.emulator.resolver import EmulatorResolver


class EmulatorAt:
    """The emulator in another process, as ``Application.create_bot`` needs it."""

    def __init__(self, port: int, ca_pem: bytes, token: str) -> None:
        self.token = token
        self._port = port
        self._material = certs.EmulatorCertificate(ca_pem=ca_pem, cert_pem=b"", key_pem=b"")

    def client_connector(self) -> aiohttp.TCPConnector:
        resolver = EmulatorResolver({name: self._port for name in certs.SERVER_NAMES})
        return aiohttp.TCPConnector(
            resolver=resolver, ssl=certs.client_ssl_context(self._material), limit=0, use_dns_cache=False
        )


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def observe(event: Event) -> None:
    if isinstance(event, ActionChanged):
        emit({"action": event.action_id, "status": event.status})
    elif isinstance(event, ActionResultPosted):
        emit({"action": event.action_id, "result_posted": event.delivered})


async def main(port: int, ca_pem: bytes, token: str) -> None:
    clock = SystemClock()
    bus = EventBus()
    bus.bind_loop(asyncio.get_running_loop())
    bus.subscribe(ActionChanged, observe)
    bus.subscribe(ActionResultPosted, observe)
    settings = load_settings()
    actions = build_action_parts(settings, clock=clock)
    app = Application(
        settings=settings, bus=bus, clock=clock, providers=ConversationProviders(), actions=actions
    )
    bot = app.create_bot(emulator=EmulatorAt(port, ca_pem, token))
    await bot.login(token)
    runner = asyncio.create_task(bot.connect(reconnect=False), name="shard-bot")
    await bot.wait_until_ready()
    emit({"ready": sorted(g.id for g in bot.guilds)})
    watchers = [
        asyncio.create_task(joined(bot.voice.wait_joined, g.id), name=f"joined-{g.id}") for g in bot.guilds
    ]
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    n = 0
    while line := (await reader.readline()).decode().strip():
        _, guild, user, text = line.split(" ", 3)
        session = bot.voice.get(int(guild))
        if session is None:
            emit({"no_session": int(guild)})
            continue
        n += 1
        now = clock.monotonic()
        final = TranscriptFinal(
            at=now,
            session_id=session.id,
            speaker_id=user,
            utterance_id=f"{user}-{n}",
            text=text,
            audio_start=now - 2.0,
            audio_end=now - 0.1,
            partials=1,
        )
        bus.publish(final)  # as the transcriber hands it out: observed, then routed by the desk
        session.desk.route(final)
        emit({"said": int(guild)})
    for watcher in watchers:
        watcher.cancel()
    await bot.close()
    await asyncio.gather(runner, return_exceptions=True)
    if actions is not None:
        actions.store.close()


async def joined(wait: object, guild_id: int) -> None:
    await wait(guild_id)  # type: ignore[operator]
    emit({"joined": guild_id})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", type=Path, required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.ca.read_bytes(), args.token))
