"""The audience policy: a result is read aloud only to a cleared audience, and a join, a move in, a
lost view of the control channel or the bot leaving withdraws it (latched), downgraded to the status
line; a leave or a mute does not. The pure verdict, the cause, and the guard on the real conversation
manager in virtual time (the cut within a frame, the status line after it)."""

from __future__ import annotations

import pytest

from openab_voice.actions.audience import (
    AudienceGuard,
    audience_cause,
    cleared_listeners,
    may_hear_details,
    withdrawal,
)
from openab_voice.actions.ports import Audience
from openab_voice.bus import EventBus
from openab_voice.bus.events import AudienceChanged
from openab_voice.engine.events import SpeechDropped
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.state import DialogueState
from openab_voice.testing.dialogue_fakes import ScriptedReply
from openab_voice.testing.rig import Rig

OPERATOR, FRIEND, STRANGER = 1, 2, 3
GUILD, CONTROL = 10, 20
TRUSTED = frozenset({OPERATOR, FRIEND})
DETAILED = "The task is done. Wrote the release notes. The full result is in the text channel."
STATUS = "The task is done. The result is in the text channel."


def room(*listeners: int, blind: tuple[int, ...] = ()) -> Audience:
    return Audience(listeners=frozenset(listeners), viewers=frozenset(listeners) - frozenset(blind))


@pytest.mark.parametrize(
    ("audience", "cleared"),
    [
        (room(OPERATOR, FRIEND), True),
        (room(), False),  # nobody listens: nothing to read to
        (room(OPERATOR, STRANGER), False),
        (room(OPERATOR, FRIEND, blind=(FRIEND,)), False),  # trusted but cannot read the channel
        (None, False),
    ],
    ids=["all-trusted", "empty", "stranger", "trusted-but-blind", "not-connected"],
)
def test_details_only_before_trusted_listeners_who_view_the_control_channel(
    audience: Audience | None, cleared: bool
) -> None:
    assert may_hear_details(audience, TRUSTED) is cleared


def test_cleared_listeners_are_trusted_and_viewing() -> None:
    assert cleared_listeners(room(OPERATOR, FRIEND, STRANGER, blind=(FRIEND,)), TRUSTED) == {OPERATOR}


@pytest.mark.parametrize(
    ("now", "reason"),
    [
        (room(OPERATOR, FRIEND), None),
        (room(OPERATOR), None),  # a listener left: nobody new hears it
        (room(OPERATOR, FRIEND, STRANGER), "user 3 joined the voice channel"),
        # A trusted member moving in was not part of the audience it was cleared for either.
        (room(FRIEND), None),
        (room(OPERATOR, FRIEND, blind=(FRIEND,)), "user 2 lost view of the control channel"),
        (None, "the bot left the voice channel"),
    ],
    ids=["unchanged", "left", "joined", "one-left", "lost-view", "bot-left"],
)
def test_withdrawal_verdicts(now: Audience | None, reason: str | None) -> None:
    assert withdrawal(room(OPERATOR, FRIEND), now, TRUSTED) == reason


def test_a_trusted_member_moving_in_withdraws_a_reading_cleared_without_them() -> None:
    assert withdrawal(room(OPERATOR), room(OPERATOR, FRIEND), TRUSTED) == "user 2 joined the voice channel"


def test_a_reading_never_cleared_is_withdrawn() -> None:
    start = room(OPERATOR, STRANGER)
    assert withdrawal(start, start, TRUSTED) == "user 3 not cleared to hear the result"


