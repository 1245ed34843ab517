"""The bundled ``long-meeting`` scenario through the demo runner: a receive-only bot (no greeting, no
dialogue, so it never plays) behind a NAT with a 30 s timeout, minutes of silence between the lines,
and every line after every silence transcribed.

The emulator and discord.py run on real time, so the scenario's minutes are compressed for the test:
each silence, the NAT's timeout and the keep-alive's interval are divided by the same factor (a 30 s
NAT against the 5 s keep-alive becomes 0.5 s against 1/12 s), and each line keeps a real-time slot to
be spoken in. The shipped file runs uncompressed with ``openab-voice demo --scenario long-meeting``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.config import load_settings
from openab_voice.demo.runner import run_demo
from openab_voice.demo.scenario import Scenario, load_scenario
from openab_voice.discord.wire.keepalive import KEEPALIVE_INTERVAL_S

pytestmark = pytest.mark.e2e

FACTOR = 60.0  # 3 minutes of silence become 3 s; a 30 s NAT 0.5 s; the 5 s keep-alive 1/12 s
SLOT_S = 5.0  # real time each line gets to be spoken in, on top of its scaled start
KEYWORDS = {("1001", 0): "friday", ("1002", 0): "installer", ("1001", 1): "monday", ("1002", 1): "monday"}


def compressed(scenario: Scenario) -> Scenario:
    """Silences and the NAT divided by ``FACTOR``; line ``i`` (in time order) also gets ``i`` slots."""
    items = sorted(((item.at, spec.id, n) for spec in scenario.speakers for n, item in enumerate(spec.audio)))
    start = {(sid, n): at / FACTOR + i * SLOT_S for i, (at, sid, n) in enumerate(items)}
    speakers = [
        spec.model_copy(
            update={
                "audio": [
                    item.model_copy(update={"at": start[spec.id, n]}) for n, item in enumerate(spec.audio)
                ]
            }
        )
        for spec in scenario.speakers
    ]
    assert scenario.nat_timeout_s is not None
    return scenario.model_copy(
        update={
            "speakers": speakers,
            "nat_timeout_s": scenario.nat_timeout_s / FACTOR,
            "until": max(start.values()) + 2 * SLOT_S,
        }
    )


def test_the_shipped_scenario_is_a_long_silent_meeting_behind_a_nat() -> None:
    scenario = load_scenario(Path("long-meeting"))
    assert scenario.nat_timeout_s == 30 and not scenario.dialogue and not scenario.greeting
    starts = sorted(item.at for spec in scenario.speakers for item in spec.audio)
    assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 180  # minutes of silence


async def test_every_line_after_every_silence_is_transcribed() -> None:
    scenario = compressed(load_scenario(Path("long-meeting")))
    settings = load_settings({}, udp_keepalive_s=KEEPALIVE_INTERVAL_S / FACTOR)
    report = await run_demo(scenario, settings=settings, quiet=True)

    emulator = report["emulator"]
    assert emulator["nat_dropped"] == 0, emulator
    assert emulator["udp_from_bot"]["media"] == 0  # the bot never played: only keep-alives kept it open
    assert emulator["udp_from_bot"]["keepalive"] > 0
    by_speaker: dict[str, list[str]] = {}
    for transcript in sorted(report["transcripts"], key=lambda t: t["start"]):
        by_speaker.setdefault(transcript["speaker"], []).append(transcript["text"].lower())
    for (speaker, n), word in KEYWORDS.items():
        lines = by_speaker.get(speaker, [])
        assert len(lines) > n and word in lines[n], (speaker, n, report["transcripts"])
