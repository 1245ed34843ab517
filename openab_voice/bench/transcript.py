"""Transcript benchmark: ``/voice transcript`` for a long session, through the loopback emulator.

The real bot joins (DAVE off, no speech models); its live session's record is filled with
``hours`` of talk by ``speakers`` people (one 15-word final every 2 s, written straight to the
store in batches, as the recorder writes them), then a member of the call asks ``/voice transcript``.
``command_ms`` runs from the interaction sent to the reply holding both files (read from the store,
rendered, uploaded through discord.py, received by the emulator); ``export_ms`` is the read and
rendering alone; ``txt_bytes`` / ``json_bytes`` are the files' sizes.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from openab_voice.app.records import build_record_parts
from openab_voice.bench.stats import summary
from openab_voice.bus import EventBus
from openab_voice.clock import SystemClock, perf_ns
from openab_voice.config import load_settings
from openab_voice.memory.meeting import MeetingRecords, Refusal
from openab_voice.store.transcripts import LineKind, NewLine
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["run"]

_WORDS = [
    "we",
    "should",
    "move",
    "the",
    "release",
    "to",
    "next",
    "week",
    "because",
    "the",
    "migration",
    "still",
    "needs",
    "a",
    "review",
    "and",
    "the",
    "dashboard",
    "tests",
    "keep",
    "failing",
    "on",
    "the",
    "staging",
    "cluster",
    "after",
    "the",
    "last",
    "deploy",
]
FIRST_USER = 1000


def _lines(hours: float, speakers: int, start: float) -> list[NewLine]:
    out = []
    for n in range(int(hours * 3600 / 2)):
        speaker = FIRST_USER + n % speakers
        words = [_WORDS[(n * 7 + k) % len(_WORDS)] for k in range(15)]
        at = start + 2.0 * n
        out.append(
            NewLine(
                kind=LineKind.SPEECH,
                speaker_id=str(speaker),
                speaker_name=f"speaker{speaker - FIRST_USER}",
                text=" ".join(words).capitalize() + ".",
                started_at=at,
                ended_at=at + 1.8,
            )
        )
    return out


def run(*, speakers: int = 10, hours: float = 2.0, trials: int = 5) -> dict[str, Any]:
    return asyncio.run(_run(speakers=speakers, hours=hours, trials=trials))


async def _run(*, speakers: int, hours: float, trials: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="openab-bench-transcript-") as tmp:
        settings = load_settings(
            {}, transcription_enabled=False, transcript_store=True, data_dir=Path(tmp) / "data"
        )
        records = build_record_parts(settings)
        assert records is not None and records.transcripts is not None
        store = records.transcripts
        users = {FIRST_USER + i: f"speaker{i}" for i in range(speakers)}
        try:
            async with BotOnEmulator(
                settings,
                EmulatorConfig(dave=False),
                users=users,
                clock=SystemClock(),
                bus=EventBus(),
                records=records,
            ) as h:
                recorder = h.session.recorder
                assert recorder is not None
                await recorder.flush()  # the session's row exists
                session_id = h.session.id
                lines = _lines(hours, speakers, start=SystemClock().wall() - hours * 3600)
                for first in range(0, len(lines), 500):
                    await asyncio.to_thread(
                        store.add, session_id, lines[first : first + 500], audience=tuple(users)
                    )
                meeting = MeetingRecords(store)
                exports, commands = [], []
                txt = json_size = 0
                for _ in range(trials):
                    start = perf_ns()
                    found = await meeting.resolve(guild_id=h.emulator.guild_id, user_id=FIRST_USER)
                    assert not isinstance(found, Refusal)
                    export = await meeting.export(found)
                    exports.append((perf_ns() - start) / 1e6)
                    await h.clock.sleep(0.2)  # let the bot's loop settle between the two measurements
                    start = perf_ns()
                    interaction = await h.emulator.invoke_command(
                        FIRST_USER, "voice", subcommand="transcript"
                    )
                    reply = await interaction.reply(timeout=120.0)
                    commands.append((perf_ns() - start) / 1e6)
                    assert [f.filename.rsplit(".", 1)[1] for f in reply.files] == ["txt", "json"]
                    txt, json_size = len(reply.files[0].data), len(reply.files[1].data)
                    assert txt == len(export.text.encode())
        finally:
            records.close()
    return {
        "bench": "transcript",
        "hours": hours,
        "speakers": speakers,
        "lines": len(lines),
        "command_ms": summary(commands),
        "export_ms": summary(exports),
        "txt_bytes": txt,
        "json_bytes": json_size,
        "ok": True,
    }