def test_the_cause_latches_and_watches_only_its_guild() -> None:
    bus = EventBus()
    live = [room(OPERATOR)]
    cause = audience_cause(
        name="r1", start=live[0], now=lambda: live[0], trusted=TRUSTED, bus=bus, guild_id=GUILD
    )
    calls: list[str] = []
    assert cause.watch is not None
    unwatch = cause.watch(lambda: calls.append("changed"))
    bus.publish(AudienceChanged(at=0.0, guild_id=str(GUILD + 1), kind="voice_state"))
    assert calls == [] and cause.reason() is None
    live[0] = room(OPERATOR, STRANGER)
    bus.publish(AudienceChanged(at=0.0, guild_id=str(GUILD), kind="voice_state", user_id=str(STRANGER)))
    assert calls == ["changed"] and cause.reason() == "user 3 joined the voice channel"
    live[0] = room(OPERATOR)  # the newcomer leaves again: the reading stays withdrawn
    assert cause.reason() == "user 3 joined the voice channel"
    unwatch()
    bus.publish(AudienceChanged(at=0.0, guild_id=str(GUILD), kind="voice_state"))
    assert calls == ["changed"]


class Voice:
    """The voice side on a conversation manager: ``say`` announces, ``audience`` is ``live``."""

    def __init__(self, rig: Rig | None, live: Audience | None) -> None:
        self.rig = rig
        self.live = live
        self.said: list[tuple[str, SpeechCause | None]] = []

    def generation(self, guild_id: int) -> int | None:
        return 1

    def session_id(self, guild_id: int) -> str | None:
        return "s1"

    def listeners(self, guild_id: int) -> frozenset[int] | None:
        return None if self.live is None else self.live.listeners

    def audience(self, guild_id: int, control_channel_id: int) -> Audience | None:
        assert (guild_id, control_channel_id) == (GUILD, CONTROL)
        return self.live

    async def say(self, guild_id: int, text: str, *, cause: SpeechCause | None = None) -> bool:
        self.said.append((text, cause))
        if self.rig is not None:
            self.rig.manager.announce(text, cause=cause)
        return True

    def change(self, audience: Audience, bus: EventBus) -> None:
        self.live = audience
        bus.publish(AudienceChanged(at=0.0, guild_id=str(GUILD), kind="voice_state"))


async def speak(guard: AudienceGuard) -> bool:
    return await guard.speak(
        guild_id=GUILD, control_channel_id=CONTROL, action_id="a1", detailed=DETAILED, status=STATUS
    )


@pytest.mark.parametrize(
    "audience",
    [room(OPERATOR, STRANGER), room(OPERATOR, blind=(OPERATOR,)), None],
    ids=["stranger", "blind", "not-connected"],
)
async def test_an_uncleared_room_hears_only_the_status(audience: Audience | None) -> None:
    voice = Voice(None, audience)
    guard = AudienceGuard(voice=voice, bus=EventBus(), trusted=TRUSTED)
    await speak(guard)
    assert voice.said == [(STATUS, None)]


async def test_a_drop_of_another_cause_or_a_second_drop_downgrades_nothing_more() -> None:
    bus = EventBus()
    voice = Voice(None, room(OPERATOR))
    guard = AudienceGuard(voice=voice, bus=bus, trusted=TRUSTED)
    await speak(guard)
    [(text, cause)] = voice.said
    assert text == DETAILED and cause is not None
    other = SpeechDropped(at=0.0, turn_id="t", text="x", cause="another", reason="r", point="queued")
    bus.publish(other)
    assert guard.downgraded == 0
    ours = SpeechDropped(at=0.0, turn_id="t", text=DETAILED, cause=cause.name, reason="r", point="playing")
    bus.publish(ours)
    bus.publish(ours)
    await guard_idle(guard)
    assert guard.downgraded == 1 and voice.said[1:] == [(STATUS, None)]


async def guard_idle(guard: AudienceGuard) -> None:
    for task in guard._tasks.tasks:
        await task


