"""Capture and render meet on media time: jitter buffer -> resampler -> render aligner, as the pipeline
chains them, with the render reference stamped by its send time as the playback tap sends it."""

from __future__ import annotations

import numpy as np

from openab_voice.audio.drift import DriftMonitor
from openab_voice.audio.render import RenderAligner
from openab_voice.audio.resample import Chunk, Chunker, Resampler
from openab_voice.bench.receive import opus_tone
from openab_voice.clock import FakeClock
from openab_voice.discord.wire.jitter import JitterBuffer
from openab_voice.discord.wire.stats import SpeakerCounters

TONE = opus_tone(10)
T0 = 100.0
RATE = 16_000


def _bot_plays(t: float) -> bool:
    """The bot answers in 1 s utterances, 300 ms apart (each one a new run for the aligner)."""
    return (t - T0) % 1.3 < 1.0


def test_echo_of_a_spurt_that_started_late_still_pairs_with_the_render_of_its_moment() -> None:
    # The speaker's microphone carries the bot and never stops sending; the reader thread ran 80 ms
    # late as the transmission began (packets 0..4 stamped together at T0 + 80 ms), on time after.
    jitter = JitterBuffer(speaker_id="7", counters=SpeakerCounters())
    drift = DriftMonitor(
        "7", tolerance_s=0.06, recovery_s=0.3, low_confidence=0.5, clock=FakeClock(), emit=lambda _: None
    )
    aligner = RenderAligner(chunk_s=0.01, tolerance_s=0.06, gap_s=0.06, history_s=1.0, drift=drift)
    resampler, chunker = Resampler(RATE), Chunker(RATE // 100, RATE)
    render = np.zeros(RATE // 100, dtype=np.int16)
    next_render = T0
    paired: list[float] = []
    unpaired: list[float] = []
    for k in range(200):  # 4 s: three bot utterances
        arrival = max(T0 + 0.080, T0 + k * 0.020)
        while next_render <= arrival:  # what the bot has sent by the time this packet arrived
            if _bot_plays(next_render):
                aligner.add(Chunk(next_render, render))
            next_render += 0.010
        for frame in jitter.push(k, k * 960, TONE[k % len(TONE)], arrival):
            mono = resampler.process(frame)
            for chunk in chunker.push(mono, frame.timestamp + frame.duration - resampler.delay_s):
                take = aligner.take(chunk.timestamp)
                phase = (chunk.timestamp - T0) % 1.3
                if k >= 10 and 0.1 <= phase <= 0.9:  # well inside an utterance of the bot's
                    (paired if take.chunk is not None else unpaired).append(chunk.timestamp)
                if take.skew_s is not None:
                    assert abs(take.skew_s) <= 0.06
    resampler.reset()
    # Stamped 80 ms ahead of arrival (the spurt anchored on its late first packet), every capture chunk
    # of the second and third utterances found only render "too old" for it, and the bot looked silent.
    assert unpaired == [] and len(paired) > 200
