"""The engine's memory seam: recalled once per response to a user turn, given to the model as one
separate system message before the history, never recorded; a failing recall leaves the answer."""

from __future__ import annotations

from collections.abc import Sequence

from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig


class Recall:
    def __init__(self, lines: Sequence[str] = (), *, fail: bool = False) -> None:
        self.lines = list(lines)
        self.fail = fail
        self.asked: list[tuple[str | None, str]] = []

    async def recall(self, *, speaker_id: str | None, text: str) -> Sequence[str]:
        self.asked.append((speaker_id, text))
        if self.fail:
            raise RuntimeError("index gone")
        return self.lines


async def test_memory_is_a_separate_system_message_for_the_turn() -> None:
    recall = Recall(["preference: Alice prefers tea (saved by Alice)"])
    replies = [ScriptedReply.text("Tea."), ScriptedReply.text("Yes.")]
    async with Rig(replies=replies, memory=recall) as rig:
        rig.say("What do I drink?")
        await rig.until_finished("turn-1")
        rig.say("Really?")
        await rig.until_finished("turn-2")
    assert recall.asked == [("alice", "What do I drink?"), ("alice", "Really?")]
    first, second = rig.chat.requests
    assert [m.role for m in first] == ["system", "system", "user"]
    assert first[1].content.endswith("- preference: Alice prefers tea (saved by Alice)")
    assert "not something anyone just said" in first[1].content
    # The next request has the memory once, before the history, and the history has none of it.
    assert [m.role for m in second] == ["system", "system", "user", "assistant", "user"]
    assert [row["text"] for row in rig.manager.context.dump()] == [
        "What do I drink?",
        "Tea.",
        "Really?",
        "Yes.",
    ]


async def test_nothing_recalled_adds_nothing_and_a_failure_does_not_stop_the_answer() -> None:
    async with Rig(replies=[ScriptedReply.text("Hello.")], memory=Recall()) as rig:
        rig.say("Hi")
        utt = await rig.until_finished("turn-1")
    assert utt.spoken_text == "Hello." and [m.role for m in rig.chat.requests[0]] == ["system", "user"]
    async with Rig(replies=[ScriptedReply.text("Hello.")], memory=Recall(["x"], fail=True)) as rig:
        rig.say("Hi")
        utt = await rig.until_finished("turn-1")
    assert utt.spoken_text == "Hello." and [m.role for m in rig.chat.requests[0]] == ["system", "user"]
