"""Scenario voice events: the schema, and the demo scenario accepting them beside clicks and commands."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openab_voice.demo.scenario import EventItem, Scenario
from openab_voice.testing.emulator import VOICE_ACTIONS, VoiceEvent


def test_voice_event_fields_fit_the_action() -> None:
    assert VoiceEvent(at=9.0, voice="close").close_code == 4015
    assert VoiceEvent(at=9.0, voice="close", code=4006).close_code == 4006
    assert VoiceEvent(at=1.0, voice="blackout", seconds=2.0).seconds == 2.0
    for bad in (
        {"at": 1.0, "voice": "blackout"},  # no seconds
        {"at": 1.0, "voice": "move", "seconds": 1.0},
        {"at": 1.0, "voice": "move", "code": 4015},
        {"at": 1.0, "voice": "close", "code": 1000},
        {"at": -1.0, "voice": "move"},
        {"at": 1.0, "voice": "reboot"},
        {"at": 1.0, "voice": "move", "extra": True},
    ):
        with pytest.raises(ValidationError):
            VoiceEvent.model_validate(bad)


def test_scenario_events_take_voice_events() -> None:
    scenario = Scenario.model_validate(
        {
            "speakers": [{"id": "1001", "name": "alice"}],
            "events": [
                {"at": 9.0, "voice": "close", "code": 4015},
                {"at": 10.0, "voice": "blackout", "seconds": 1.5},
                {"at": 11.0, "slash": "voice status", "by": "1001"},
            ],
        }
    )
    voice = [e.voice_event() for e in scenario.events if e.voice is not None]
    assert [(v.voice, v.close_code, v.seconds) for v in voice] == [
        ("close", 4015, None),
        ("blackout", 4015, 1.5),
    ]
    assert {e.voice for e in scenario.events} == {"close", "blackout", None}
    assert set(VOICE_ACTIONS) >= {
        "close",
        "move",
        "blackout",
        "dave_invalid_commit",
        "dave_downgrade",
        "dave_upgrade",
    }
    for bad in (
        {"at": 1.0, "voice": "close", "by": "1001"},  # voice events have no author
        {"at": 1.0, "slash": "voice status"},  # commands need one
        {"at": 1.0, "voice": "close", "slash": "voice status"},
        {"at": 1.0, "click": "confirm", "by": "1001", "code": 4015},
        {"at": 1.0, "voice": "blackout"},
    ):
        with pytest.raises(ValidationError):
            EventItem.model_validate(bad)


async def test_the_demo_runner_hands_voice_events_to_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    from openab_voice.demo import runner

    applied: list[VoiceEvent] = []
    waited: list[float] = []

    class Emulator:
        async def apply_voice_event(self, event: VoiceEvent) -> str:
            applied.append(event)
            return "voice websocket closed with 4015"

    class Harness:
        emulator = Emulator()

        async def at(self, seconds: float) -> None:
            waited.append(seconds)

    item = EventItem.model_validate({"at": 9.0, "voice": "close", "code": 4015})
    await runner._event_script(Harness(), item)  # type: ignore[arg-type]
    assert waited == [9.0] and applied == [VoiceEvent(at=9.0, voice="close", code=4015)]
    assert "9.0s: voice websocket closed with 4015" in capsys.readouterr().out
