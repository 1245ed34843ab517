import asyncio
import threading

from openab_voice.bus import EventBus, sanitize
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.discord.wire.events import SpeakerLeft, SpeakerMapped


def test_subscribe_by_type_and_base() -> None:
    bus = EventBus()
    mapped: list[Event] = []
    everything: list[Event] = []
    bus.subscribe(SpeakerMapped, mapped.append)
    sub = bus.subscribe(Event, everything.append)
    bus.publish(SpeakerMapped(at=1.0, speaker_id="1", ssrc=5, buffered=0))
    bus.publish(SpeakerLeft(at=2.0, speaker_id="1", ssrc=5))
    assert [type(e) for e in mapped] == [SpeakerMapped]
    assert [type(e) for e in everything] == [SpeakerMapped, SpeakerLeft]
    sub.close()
    bus.publish(SpeakerLeft(at=3.0, speaker_id="1", ssrc=5))
    assert len(everything) == 2


def test_failing_handler_does_not_break_publisher() -> None:
    bus = EventBus()
    seen: list[Event] = []

    def boom(_: Event) -> None:
        raise RuntimeError("handler bug")

    bus.subscribe(Event, boom)
    bus.subscribe(Event, seen.append)
    bus.publish(SpeakerLeft(at=1.0, speaker_id="1", ssrc=None))
    assert len(seen) == 1


async def test_stream_is_bounded_and_threadsafe_publish_arrives() -> None:
    bus = EventBus()
    bus.bind_loop(asyncio.get_running_loop())
    stream = bus.stream(SpeakerLeft, maxsize=3)
    for i in range(5):
        bus.publish(SpeakerLeft(at=float(i), speaker_id=str(i), ssrc=None))
    assert stream.dropped == 2
    got = [await anext(stream) for _ in range(3)]
    assert [e.speaker_id for e in got] == ["2", "3", "4"]
    t = threading.Thread(
        target=bus.publish_threadsafe, args=(SpeakerLeft(at=9.0, speaker_id="t", ssrc=None),)
    )
    t.start()
    t.join()
    event = await asyncio.wait_for(anext(stream), 1.0)
    assert event.speaker_id == "t"
    stream.close()


def test_sanitize_redacts_and_truncates() -> None:
    data = sanitize(
        {"api_key": "sk-1", "nested": {"Authorization": "Bot x"}, "pcm": b"\x00" * 10, "text": "a" * 900}
    )
    assert data["api_key"] == "[redacted]"
    assert data["nested"]["Authorization"] == "[redacted]"
    assert data["pcm"] == "<10 bytes>"
    assert len(data["text"]) <= 501
    ev = ErrorRaised(at=0.0, code="X", message="m", retryable=False, details={"token": "abc"})
    assert ev.details == {"token": "[redacted]"}


def test_terminal_lines_for_the_action_plane() -> None:
    from openab_voice.actions.events import ActionChanged, ActionResultPosted, PermissionDecided
    from openab_voice.report.terminal import describe

    changed = ActionChanged(
        at=1.0,
        action_id="a-1",
        status="confirmed",
        previous="delivered",
        actor="1001",
        reason="operator confirmed",
    )
    assert describe(changed) == "action a-1: delivered -> confirmed (1001: operator confirmed)"
    decided = PermissionDecided(
        at=1.0,
        action_id="a-1",
        decision={"kind": "edit", "title": "Write RESULT.md", "option_kind": "allow_once"},
    )
    assert describe(decided) == "action a-1: permission edit (Write RESULT.md) -> allow_once"
    lost = ActionResultPosted(
        at=1.0, action_id="a-1", execution="outcome_unknown", delivered=False, messages=0
    )
    assert describe(lost) == "action a-1: outcome_unknown, result NOT delivered"


def test_terminal_lines_say_where_a_cut_utterance_was_cut() -> None:
    from openab_voice.engine.events import BotUtteranceFinished
    from openab_voice.report.terminal import describe

    def said(text: str, spoken: str, *, interrupted: bool) -> str | None:
        return describe(
            BotUtteranceFinished(at=1.0, turn_id="t", text=text, spoken_text=spoken, interrupted=interrupted)
        )

    assert said("Paris.", "Paris.", interrupted=False) == "bot said: 'Paris.'"
    story = (
        "The story is about a robot. It lived in a lighthouse by the sea and counted the ships every night."
    )
    assert said(story, "The story is about a robot.", interrupted=True) == (
        "bot said: 'The story is about a robot.' [interrupted; not heard to the end: "
        "'It lived in a lighthouse by the sea and counted the ships ...']"
    )
    assert said(story, "", interrupted=True) == (
        "bot said: '' [interrupted; not heard to the end: "
        "'The story is about a robot. It lived in a lighthouse by the ...']"
    )
    assert said("Paris.", "Paris.", interrupted=True) == "bot said: 'Paris.' [interrupted]"
