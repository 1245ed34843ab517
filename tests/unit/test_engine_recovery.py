"""Every recoverable error the spec lists goes ``recovering`` -> ``listening``, and the next turn is
answered (spec-full-duplex-agent, "Recoverable error occurs"). On fakes, in virtual time.

| spec's kind | how it reaches the machine                      | tested in                                           |
|-------------|-------------------------------------------------|-----------------------------------------------------|
| provider    | ``ProviderLost`` (realtime session dropped)     | here (machine); test_engine_duplex.py (engine)      |
| memory      | ``ResponseFailed(MEMORY_RECALL_FAILED)``, then  | here: test_memory_recall_failure_*                  |
|             | the turn answered again without memory          |                                                     |
| tool        | ``ResponseFailed`` (the tool path raised)       | here: test_tool_path_failure_*                      |
| STT         | ``ProviderFailed(kind="stt")`` (the desk hands  | here: test_stt_failure_*                            |
|             | on the transcriber's ``ErrorRaised``)           |                                                     |
| TTS         | ``ResponseFailed(TTS_FAILED)``                  | here; test_engine_interrupts.py (tts_failure)       |
| LLM         | ``ResponseFailed(LLM_FAILED)``                  | here; test_engine_interrupts.py (chat_failure)      |
| playback    | ``ResponseFailed(VOICE_PLAYBACK_UNAVAILABLE)``  | here (machine); test_engine_interrupts.py (playback)|
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.engine.state import (
    DialogueInput,
    DialogueState,
    ProviderFailed,
    ProviderLost,
    Recover,
    Recovered,
    ResponseFailed,
    Snapshot,
    transition,
)
from openab_voice.providers.chat import ToolCall
from openab_voice.stt.events import TranscriptDiscarded
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import SESSION, Rig
from openab_voice.tools import default_tools
from openab_voice.tools.registry import ToolRegistry

L, R = DialogueState.LISTENING, DialogueState.RECOVERING


def _failed(code: str) -> ResponseFailed:
    return ResponseFailed(response_id="t1", code=code, message="boom")


# --- the pure machine, one row per kind -------------------------------------------------------------

KINDS: dict[str, tuple[DialogueState, DialogueInput]] = {
    "provider": (DialogueState.SPEAKING, ProviderLost(code="REALTIME_CONNECTION_LOST", message="ws")),
    "memory": (DialogueState.THINKING, _failed("MEMORY_RECALL_FAILED")),
    "tool": (DialogueState.TOOL_RUNNING, _failed("TOOLS_FAILED")),
    "stt": (L, ProviderFailed(kind="stt", code="STT_DECODE_FAILED", message="boom")),
    "tts": (DialogueState.SPEAKING, _failed("TTS_FAILED")),
    "llm": (DialogueState.THINKING, _failed("LLM_FAILED")),
    "playback": (DialogueState.SPEAKING, _failed("VOICE_PLAYBACK_UNAVAILABLE")),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_recoverable_kind_goes_through_recovering_to_listening(kind: str) -> None:
    state, failure = KINDS[kind]
    busy = state is not L
    snap = Snapshot(state=state, turn_id="t1" if busy else None, response_id="t1" if busy else None)
    snap, effects = transition(snap, failure)
    assert snap.state is R and len(effects) == 1
    snap, effects = transition(snap, Recovered())
    assert snap.state is L and effects == ()


def test_an_stt_failure_asks_for_cleanup_and_leaves_a_running_response_alone() -> None:
    stt = KINDS["stt"][1]
    assert transition(Snapshot(state=L), stt) == (
        Snapshot(state=R),
        (Recover(kind="stt", code="STT_DECODE_FAILED"),),
    )
    speaking = Snapshot(state=DialogueState.SPEAKING, turn_id="t1", response_id="t1")
    for snap in (speaking, Snapshot(), Snapshot(state=R)):
        assert transition(snap, stt) == (snap, ())


# --- the conversation, per kind: the sequence, then the next turn answered --------------------------


def _ends_recovering(states: list[str], before: str) -> bool:
    return any(
        states[i : i + 2] == [f"{before}->recovering", "recovering->listening"] for i in range(len(states))
    )


async def _next_turn_answered(rig: Rig, turn_id: str, text: str) -> None:
    rig.say("And now?")
    utt = await rig.until_finished(turn_id)
    assert utt.spoken_text == text and not utt.interrupted


async def test_stt_failure_goes_recovering_then_listening_and_the_next_turn_is_answered() -> None:
    async with Rig(replies=[ScriptedReply.text("Still here.")]) as rig:
        # As the transcriber reports a failed final decode: the error, then the utterance's discard.
        rig.hear(
            ErrorRaised(
                at=rig.now(),
                stage="stt",
                session_id=SESSION,
                code="STT_DECODE_FAILED",
                message="RuntimeError: model crashed",
                retryable=True,
            )
        )
        rig.hear(
            TranscriptDiscarded(
                at=rig.now(), session_id=SESSION, speaker_id="alice", utterance_id="u0", reason="stt_error"
            )
        )
        await rig.until(lambda: len(rig.states()) >= 3)
        assert rig.states() == ["idle->listening", "listening->recovering", "recovering->listening"]
        await _next_turn_answered(rig, "turn-1", "Still here.")


class FailingOnce:
    def __init__(self) -> None:
        self.asked = 0

    async def recall(self, *, speaker_id: str | None, text: str) -> Sequence[str]:
        self.asked += 1
        if self.asked == 1:
            raise RuntimeError("index gone")
        return ["preference: Alice prefers tea"]


async def test_memory_recall_failure_goes_recovering_then_listening_and_the_next_turn_is_answered() -> None:
    memory = FailingOnce()
    replies = [ScriptedReply.text("Hello."), ScriptedReply.text("Tea.")]
    async with Rig(replies=replies, memory=memory) as rig:
        rig.say("Hi")
        utt = await rig.until_finished("turn-1")
        assert rig.states()[:4] == [
            "idle->listening",
            "listening->thinking",
            "thinking->recovering",
            "recovering->listening",
        ]
        assert [e.code for e in rig.events.of(ErrorRaised)] == ["MEMORY_RECALL_FAILED"]
        # The turn is then answered without memory, rather than not at all.
        assert utt.spoken_text == "Hello." and [m.role for m in rig.chat.requests[0]] == ["system", "user"]
        await _next_turn_answered(rig, "turn-2", "Tea.")
    assert memory.asked == 2  # the retry does not ask again; the next turn does
    assert [m.role for m in rig.chat.requests[1]][:2] == ["system", "system"]  # memory back


class RaisingTools(ToolRegistry):
    async def call(self, call: ToolCall, context: Any = None) -> Any:
        raise RuntimeError("tool host gone")


def raising_tools(clock: Clock) -> Any:
    tools = RaisingTools(clock)
    for spec in default_tools(clock).specs():
        tools.register(spec, lambda *_a, **_k: None)
    return tools


async def test_tool_path_failure_goes_recovering_then_listening_and_the_next_turn_is_answered() -> None:
    call = ToolCall(id="c1", name="clock_now", arguments="{}")
    replies = [ScriptedReply.tool(call), ScriptedReply.text("Fine.")]
    async with Rig(replies=replies, tools=raising_tools) as rig:
        rig.say("What time is it?")
        await rig.until(lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is L)
        assert _ends_recovering(rig.states(), "tool_running")
        assert rig.events.of(ErrorRaised)[0].code == "TOOLS_FAILED"
        await _next_turn_answered(rig, "turn-2", "Fine.")


async def test_llm_failure_goes_recovering_then_listening_and_the_next_turn_is_answered() -> None:
    async with Rig(replies=[ScriptedReply.failing(after=1), ScriptedReply.text("Back.")]) as rig:
        rig.say("Hi")
        await rig.until(lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is L)
        assert _ends_recovering(rig.states(), "thinking") or _ends_recovering(rig.states(), "speaking")
        await _next_turn_answered(rig, "turn-2", "Back.")


async def test_tts_failure_goes_recovering_then_listening_and_the_next_turn_is_answered() -> None:
    replies = [ScriptedReply.text("Say broken."), ScriptedReply.text("Fine.")]
    async with Rig(replies=replies, tts={"fail_on": "broken"}) as rig:
        rig.say("Hi")
        await rig.until(lambda: rig.events.of(ErrorRaised) != [] and rig.manager.state is L)
        assert _ends_recovering(rig.states(), "thinking") or _ends_recovering(rig.states(), "speaking")
        assert rig.events.of(ErrorRaised)[0].code == "TTS_FAILED"
        await _next_turn_answered(rig, "turn-2", "Fine.")
