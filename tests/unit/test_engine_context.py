"""Short-term context: speaker attribution without labels, heard-only assistant text, bounds, notes."""

from __future__ import annotations

from openab_voice.engine.context import ChannelNote, ShortTermContext, UserUtterance, message_name


def user(turn: int, text: str = "hello", *, speaker: str = "alice", name: str = "Alice") -> UserUtterance:
    return UserUtterance(turn_id=f"t{turn}", speaker_id=speaker, speaker_name=name, text=text, at=float(turn))


def test_one_speaker_is_not_labelled() -> None:
    ctx = ShortTermContext(system_prompt="be brief", max_turns=5, max_notes=5)
    ctx.record_turn(user(1, "what time is it"))
    ctx.record_heard("t1", "I cannot see a clock.")
    messages = ctx.messages(user(2, "and the date?"))
    assert [(m.role, m.content) for m in messages] == [
        ("system", "be brief"),
        ("user", "what time is it"),
        ("assistant", "I cannot see a clock."),
        ("user", "and the date?"),
    ]
    assert {m.name for m in messages if m.role == "user"} == {"Alice"}  # for APIs that take a name


def test_several_speakers_are_named_in_prose_never_as_a_label() -> None:
    ctx = ShortTermContext(system_prompt="be brief", max_turns=5, max_notes=5)
    ctx.record_turn(user(1, "what time is it", name="Zoë Q."))
    messages = ctx.messages(user(2, "and the date?", speaker="bob", name="Bob"))
    assert [(m.role, m.content) for m in messages] == [
        ("system", "be brief"),
        ("system", "You are talking with Zoë Q. and Bob."),
        ("user", "Zoë Q. says: what time is it"),
        ("user", "Bob says: and the date?"),
    ]
    assert [m.name for m in messages[2:]] == ["Zo_Q", "Bob"]
    # No message looks like a transcript line ("Bob: ..."), the shape a small model continues.
    assert not any(m.content.startswith(("Bob:", "Zoë Q.:")) for m in messages)


def test_three_speakers_are_listed_once_each() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=5)
    ctx.record_turn(user(1, name="Ana", speaker="ana"))
    ctx.record_turn(user(2, name="Bob", speaker="bob"))
    ctx.record_turn(user(3, name="Ana", speaker="ana"))
    messages = ctx.messages(user(4, name="Cy", speaker="cy"))
    assert messages[1].content == "You are talking with Ana, Bob and Cy."


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
    assert messages[-1].content == 'Bob said to the others, not to you: "lunch at noon?"'
    assert ctx.dump()[-1] == {"role": "note", "speaker": "bob", "text": "lunch at noon?"}


def test_notes_can_be_disabled() -> None:
    ctx = ShortTermContext(system_prompt="s", max_turns=5, max_notes=0)
    ctx.add_note(ChannelNote(speaker_id="bob", speaker_name="Bob", text="hi", at=0.0))
    assert not ctx.notes


def test_message_name() -> None:
    assert message_name("Ana María") == "Ana_Mar_a"
    assert message_name("🙂") is None
