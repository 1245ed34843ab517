"""Scenarios: a line's inline pauses (the parts said around each ``<pause S>``), and the switches a
bundled scenario sets."""

from __future__ import annotations

from pathlib import Path

from openab_voice.config import load_settings
from openab_voice.demo.runner import _demo_settings
from openab_voice.demo.scenario import load_scenario, split_pauses


def test_a_pause_splits_a_line_into_the_parts_said_around_it() -> None:
    assert split_pauses("Jarvis, what is the capital of <pause 0.8> France?") == [
        ("Jarvis, what is the capital of", 0.8),
        ("France?", 0.0),
    ]
    assert split_pauses("one <pause 1> two <pause 0.25> three") == [
        ("one", 1.0),
        ("two", 0.25),
        ("three", 0.0),
    ]
    assert split_pauses("No pause here.") == [("No pause here.", 0.0)]
    assert split_pauses("<pause 2> late start") == [("late start", 0.0)]  # nothing said before it


def test_the_thinking_pause_scenario_turns_the_semantic_end_of_turn_on(tmp_path: Path) -> None:
    scenario = load_scenario(Path("thinking-pause"))
    assert scenario.end_of_turn == "semantic"
    assert any("<pause" in (item.say or "") for spec in scenario.speakers for item in spec.audio)
    assert _demo_settings(scenario, load_settings({}), tmp_path).end_of_turn == "semantic"
    default = load_scenario(Path("default"))
    assert default.end_of_turn is None
    assert _demo_settings(default, load_settings({}), tmp_path).end_of_turn == "silence"