async def test_a_join_while_the_result_is_read_cuts_it_within_a_frame_then_says_the_status() -> None:
    async with Rig(replies=[]) as rig:
        voice = Voice(rig, room(OPERATOR))
        guard = AudienceGuard(voice=voice, bus=rig.bus, trusted=TRUSTED)
        await speak(guard)
        await rig.until(lambda: DETAILED in rig.played_sentences())  # an announcement is one line
        await rig.run(0.2)
        joined = rig.now()
        voice.change(room(OPERATOR, STRANGER), rig.bus)
        await rig.until(lambda: STATUS in rig.played_sentences())
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        reading = rig.utterance("announce-1")
        assert reading is not None and reading.interrupted
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason) == ("playing", "user 3 joined the voice channel")
        reading_frames = [at for uid, _, at in rig.output.played if uid == "utt-1"]
        assert reading_frames and max(reading_frames) <= joined + 0.02 + 1e-9  # stopped within a frame
        assert rig.played_sentences() == [DETAILED, STATUS]
        assert guard.downgraded == 1
        guard.close()


async def test_a_lost_view_before_the_reading_starts_drops_it_unheard_for_the_status() -> None:
    async with Rig(replies=[ScriptedReply.text("Paris is the capital. It has the Eiffel Tower.")]) as rig:
        voice = Voice(rig, room(OPERATOR, FRIEND))
        guard = AudienceGuard(voice=voice, bus=rig.bus, trusted=TRUSTED)
        rig.say("What is the capital of France?")
        await rig.until_playing("Paris is the capital.")
        await speak(guard)  # queued behind the answer
        voice.change(room(OPERATOR, FRIEND, blind=(FRIEND,)), rig.bus)
        await rig.until(lambda: STATUS in rig.played_sentences())
        assert rig.played_sentences() == ["Paris is the capital.", "It has the Eiffel Tower.", STATUS]
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason) == ("queued", "user 2 lost view of the control channel")
        guard.close()


async def test_an_unchanged_or_shrinking_room_hears_the_whole_result_and_no_status_after() -> None:
    async with Rig(replies=[]) as rig:
        voice = Voice(rig, room(OPERATOR, FRIEND))
        guard = AudienceGuard(voice=voice, bus=rig.bus, trusted=TRUSTED)
        await speak(guard)
        await rig.until(lambda: DETAILED in rig.played_sentences())
        voice.change(room(OPERATOR), rig.bus)  # the friend leaves: nobody new listens
        await rig.until(lambda: rig.utterance("announce-1") is not None)
        await rig.until(lambda: rig.manager.state is DialogueState.LISTENING)
        await rig.run(1.0)
        reading = rig.utterance("announce-1")
        assert reading is not None and not reading.interrupted
        assert rig.played_sentences() == [DETAILED]
        assert rig.events.of(SpeechDropped) == [] and guard.downgraded == 0
        guard.close()


async def test_a_join_while_the_tts_is_still_synthesizing_cuts_at_once_and_says_the_status() -> None:
    # 90 ms of audio every 0.5 s: the output runs dry between chunks, as when Piper synthesizes the
    # line's next sentence slower than real time; the cut must not wait for the next chunk, and a
    # line whose audio so far has all been played must still count as withdrawn.
    async with Rig(replies=[], tts={"chunk_delay_s": 0.5}) as rig:
        voice = Voice(rig, room(OPERATOR))
        guard = AudienceGuard(voice=voice, bus=rig.bus, trusted=TRUSTED)
        await speak(guard)
        await rig.until(lambda: DETAILED in rig.played_sentences())
        await rig.run(0.3)  # the first chunk has played out; the next one is 0.2 s away
        joined = rig.now()
        voice.change(room(OPERATOR, STRANGER), rig.bus)
        await rig.until(lambda: STATUS in rig.played_sentences())
        [dropped] = rig.events.of(SpeechDropped)
        assert (dropped.point, dropped.reason) == ("playing", "user 3 joined the voice channel")
        assert dropped.at <= joined + 0.02 + 1e-9
        reading_frames = [at for uid, _, at in rig.output.played if uid == "utt-1"]
        assert reading_frames and max(reading_frames) <= joined + 0.02 + 1e-9
        assert guard.downgraded == 1
        guard.close()
