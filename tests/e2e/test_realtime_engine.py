"""The realtime engine on the loopback realtime server, through the real ``openai`` client.

The scenario suite of the cascade, on the realtime engine: answer; barge-in with truncation at the
played position and only heard text committed; false interruption; the wake-name rule; a spoken
task through the function call; provider failure -> recovering -> listening; reconnect after a
dropped websocket; auth failure and an unknown model at start-up. The conversation runs in virtual
time; the server answers as fast as it can; every wait is on a condition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openab_voice.bus.events import ErrorRaised
from openab_voice.engine.events import (
    BotUtteranceFinished,
    InterruptionDetected,
    LatencyMeasured,
    ProviderTruncated,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.state import DialogueState
from openab_voice.providers.speech import ToolSpec
from openab_voice.testing.realtime import CallFunction, Faults, Speak, Turn
from openab_voice.tools.registry import ToolContext, ToolResult
from tests.fakes.realtime_rig import RealtimeRig

pytestmark = pytest.mark.timeout(60)


async def test_a_turn_is_answered_with_turn_detection_off_and_attributed() -> None:
    async with RealtimeRig(replies=["It is noon."]) as rig:
        await rig.until_ready()
        rig.say("what time is it")
        utt = await rig.until_finished("turn-1")
        assert utt.spoken_text == "It is noon." and not utt.interrupted
        update = rig.client_events("session.update")[0]
        assert update.session.audio.input.turn_detection is None
        assert rig.session().config.audio.input.turn_detection is None
        items = rig.client_events("conversation.item.create")
        assert [c.text for c in items[-1].item.content] == ["Alice says: what time is it"]
        assert len(rig.client_events("response.create")) == 1
        assert rig.context_rows() == [("user", "what time is it"), ("assistant", "It is noon.")]
        assert rig.played_ms() >= 3 * 200  # three words of tone, all played
        assert rig.states()[-2:] == ["thinking->speaking", "speaking->listening"]
