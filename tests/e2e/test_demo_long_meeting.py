"""The bundled ``long-meeting`` scenario through the demo runner: a receive-only bot (no greeting, no
dialogue, so it never plays) behind a NAT with a 30 s timeout, minutes of silence between the lines,
and every line after every silence transcribed.

The emulator and discord.py run on real time, so the scenario's minutes are compressed for the test:
the NAT's timeout and the keep-alive's interval by one factor (a 30 s NAT against the 5 s keep-alive
becomes 5 s against 0.83 s: seconds of slack, so no scheduling delay of a loaded machine decides the
outcome), the silences by a larger one that still leaves each over twice the NAT's timeout (without
the keep-alive the NAT closes in every one), and each line keeps a real-time slot to be spoken in.
The shipped file runs uncompressed with ``openab-voice demo --scenario long-meeting``.

A line may come back as two finals (a pause inside it is an end of utterance, more so when packets
arrive unevenly): what is checked is each speaker's words, in order, not how they were cut.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openab_voice.config import load_settings
from openab_voice.demo.runner import run_demo
from openab_voice.demo.scenario import Scenario, load_scenario
from openab_voice.discord.wire.keepalive import KEEPALIVE_INTERVAL_S

pytestmark = pytest.mark.e2e

NAT_FACTOR = 6.0  # a 30 s NAT becomes 5 s, the 5 s keep-alive 0.83 s
SILENCE_FACTOR = 15.0  # 3 to 4 minutes of silence become 12 to 16 s: over twice the NAT's 5 s
SLOT_S = 5.0  # real time each line gets to be spoken in, on top of its scaled start
KEYWORDS = {"1001": ["friday", "monday"], "1002": ["installer", "monday"]}  # each speaker's lines, in order


def compressed(scenario: Scenario) -> Scenario:
    """Silences and the NAT compressed; line ``i`` (in time order) also gets ``i`` slots."""
    items = sorted(((item.at, spec.id, n) for spec in scenario.speakers for n, item in enumerate(spec.audio)))
    start = {(sid, n): at / SILENCE_FACTOR + i * SLOT_S for i, (at, sid, n) in enumerate(items)}
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
            "nat_timeout_s": scenario.nat_timeout_s / NAT_FACTOR,
            "until": max(start.values()) + 2 * SLOT_S,
        }
    )


def test_the_shipped_scenario_is_a_long_silent_meeting_behind_a_nat() -> None:
    scenario = load_scenario(Path("long-meeting"))
    assert scenario.nat_timeout_s == 30 and not scenario.dialogue and not scenario.greeting
    starts = sorted(item.at for spec in scenario.speakers for item in spec.audio)
    assert min(b - a for a, b in zip(starts, starts[1:], strict=False)) >= 180  # minutes of silence
    # Compressed, every silence is still over twice the NAT's timeout: without keep-alives it closes.
    quick = compressed(scenario)
    assert quick.nat_timeout_s is not None
    gaps = sorted(item.at for spec in quick.speakers for item in spec.audio)
    assert min(b - a for a, b in zip(gaps, gaps[1:], strict=False)) - SLOT_S > 2 * quick.nat_timeout_s


async def test_every_line_after_every_silence_is_transcribed() -> None:
    scenario = compressed(load_scenario(Path("long-meeting")))
    settings = load_settings({}, udp_keepalive_s=KEEPALIVE_INTERVAL_S / NAT_FACTOR)
    report = await run_demo(scenario, settings=settings, quiet=True)

    emulator = report["emulator"]
    assert emulator["nat_dropped"] == 0, emulator
    assert emulator["udp_from_bot"]["media"] == 0  # the bot never played: only keep-alives kept it open
    assert emulator["udp_from_bot"]["keepalive"] > 0
    heard: dict[str, str] = {}
    for transcript in sorted(report["transcripts"], key=lambda t: t["start"]):
        speaker = transcript["speaker"]
        heard[speaker] = f"{heard.get(speaker, '')} {transcript['text'].lower()}"
    for speaker, words in KEYWORDS.items():
        said = heard.get(speaker, "")
        at = -1
        for word in words:  # each line's word, after the one before it
            at = said.find(word, at + 1)
            assert at >= 0, (speaker, word, report["transcripts"])
