"""The meeting record below the commands: the transcript rows (SQLite and PostgreSQL), the recorder's
times, filters and failures, retention, and the bounded summary request.

The recorder is a bus observer (it acts on nothing), so these tests publish finals on the bus, as the
transcriber does for observers; other sessions' finals there are filtered out by ``session_id``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest

from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.host.commands import split_message
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.errors import StoreError
from openab_voice.memory.meeting import MeetingRecords, Refusal, Summary, render_text
from openab_voice.memory.recorder import RecorderPlace, TranscriptRecorder
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolSpec,
)
from openab_voice.store.database import open_engine, upgrade
from openab_voice.store.transcripts import LineKind, NewLine, TranscriptStore
from openab_voice.stt.events import TranscriptFinal

GUILD = 1_234_567_890_123_456_789
DAY = 86_400.0


@pytest.fixture
def store(db_url: str) -> Iterator[TranscriptStore]:
    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        yield TranscriptStore(engine)
    finally:
        engine.dispose()


def line(text: str, start: float, *, speaker: str = "1001", kind: LineKind = LineKind.SPEECH) -> NewLine:
    return NewLine(
        kind=kind,
        speaker_id=speaker,
        speaker_name=f"user{speaker}",
        text=text,
        started_at=start,
        ended_at=start + 1,
    )


def test_sessions_lines_audience_and_retention(store: TranscriptStore) -> None:
    store.open_session("s-old", guild_id=GUILD, channel_id=2, channel_name="general", started_at=1000.0)
    store.open_session(
        "s-new", guild_id=GUILD, channel_id=2, channel_name="general", started_at=1000.0 + 40 * DAY
    )
    store.open_session(
        "s-new", guild_id=GUILD, channel_id=9, channel_name="again", started_at=0.0
    )  # idempotent
    store.open_session("s-other", guild_id=7, channel_id=3, channel_name="x", started_at=2000.0 + 40 * DAY)
    store.add("s-old", [line("old words", 1001.0)], audience=[1001])
    store.add("s-new", [line("second", 20.0), line("first", 10.0, speaker="1002")], audience=[1001, 1002])
    store.add("s-new", [line("heard", 15.0, speaker="99", kind=LineKind.BOT)], audience=[1002, 1003])
    with pytest.raises(KeyError):
        store.add("missing", [line("x", 1.0)])
    new = store.session("s-new")
    assert new is not None and (new.channel_id, new.channel_name) == (2, "general")
    assert new.audience == {1001, 1002, 1003}
    assert [(li.text, li.kind) for li in store.lines("s-new")] == [
        ("first", LineKind.SPEECH),
        ("heard", LineKind.BOT),
        ("second", LineKind.SPEECH),
    ]
    assert [li.text for li in store.lines("s-new", limit=1)] == ["first"]
    latest = store.latest(GUILD)
    assert latest is not None and latest.id == "s-new"
    store.close_session("s-new", ended_at=5.0)
    store.close_session("s-new", ended_at=9.0)  # the first end stays
    assert (store.session("s-new") or new).ended_at == 5.0
    assert store.purge(started_before=1000.0 + 30 * DAY) == 1
    assert store.session("s-old") is None and store.lines("s-old") == []
    assert store.lines("s-new") != [] and store.latest(7) is not None


def place(members: list[int]) -> RecorderPlace:
    return RecorderPlace(
        guild_id=GUILD,
        channel_id=2,
        channel_name="general",
        bot_id="99",
        bot_name=lambda: "Jarvis",
        audience=lambda: list(members),
        name_of=lambda uid: {"1001": "Alice"}.get(uid, uid),
    )


def final(
    clock: FakeClock,
    text: str,
    *,
    session: str = "s1",
    utterance: str = "u1",
    audio: tuple[float, float] | None = None,
    partials: int = 1,
) -> TranscriptFinal:
    """Alice's (``1001``) final transcript, heard over ``audio`` (default: the last second)."""
    now = clock.monotonic()
    start, end = audio if audio is not None else (now - 1, now)
    return TranscriptFinal(
        at=now,
        session_id=session,
        speaker_id="1001",
        utterance_id=utterance,
        text=text,
        audio_start=start,
        audio_end=end,
        partials=partials,
    )


def bot_said(
    clock: FakeClock, turn: str, text: str, *, spoken_text: str, interrupted: bool
) -> BotUtteranceFinished:
    """The bot's utterance in ``s1`` ended, ``spoken_text`` of ``text`` heard."""
    return BotUtteranceFinished(
        at=clock.monotonic(),
        session_id="s1",
        turn_id=turn,
        text=text,
        spoken_text=spoken_text,
        interrupted=interrupted,
    )


