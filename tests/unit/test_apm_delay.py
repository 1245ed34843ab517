"""The render-to-capture delay estimator that stands in for AEC2's delay-agnostic mode."""

from __future__ import annotations

import numpy as np

from openab_voice.audio import scenes
from openab_voice.providers.apm_delay import DelayEstimator

RATE = 16_000
FRAME = RATE // 100


def feed(estimator: DelayEstimator, render: np.ndarray, capture: np.ndarray) -> list[tuple[float, float]]:
    """Push both streams frame by frame; return (time s, estimate) for each change."""
    changes = []
    for i in range(0, min(render.size, capture.size) - FRAME + 1, FRAME):
        found = estimator.push(render[i : i + FRAME].tobytes(), capture[i : i + FRAME].tobytes())
        if found is not None:
            changes.append((i / RATE, found))
    return changes


def test_finds_the_delay_of_a_reverberant_speech_echo() -> None:
    far = np.concatenate([scenes.load_clip("far_end")] * 2)
    echo = scenes.echo_path(far, delay_ms=120.0, gain_db=-10.0, rt60_ms=150.0)
    near = scenes.mix(echo, scenes.noise(far.size / RATE, -70.0, seed=7))
    estimator = DelayEstimator(RATE)
    changes = feed(estimator, far, near)
    assert changes and changes[0][0] < 1.5  # established within 1.5 s of playback
    assert abs(changes[0][1] - 120.0) <= 1.0
    assert len(changes) == 1 and estimator.delay_ms == changes[0][1]  # and it stays put


def test_follows_a_changed_path() -> None:
    far = scenes.load_clip("far_end")
    first = scenes.echo_path(far, delay_ms=60.0, gain_db=-6.0, rt60_ms=50.0)
    second = scenes.echo_path(far, delay_ms=300.0, gain_db=-6.0, rt60_ms=50.0)
    changes = feed(DelayEstimator(RATE), np.concatenate((far, far)), np.concatenate((first, second)))
    assert [round(d) for _, d in changes] == [60, 300]


def test_no_estimate_from_silence_or_an_unrelated_voice() -> None:
    far = scenes.load_clip("far_end")
    quiet = DelayEstimator(RATE)
    assert feed(quiet, far, scenes.silence(far.size / RATE)) == [] and quiet.delay_ms is None
    assert quiet.estimates > 0  # it tried, and found nothing to correlate
    other = scenes.load_clip("alice")
    length = min(far.size, other.size)
    unrelated = DelayEstimator(RATE)
    assert feed(unrelated, far[:length], other[:length]) == [] and unrelated.delay_ms is None
    render_off = DelayEstimator(RATE)  # the bot is silent: nothing to say about a delay
    assert feed(render_off, scenes.silence(length / RATE), other[:length]) == []
