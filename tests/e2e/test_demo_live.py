"""``openab-voice demo --engine live``: the demo's bot answers through the live engine (GPT-Live) on the
loopback GPT-Live server (local Whisper hears the turn, the offline chat model answers, Piper speaks),
all offline, and the spoken task goes through delegation and the action plane (pinned, confirmed by click)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openab_voice.config import load_settings
from openab_voice.demo.runner import run_demo
from openab_voice.demo.scenario import load_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


async def test_the_demo_answers_through_the_live_engine(tmp_path: Path) -> None:
    # The first answer waits for the server's models to load (Whisper, the chat model, Piper):
    # seconds on two busy cores, so the next line comes late enough not to cut it.
    scenario = {
        "dave": True,
        "until": 40.0,
        "greeting": False,
        "dialogue": True,
        "bot_name": "Jarvis",
        "operator": "1001",
        "speakers": [
            {
                "id": "1001",
                "name": "alice",
                "audio": [
                    {"at": 1.0, "say": "Jarvis, what is the capital of France?"},
                    {"at": 22.0, "say": "Jarvis, start a task: add a short readme file to the workspace."},
                ],
            }
        ],
        "events": [{"at": 32.0, "click": "confirm", "by": "1001"}],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    settings = load_settings({"OPENAB_ENGINE": "live"})
    report = await run_demo(load_scenario(path), settings=settings, quiet=True)
    states = {s["state"] for s in report["states"]}
    assert {"listening", "thinking", "speaking"} <= states
    answers = [u for u in report["bot_utterances"] if u["turn_id"] and u["spoken_text"].strip()]
    assert answers, report["bot_utterances"]  # the live model's speech, heard and committed
    assert any("capital of france" in t["text"].lower() for t in report["transcripts"])
    [action] = report["actions"]
    assert action["proposed_by"] == "1001" and action["status"] in ("running", "succeeded")
    [proposal] = [
        m for m in report["text_channel"] if action["id"] in m["content"] and "proposal" in m["content"]
    ]
    assert proposal["pinned"] and "Confirmed by" in proposal["content"]  # by the click, not by voice