async def test_the_recorder_stores_wall_times_and_heard_speech_only(store: TranscriptStore) -> None:
    clock, bus = FakeClock(start=1000.0, wall_start=1_700_000_000.0), EventBus()
    store.open_session(
        "s-stale", guild_id=GUILD, channel_id=2, channel_name="g", started_at=clock.wall() - 31 * DAY
    )
    members = [1001]
    recorder = TranscriptRecorder(
        store, bus=bus, clock=clock, session_id="s1", place=place(members), retention_s=30 * DAY
    )
    await recorder.start()
    assert store.session("s-stale") is None  # retention applied when a session starts
    clock.advance(10.0)  # monotonic 1010, wall 1_700_000_010
    bus.publish(final(clock, " Hello there ", audio=(1004.0, 1009.5), partials=2))
    bus.publish(
        final(clock, "other session", session="s2", utterance="u2", audio=(1004.0, 1009.5), partials=2)
    )
    members.append(1002)
    bus.publish(bot_said(clock, "t1", "Hi! More.", spoken_text="", interrupted=True))
    bus.publish(bot_said(clock, "t2", "Hi! More.", spoken_text="Hi!", interrupted=True))
    await recorder.flush()
    stored = store.lines("s1")
    assert [(li.speaker_name, li.text, li.started_at, li.ended_at) for li in stored] == [
        ("Alice", "Hello there", 1_700_000_004.0, 1_700_000_009.5),
        ("Jarvis", "Hi!", 1_700_000_010.0, 1_700_000_010.0),
    ]
    assert (store.session("s1") or pytest.fail()).audience == {1001, 1002}
    clock.advance(5.0)
    await recorder.aclose()
    await recorder.aclose()  # idempotent
    assert (store.session("s1") or pytest.fail()).ended_at == 1_700_000_015.0
    bus.publish(bot_said(clock, "t3", "x", spoken_text="late", interrupted=False))
    assert [li.text for li in store.lines("s1")] == ["Hello there", "Hi!"]  # no longer listening
    assert recorder.written == 2 and recorder.write_failures == 0


class FlakyStore(TranscriptStore):
    def __init__(self, inner: TranscriptStore) -> None:
        self._inner = inner
        self.fail = True

    def open_session(self, session_id: str, **kwargs: object) -> None:  # type: ignore[override]
        self._inner.open_session(session_id, **kwargs)  # type: ignore[arg-type]

    def add(self, session_id: str, lines: Sequence[NewLine], **kwargs: object) -> None:  # type: ignore[override]
        if self.fail:
            self.fail = False
            raise StoreError("database is locked", code="STORE_UNAVAILABLE")
        self._inner.add(session_id, lines, **kwargs)  # type: ignore[arg-type]

    def close_session(self, session_id: str, *, ended_at: float) -> None:
        self._inner.close_session(session_id, ended_at=ended_at)


async def test_a_failed_write_is_counted_and_recording_goes_on(store: TranscriptStore) -> None:
    clock, bus = FakeClock(), EventBus()
    recorder = TranscriptRecorder(
        FlakyStore(store), bus=bus, clock=clock, session_id="s1", place=place([1001])
    )
    await recorder.start()
    for n, text in enumerate(["lost", "kept"]):
        bus.publish(final(clock, text, utterance=f"u{n}"))
        await recorder.flush()
    await recorder.aclose()
    assert [li.text for li in store.lines("s1")] == ["kept"]
    assert (recorder.written, recorder.write_failures) == (1, 1)


class GatedStore(FlakyStore):
    """Opens a session only once ``release`` is set (on the recorder's worker thread)."""

    def __init__(self, inner: TranscriptStore) -> None:
        super().__init__(inner)
        self.fail = False
        self.entered, self.release = threading.Event(), threading.Event()

    def open_session(self, session_id: str, **kwargs: object) -> None:  # type: ignore[override]
        self.entered.set()
        self.release.wait()
        super().open_session(session_id, **kwargs)


async def test_a_close_while_the_record_opens_wins(store: TranscriptStore) -> None:
    clock, bus = FakeClock(), EventBus()
    gated = GatedStore(store)
    recorder = TranscriptRecorder(gated, bus=bus, clock=clock, session_id="s1", place=place([1001]))
    starting = asyncio.create_task(recorder.start())
    assert await asyncio.to_thread(gated.entered.wait, 10.0)
    await recorder.aclose()
    gated.release.set()
    await starting
    bus.publish(final(clock, "too late"))
    await recorder.flush()
    await recorder.start()  # closed: nothing opens again
    assert store.lines("s1") == [] and recorder.written == 0
    assert (store.session("s1") or pytest.fail()).ended_at == clock.wall()


