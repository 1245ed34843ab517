"""The bundled ``meeting-record`` scenario through the demo runner on the loopback emulator: the
meeting record and long-term memory on, alice says "remember that ..." and the two talk, then
``/voice memory``, ``/voice transcript`` and ``/voice summary`` run as scenario events and every
reply (ephemeral ones, and the transcript's files by name and size) is in the report's text channel."""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.config import load_settings
from openab_voice.demo.runner import run_demo
from openab_voice.demo.scenario import load_scenario
from openab_voice.report.page import render_html

pytestmark = pytest.mark.e2e


async def test_the_meeting_record_scenario_lists_memory_and_posts_a_summary() -> None:
    report = await run_demo(load_scenario(Path("meeting-record")), settings=load_settings({}), quiet=True)
    channel = report["text_channel"]
    replies = {m["command"]: m for m in channel if m["command"]}
    assert set(replies) == {
        "/voice join channel:#Voice",  # how the demo joins, before the scenario starts
        "/voice memory",
        "/voice transcript",
        "/voice summary",
    }, channel

    memory = replies["/voice memory"]  # only alice sees what is remembered about her
    assert memory["ephemeral"] and memory["visible_to"] == "alice" and memory["command_by"] == "alice"
    listing = memory["content"].lower()
    # "Remember that the release ships on Friday.", as the offline STT heard it.
    assert "fact · <@1001>" in listing and "on friday" in listing, memory["content"]
    assert "forget one with `/voice memory forget:<id>`" in listing

    transcript = replies["/voice transcript"]
    assert transcript["ephemeral"] and transcript["content"].startswith("Transcript of session `")
    files = {a["filename"].rsplit(".", 1)[1]: a["size"] for a in transcript["attachments"]}
    assert set(files) == {"txt", "json"} and all(size > 0 for size in files.values()), transcript

    summary = replies["/voice summary"]  # posted in the channel, for everyone
    assert not summary["ephemeral"] and summary["visible_to"] is None and summary["command_by"] == "bob"
    assert summary["author"] == "Jarvis" and summary["content"].startswith("**Summary of session `")
    assert summary["content"].split("\n", 1)[1].strip(), "the summary has no text"
    ids = [int(m["id"]) for m in channel]
    assert ids == sorted(ids)  # channel messages and ephemeral replies, in creation order

    page = render_html(report, bot_name="Jarvis")  # the page's text channel shows the same
    txt = next(a for a in transcript["attachments"] if a["filename"].endswith(".txt"))
    assert "only alice sees this" in page and f"file {txt['filename']}, {txt['size']} bytes" in page
    assert "<code>/voice summary</code> by bob" in page
