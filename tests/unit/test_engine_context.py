"""Short-term context: speaker attribution, heard-only assistant text, bounds, channel notes."""

from __future__ import annotations

from openab_voice.engine.context import ChannelNote, ShortTermContext, UserUtterance, message_name


def user(turn: int, text: str = "hello", *, speaker: str = "alice", name: str = "Alice") -> UserUtterance:
    return UserUtterance(turn_id=f"t{turn}", speaker_id=speaker, speaker_name=name, text=text, at=float(turn))


def test_messages_are_speaker_attributed() -> None:
    ctx = ShortTermContext(system_prompt="be brief", max_turns=5, max_notes=5)
    ctx.record_turn(user(1, "what time is it", name="Zoë Q."))
    messages = ctx.messages(user(2, "and the date?", speaker="bob", name="Bob"))
    assert [m.role for m in messages] == ["system", "user", "user"]
    assert messages[0].content == "be brief"
    assert messages[1].content == "Zoë Q.: what time is it" and messages[1].name == "Zo_Q"
    assert messages[2].content == "Bob: and the date?" and messages[2].name == "Bob"


def test_only_recorded_heard_text_enters() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=5)
    ctx.record_turn(user(1))
    assert not ctx.record_heard("t1", "   ")
    assert [m.role for m in ctx.messages()] == ["system", "user"]
    assert ctx.record_heard("t1", "First sentence.")
    assert ctx.record_heard("t1", "Said after a resume.")
    assert ctx.messages()[-1].content == "First sentence. Said after a resume."
    assert not ctx.record_heard("t404", "unknown turn")


def test_recording_a_turn_twice_keeps_one() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=5)
    ctx.record_turn(user(1))
    ctx.record_turn(user(1))
    assert len(ctx.exchanges) == 1


def test_bounded_turns_and_notes() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=2, max_notes=1)
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="old note", at=0.0))
    for i in range(1, 4):
        ctx.record_turn(user(i, f"q{i}"))
        ctx.record_heard(f"t{i}", f"a{i}")
    assert [e.user.text for e in ctx.exchanges] == ["q2", "q3"]
    assert not ctx.notes  # older than the oldest kept turn
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="n1", at=4.0))
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="n2", at=5.0))
    assert [n.text for n in ctx.notes] == ["n2"]


def test_notes_are_system_context_in_order() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=5)
    ctx.record_turn(user(1, "q1"))
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="lunch at noon?", at=2.0))
    messages = ctx.messages()
    assert messages[-1].role == "system"
    assert messages[-1].content == "Channel note, not addressed to you. Bob: lunch at noon?"
    assert ctx.dump()[-1] == {"role": "note", "speaker": "bob", "text": "lunch at noon?"}


def test_notes_can_be_disabled() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=0)
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="hi", at=0.0))
    assert not ctx.notes


def test_message_name() -> None:
    assert message_name("Ana María") == "Ana_Mar_a"
    assert message_name("🙂") is None