class EchoModel:
    capabilities = ChatCapabilities(name="echo", streaming=True, tools=False, model="echo")

    def __init__(self) -> None:
        self.requests: list[tuple[list[ChatMessage], Sequence[ToolSpec]]] = []

    def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        self.requests.append((list(messages), tools))
        return self._run()

    async def _run(self) -> AsyncIterator[ChatEvent]:
        await asyncio.sleep(0)
        yield TextDelta(text=" A short summary. ")
        yield ChatDone(finish_reason="stop")

    async def aclose(self) -> None:
        return None


async def test_the_summary_sees_the_transcripts_end_in_whole_lines(store: TranscriptStore) -> None:
    store.open_session("s1", guild_id=GUILD, channel_id=2, channel_name="general", started_at=0.0)
    store.add(
        "s1", [line(f"sentence number {n:03d} of the meeting", float(n)) for n in range(100)], audience=[1001]
    )
    model = EchoModel()
    records = MeetingRecords(store, chat=model, summary_chars=500)
    session = await records.resolve(guild_id=GUILD, user_id=1001)
    assert not isinstance(session, Refusal)
    summary = await records.summarize(session)
    assert isinstance(summary, Summary) and summary.text == "A short summary." and summary.truncated
    ((messages, tools),) = model.requests
    assert tools == ()
    body = messages[1].content.split("\n", 1)[1]
    assert (
        len(body) <= 500
        and body.startswith("[00:01:32] user1001: sentence number 092")
        and body.endswith("sentence number 099 of the meeting")
    )
    assert "number 000" not in body
    # A guild's caller outside the audience, another guild, no chat model, nothing said.
    assert await records.resolve(guild_id=GUILD, user_id=5) == Refusal(
        "Only people who were in that voice session can read its transcript."
    )
    assert isinstance(
        await records.resolve(guild_id=GUILD, user_id=5, live_id="s1", live_audience=[5]), type(session)
    )
    assert await records.resolve(guild_id=7, user_id=1001, session_id="s1") == Refusal(
        "No stored transcript for session s1 in this server."
    )
    assert isinstance(await MeetingRecords(store).summarize(session), Refusal)
    store.open_session("s2", guild_id=GUILD, channel_id=2, channel_name="general", started_at=1.0)
    store.add("s2", [], audience=[1001])
    empty = await records.resolve(guild_id=GUILD, user_id=1001, session_id="s2")
    assert not isinstance(empty, Refusal)
    assert await records.summarize(empty) == Refusal("Nothing was said in session s2 yet.")
    assert render_text(empty, []).startswith(
        "Voice session s2 in #general\nStarted 1970-01-01T00:00:01Z, ended still running"
    )


def test_long_posts_are_split_at_line_ends() -> None:
    text = "\n".join(f"line {n} " + "x" * 90 for n in range(60))
    chunks = split_message(text)
    assert all(len(c) <= 2000 for c in chunks) and len(chunks) == 3
    assert "\n".join(chunks) == text
    assert split_message("y" * 4500) == ["y" * 2000, "y" * 2000, "y" * 500]


async def test_a_chinese_meeting_keeps_its_words_in_the_record_the_text_and_the_summary(
    store: TranscriptStore,
) -> None:
    store.open_session("zh", guild_id=GUILD, channel_id=2, channel_name="会议室", started_at=0.0)
    said = ["记住：我们下周五发布新版本。", "法国的首都是什么？", "開始一個任務：寫發佈說明。"]
    store.add("zh", [line(text, float(n)) for n, text in enumerate(said)], audience=[1001])
    store.add("zh", [line("法国的首都是巴黎。", 5.0, speaker="99", kind=LineKind.BOT)], audience=[1001])
    assert [li.text for li in store.lines("zh")] == [*said, "法国的首都是巴黎。"]  # as said, either script
    model = EchoModel()
    records = MeetingRecords(store, chat=model)
    session = await records.resolve(guild_id=GUILD, user_id=1001)
    assert not isinstance(session, Refusal)
    text = render_text(session, store.lines("zh"))
    assert "#会议室" in text and all(s in text for s in said) and "法国的首都是巴黎。" in text
    await records.summarize(session)
    ((messages, _),) = model.requests
    assert "language the transcript is spoken in" in messages[0].content
    assert all(s in messages[1].content for s in said)
