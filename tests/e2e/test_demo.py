"""``openab-voice demo``: scenario file -> emulator + bot -> report and recordings."""

from __future__ import annotations

import json
import re
import shutil
import wave
from importlib import resources
from pathlib import Path

import pytest

from openab_voice.cli import main
from openab_voice.config import load_settings
from openab_voice.demo.runner import run_demo
from openab_voice.demo.scenario import load_scenario
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

pytestmark = pytest.mark.e2e

ASSETS = Path(str(resources.files("openab_voice.testing") / "assets"))


def write_scenario(folder: Path, **overrides: object) -> Path:
    (folder / "clips").mkdir()
    shutil.copy(ASSETS / "alice.wav", folder / "clips" / "a.wav")
    scenario = {
        "dave": True,
        "loss": 0.0,
        "until": 4.2,
        "dialogue": False,
        "speakers": [{"id": "1001", "name": "alice", "audio": [{"at": 0.3, "file": "clips/a.wav"}]}],
        **overrides,
    }
    path = folder / "scenario.json"
    path.write_text(json.dumps(scenario))
    return path


async def test_demo_report_and_recordings(tmp_path: Path) -> None:
    scenario = load_scenario(write_scenario(tmp_path))  # relative paths resolve against the scenario's folder
    report = await run_demo(scenario, settings=load_settings({}), record_dir=tmp_path / "rec", quiet=True)
    alice = report["speakers"]["1001"]
    assert alice["name"] == "alice"
    assert alice["packets"] >= 150 and alice["decoded_ms"] >= 3000
    assert isinstance(alice["lost"], int) and isinstance(alice["concealed"], int)
    assert alice["dropped"] == {}
    assert report["dave"]["enabled"] is True and report["dave"]["privacy_code"]
    assert 1700 <= report["bot_audio_ms"] <= 1900  # the 1.8 s greeting, decoded by the emulator
    with wave.open(str(tmp_path / "rec" / "1001.wav")) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (48_000, 2, 2)
        assert w.getnframes() >= 48_000 * 3


async def test_bundled_scenario_holds_a_conversation(tmp_path: Path) -> None:
    report = await run_demo(load_scenario(None), settings=load_settings({}), quiet=True)
    assert set(report) >= {
        "speakers",
        "dave",
        "bot_audio_ms",
        "transcripts",
        "bot_utterances",
        "states",
        "metrics",
    }
    assert len(report["transcripts"]) >= 2
    assert all(
        t["speaker"] in {"1001", "1002"} and t["text"] and t["end"] > t["start"]
        for t in report["transcripts"]
    )
    assert any("capital of france" in t["text"].lower() for t in report["transcripts"])
    assert report["bot_utterances"], "the bot never answered"
    states = [s["state"] for s in report["states"]]
    assert {"listening", "thinking", "speaking"} <= set(states)
    assert report["metrics"]["first_stable_partial_ms"] and report["metrics"]["eou_to_first_audio_ms"]
    assert report["bot_audio_ms"] > 3000  # greeting plus at least one spoken answer
    # The spoken task: proposed by alice (the operator), pinned, confirmed by her click, run by the
    # scripted ACP agent, the result posted as text and only the status spoken.
    [action] = report["actions"]
    assert action["status"] == "succeeded" and action["proposed_by"] == "1001"
    assert "workspace" in action["goal"].lower() and action["effect_ceiling"] == "workspace_write"
    assert [d["option_kind"] for d in action["permission_decisions"]] == ["allow_once"]
    channel = report["text_channel"]
    [proposal] = [m for m in channel if action["id"] in m["content"] and "proposal" in m["content"]]
    assert proposal["pinned"] and proposal["components"] == [] and "Confirmed by" in proposal["content"]
    assert any(f"Action `{action['id']}` succeeded" in m["content"] for m in channel)
    spoken = [u["spoken_text"] for u in report["bot_utterances"]]
    assert "The task is done. The result is in the text channel." in spoken
    # What a newcomer should see: at least one answer heard whole, a barge-in, a remark to someone
    # else left alone (two people present, no wake name), no label echoed, nothing stale said.
    answers = [u for u in report["bot_utterances"] if u["turn_id"] and "task" not in u["spoken_text"].lower()]
    heard_whole = [u for u in answers if not u["interrupted"] and len(u["spoken_text"].split()) >= 3]
    assert heard_whole, report["bot_utterances"]
    assert report["interruptions"], "nobody talked over the bot"
    ignored = [t for t in report["turns"] if t["speaker"] == "1002" and not t["accepted"]]
    assert any("meeting" in t["text"].lower() for t in ignored), report["turns"]
    for text in spoken:
        assert not re.match(r"^\s*\w+\s*:", text), text  # no "bob:" / "Jarvis:" label said
    done = spoken.index("The task is done. The result is in the text channel.")
    assert not any("waiting for confirmation" in text for text in spoken[done:])


def test_bad_scenarios_are_structured_errors(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, loss=0.9)
    with pytest.raises(EmulatorError) as info:
        load_scenario(path)
    assert info.value.code == "SCENARIO_INVALID" and "loss" in info.value.message
    path.write_text(json.dumps({"speakers": [{"id": "x1", "name": "a"}]}))
    with pytest.raises(EmulatorError, match=r"speakers\.0\.id"):
        load_scenario(path)
    path.write_text(
        json.dumps({"speakers": [{"id": "1", "name": "a", "audio": [{"at": 0, "file": "nope.wav"}]}]})
    )
    with pytest.raises(EmulatorError) as info:
        load_scenario(path)
    assert info.value.code == "SCENARIO_FILE_MISSING"
    assert main(["demo", "--scenario", str(tmp_path / "missing.json")]) == 1
    speakers = [{"id": "1", "name": "a"}]
    for bad, where in (
        ({"speakers": speakers, "events": [{"at": 1, "click": "confirm", "by": "1"}]}, "operator"),
        ({"speakers": speakers, "operator": "2"}, "operator"),
        ({"speakers": speakers, "events": [{"at": 1, "slash": "voice dance", "by": "1"}]}, "slash"),
        ({"speakers": speakers, "operator": "1", "events": [{"at": 1, "click": "confirm", "by": "9"}]}, "by"),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(EmulatorError, match=where):
            load_scenario(path)


def test_bundled_default_scenario_is_valid() -> None:
    scenario = load_scenario(None)
    assert scenario.dave and len(scenario.speakers) >= 2
    assert any(item.send_before_speaking for s in scenario.speakers for item in s.audio)


async def test_join_is_receive_only_by_default_and_leave_works() -> None:
    async with BotOnEmulator(load_settings({}), EmulatorConfig(dave=False), users={1001: "alice"}) as h:
        assert h.join_reply is not None and "listening only" in h.join_reply and "DAVE off" in h.join_reply
        assert h.session.playback is None
        status = await h.command("status")
        assert "DAVE off" in status and "playback off" in status and "APM webrtc" in status
        assert await h.command("leave") == "Left the voice channel."
        assert h.bot.voice.get(h.emulator.guild_id) is None
        assert await h.command("status") == "I am not in a voice channel."
        assert await h.command("leave") == "I am not in a voice channel."
