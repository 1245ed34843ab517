"""Transcript benchmark: ``/voice transcript`` for a long session, through the loopback emulator.

The real bot joins (DAVE off, no speech models); its live session's record is filled with
``hours`` of talk by ``speakers`` people (one 15-word final every 2 s, written straight to the
store in batches, as the recorder writes them), then a member of the call asks ``/voice transcript``.
``command_ms`` runs from the interaction sent to the reply holding both files (read from the store,
rendered, uploaded through discord.py, received by the emulator); ``export_ms`` is the read and
rendering alone; ``txt_bytes`` / ``json_bytes`` are the files' sizes.

Every trial checks the reply: the command was not refused, it holds a ``.txt`` and a ``.json``
file, the text file is the transcript's text and the JSON file holds every line written.
``failed_checks`` lists what did not hold; ``ok`` is true only when it is empty. The checks are
plain conditions, not ``assert`` statements, so they hold under ``python -O`` too.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
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

__all__ = ["reply_failures", "report", "run"]

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


def reply_failures(files: Sequence[tuple[str, bytes]], *, text: str, lines: int) -> list[str]:
    """What is wrong with a ``/voice transcript`` reply's ``(filename, data)`` files, given the
    transcript's text as the store renders it and how many lines were written (empty: nothing)."""
    kinds = [name.rsplit(".", 1)[-1] for name, _ in files]
    if kinds != ["txt", "json"]:
        return [f"the reply's files are {kinds}, not ['txt', 'json']"]
    (_, txt), (_, json_file) = files
    failed = []
    if txt != text.encode():
        failed.append(f"the .txt file ({len(txt)} bytes) is not the transcript ({len(text.encode())} bytes)")
    try:
        document = json.loads(json_file)
    except ValueError as exc:
        return [*failed, f"the .json file is not JSON: {exc}"]
    held = document.get("lines") if isinstance(document, dict) else None
    if not isinstance(held, list) or len(held) != lines:
        count = len(held) if isinstance(held, list) else "no"
        failed.append(f"the .json file holds {count} lines, not the {lines} written")
    return failed


def report(
    *,
    hours: float,
    speakers: int,
    lines: int,
    commands: list[float],
    exports: list[float],
    txt_bytes: int,
    json_bytes: int,
    failed_checks: list[str],
) -> dict[str, Any]:
    """The benchmark's JSON: ``ok`` is false when any check failed."""
    return {
        "bench": "transcript",
        "hours": hours,
        "speakers": speakers,
        "lines": lines,
        "command_ms": summary(commands),
        "export_ms": summary(exports),
        "txt_bytes": txt_bytes,
        "json_bytes": json_bytes,
        "failed_checks": list(failed_checks),
        "ok": not failed_checks,
    }


def run(*, speakers: int = 10, hours: float = 2.0, trials: int = 5) -> dict[str, Any]:
    return asyncio.run(_run(speakers=speakers, hours=hours, trials=trials))


async def _run(*, speakers: int, hours: float, trials: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="openab-bench-transcript-") as tmp:
        settings = load_settings(
            {}, transcription_enabled=False, transcript_store=True, data_dir=Path(tmp) / "data"
        )
        records = build_record_parts(settings)
        if records is None or records.transcripts is None:
            raise RuntimeError("the transcript store is not configured")
        store = records.transcripts
        users = {FIRST_USER + i: f"speaker{i}" for i in range(speakers)}
        failed: list[str] = []
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
                if recorder is None:
                    raise RuntimeError("the live session has no recorder")
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
                for trial in range(trials):
                    start = perf_ns()
                    found = await meeting.resolve(guild_id=h.emulator.guild_id, user_id=FIRST_USER)
                    if isinstance(found, Refusal):
                        failed.append(f"trial {trial}: the live session was refused: {found.reason}")
                        break
                    export = await meeting.export(found)
                    exports.append((perf_ns() - start) / 1e6)
                    await h.clock.sleep(0.2)  # let the bot's loop settle between the two measurements
                    start = perf_ns()
                    interaction = await h.emulator.invoke_command(
                        FIRST_USER, "voice", subcommand="transcript"
                    )
                    reply = await interaction.reply(timeout=120.0)
                    commands.append((perf_ns() - start) / 1e6)
                    files = [(f.filename, f.data) for f in reply.files]
                    problems = reply_failures(files, text=export.text, lines=len(lines))
                    failed.extend(f"trial {trial}: {problem}" for problem in problems)
                    txt, json_size = (len(files[0][1]), len(files[1][1])) if len(files) == 2 else (0, 0)
        finally:
            records.close()
    return report(
        hours=hours,
        speakers=speakers,
        lines=len(lines),
        commands=commands,
        exports=exports,
        txt_bytes=txt,
        json_bytes=json_size,
        failed_checks=failed,
    )
