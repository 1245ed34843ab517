"""Scenario ``slash`` events: every command of the ``/voice`` group, its options typed by the group's
own declaration, and a structured error naming the event for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openab_voice.demo.scenario import Scenario, load_scenario
from openab_voice.demo.slash import parse_slash, voice_commands
from openab_voice.errors import EmulatorError
from openab_voice.testing.emulator import Interaction

SPEAKERS = [{"id": "1001", "name": "alice"}]


def test_every_voice_command_is_a_scenario_event() -> None:
    commands = voice_commands()
    # Read from the group the bot syncs: a command added there shows up here with no other change.
    assert set(commands) >= {
        "join", "leave", "status", "actions", "cancel", "reconcile", "transcript", "summary", "memory"
    }  # fmt: skip
    events = [{"at": float(i), "slash": f"voice {name}", "by": "1001"} for i, name in enumerate(commands)]
    scenario = Scenario.model_validate({"speakers": SPEAKERS, "events": events})
    assert [e.slash_call().subcommand for e in scenario.events] == list(commands)


def test_options_are_typed_by_the_command() -> None:
    forget = parse_slash("voice memory forget:12")
    assert (forget.subcommand, dict(forget.options), forget.missing) == ("memory", {"forget": 12}, ())
    assert dict(parse_slash("voice transcript session:s-1").options) == {"session": "s-1"}
    assert dict(parse_slash("voice summary s-1").options) == {"session": "s-1"}  # a bare word: next option
    assert dict(parse_slash("voice cancel a-1f3c9e2b").options) == {"action_id": "a-1f3c9e2b"}
    assert dict(parse_slash("voice join channel:Voice").options) == {"channel": "Voice"}
    # The action id is the one required option the runner fills in (the newest action).
    assert parse_slash("voice reconcile").missing == ("action_id",)


@pytest.mark.parametrize(
    ("slash", "says"),
    [
        ("voice dance", "no command '/voice dance'; the /voice commands are join|"),
        ("voice memory forget:x", "option 'forget' takes a whole number, got 'x'"),
        ("voice memory colour:red", "'/voice memory' has no option 'colour' (its options: forget)"),
        ("voice memory forget:1 forget:2", "option 'forget' is given twice"),
        ("voice status now", "'/voice status' takes no options; 'now' is one too many"),
        ("voice memory forget:", "option 'forget' is empty"),
        ("vc status", "slash must be 'voice <"),
    ],
)
def test_a_bad_command_is_a_structured_error_naming_the_event(tmp_path: Path, slash: str, says: str) -> None:
    path = tmp_path / "scenario.json"
    events = [{"at": 1.0, "slash": "voice status", "by": "1001"}, {"at": 2.0, "slash": slash, "by": "1001"}]
    path.write_text(json.dumps({"speakers": SPEAKERS, "events": events}))
    with pytest.raises(EmulatorError) as info:
        load_scenario(path)
    assert info.value.code == "SCENARIO_INVALID"
    assert info.value.details["field"] == "events.1.slash"
    assert says in info.value.message


def test_the_bundled_meeting_record_scenario_by_name() -> None:
    scenario = load_scenario(Path("meeting-record"))
    assert scenario.meeting_record and scenario.memory
    said = [item.say or "" for s in scenario.speakers for item in s.audio]
    assert any(line.lower().startswith("remember that") for line in said)
    assert [e.slash_call().subcommand for e in scenario.events] == ["memory", "transcript", "summary"]


def test_an_interaction_shows_its_command_as_the_client_does() -> None:
    data = {
        "name": "voice",
        "type": 1,
        "options": [{"name": "memory", "type": 1, "options": [{"name": "forget", "type": 4, "value": 12}]}],
    }
    command = Interaction(interaction_id=1, token="t", kind="command", user_id=1, channel_id=2, data=data)
    assert command.command_text == "/voice memory forget:12"
    bare = {"name": "voice", "options": [{"name": "status", "type": 1, "options": []}]}
    assert (
        Interaction(
            interaction_id=2, token="u", kind="command", user_id=1, channel_id=2, data=bare
        ).command_text
        == "/voice status"
    )
    join = {
        "name": "voice",
        "options": [{"name": "join", "type": 1, "options": [{"name": "channel", "type": 7, "value": "5"}]}],
        "resolved": {"channels": {"5": {"id": "5", "name": "Voice"}}},
    }
    joined = Interaction(interaction_id=4, token="w", kind="command", user_id=1, channel_id=2, data=join)
    assert joined.command_text == "/voice join channel:#Voice"
    click = Interaction(interaction_id=3, token="v", kind="component", user_id=1, channel_id=2, custom_id="x")
    assert click.command_text is None
