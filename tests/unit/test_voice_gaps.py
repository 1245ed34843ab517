"""A recovered voice gap closes once the receive worker has said whose speech it cut.

The cut runs on the receive worker's thread; a RESUME can be back (op 9) before it reports. The gap
event then carried no speakers (seen as a flake of ``test_voice_server_crash_is_resumed``: a 6 ms
resume, ``speakers_cut=()``). Both orders, deterministically, on a fake clock."""

from __future__ import annotations

from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.events import VoiceGap
from openab_voice.discord.wire.gaps import GapLog
from openab_voice.discord.wire.reconnect import Recovery


def log() -> tuple[GapLog, FakeClock, list[VoiceGap]]:
    bus, clock = EventBus(), FakeClock(100.0)
    gaps: list[VoiceGap] = []
    bus.subscribe(VoiceGap, gaps.append)
    return GapLog(bus=bus, clock=clock, session_id="s", guild_id="g"), clock, gaps


def test_a_gap_back_before_its_cut_waits_for_the_cut() -> None:
    gaps, clock, published = log()
    gaps.open("voice_server_crash", 4015, Recovery.RESUME)
    gaps.expect_cut()
    clock.advance(0.006)
    gaps.recovered()  # op 9 RESUMED, before the worker reported
    assert published == [] and gaps.voice is not None
    clock.advance(0.05)
    gaps.add_cut(("1101",))
    (gap,) = published
    assert gap.speakers_cut == ("1101",) and gap.recovered and gaps.voice is None
    assert gap.duration_s == 0.006  # it ended when media was back, not when the cut came


def test_a_cut_before_the_resume_closes_at_the_resume() -> None:
    gaps, clock, published = log()
    gaps.open("voice_server_crash", 4015, Recovery.RESUME)
    gaps.expect_cut()
    gaps.add_cut(("1101", "1102"))
    assert published == []
    clock.advance(0.2)
    gaps.recovered()
    (gap,) = published
    assert gap.speakers_cut == ("1101", "1102") and gap.duration_s == 0.2


def test_breaking_again_while_waiting_for_the_cut_is_not_back() -> None:
    gaps, clock, published = log()
    gaps.open("voice_server_crash", 4015, Recovery.RESUME)
    gaps.expect_cut()
    gaps.recovered()
    assert gaps.open("resume_refused", 4006, Recovery.REJOIN) is None  # the same gap, escalated
    gaps.expect_cut()
    gaps.add_cut(("1101",))
    gaps.add_cut(())
    assert published == []  # the rejoin is not back yet
    clock.advance(1.0)
    gaps.recovered()
    (gap,) = published
    assert gap.recovery == "rejoin" and gap.speakers_cut == ("1101",) and gap.duration_s == 1.0


def test_a_failed_gap_closes_at_once() -> None:
    gaps, _, published = log()
    gaps.open("voice_server_crash", 4015, Recovery.RESUME)
    gaps.expect_cut()
    gaps.close(recovered=False)
    gaps.add_cut(("1101",))  # too late: the gap is over
    (gap,) = published
    assert not gap.recovered and gap.speakers_cut == ()
