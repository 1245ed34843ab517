"""``/voice memory`` through the loopback emulator: each person sees what is remembered about them
(the operator sees everyone's) and may forget their own; the operator may forget any; with memory
off the command says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from openab_voice.app.records import RecordParts, build_record_parts
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.memory.long_term import MemoryKind
from openab_voice.store.memory_rows import MemoryRecord
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

pytestmark = pytest.mark.e2e

OPERATOR, ALICE, BOB = 1000, 1001, 1002


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[tuple[BotOnEmulator, RecordParts]]:
    settings = load_settings(
        {},
        transcription_enabled=False,
        memory_enabled=True,
        operator_user_id=OPERATOR,
        data_dir=tmp_path / "d",
    )
    records = build_record_parts(settings)
    assert records is not None and records.memory is not None
    try:
        async with BotOnEmulator(
            settings,
            EmulatorConfig(dave=False),
            users={ALICE: "alice", BOB: "bob", OPERATOR: "olivia"},
            clock=SystemClock(),
            records=records,
        ) as h:
            yield h, records
    finally:
        records.close()


def remember(records: RecordParts, guild_id: int, speaker: int, text: str) -> MemoryRecord:
    assert records.memory is not None
    saved = records.memory.save(
        guild_id=guild_id, kind=MemoryKind.FACT, text=text, speaker_id=str(speaker), source="test"
    )
    assert isinstance(saved, MemoryRecord)
    return saved


async def ask(h: BotOnEmulator, user_id: int, **options: Any) -> tuple[str, bool]:
    interaction = await h.emulator.invoke_command(
        user_id, "voice", subcommand="memory", options=options or None
    )
    reply = await interaction.reply(timeout=10.0)
    return reply.content, reply.ephemeral


async def test_list_and_forget(rig: tuple[BotOnEmulator, RecordParts]) -> None:
    h, records = rig
    guild = h.emulator.guild_id
    tea = remember(records, guild, ALICE, "Alice prefers tea")
    falcon = remember(records, guild, BOB, "Bob works on Falcon")

    text, ephemeral = await ask(h, ALICE)
    assert ephemeral and f"`{tea.id}` fact · <@{ALICE}>" in text and "Alice prefers tea" in text
    assert "Falcon" not in text  # only what is about the caller
    text, _ = await ask(h, OPERATOR)
    assert "Alice prefers tea" in text and "Bob works on Falcon" in text

    text, _ = await ask(h, ALICE, forget=falcon.id)
    assert text == "Not forgotten: only the person it is about, or the operator, can forget it."
    assert (await ask(h, BOB, forget=falcon.id))[0] == f"Forgotten: memory {falcon.id}."
    assert (await ask(h, OPERATOR, forget=tea.id))[0] == f"Forgotten: memory {tea.id}."
    assert (await ask(h, OPERATOR, forget=tea.id))[0] == f"Not forgotten: no memory {tea.id} here."
    assert (await ask(h, ALICE))[0] == "I remember nothing about you here."


async def test_memory_off(tmp_path: Path) -> None:
    settings = load_settings({}, transcription_enabled=False, data_dir=tmp_path / "d")
    async with BotOnEmulator(settings, EmulatorConfig(dave=False), users={ALICE: "alice"}) as h:
        assert await ask(h, ALICE) == ("Long-term memory is off (OPENAB_MEMORY_ENABLED).", True)
