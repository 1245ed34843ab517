"""Echo coupling: only a speaker whose raw capture carries the bot gets the AEC reference."""

from __future__ import annotations

import numpy as np

from openab_voice.audio import EchoCouplingDetected, FrontEndSettings, SpeechStarted, scenes
from openab_voice.audio.coupling import EchoCoupling
from openab_voice.audio.resample import Chunk
from tests.unit.test_audio_echo_gate import play

CHUNK = 160  # 10 ms at 16 kHz


def chunks(samples: np.ndarray) -> list[np.ndarray]:
    n = samples.size // CHUNK
    return [samples[i * CHUNK : (i + 1) * CHUNK] for i in range(n)]


def feed(coupling: EchoCoupling, far: np.ndarray, near: np.ndarray) -> int | None:
    """Feed aligned chunks; return the chunk index at which the speaker became coupled."""
    for i, (r, c) in enumerate(zip(chunks(far), chunks(near), strict=False)):
        if coupling.observe(c, Chunk(samples=r, timestamp=i * 0.01)):
            return i
    return None


def test_echo_couples_within_half_a_second_and_stays_coupled() -> None:
    far = scenes.load_clip("far_end")
    near = scenes.mix(
        scenes.echo_path(far, delay_ms=120.0, gain_db=-8.0), scenes.noise(far.size / 16_000, -70.0)
    )
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=16_000)
    at = feed(coupling, far, near)
    assert at is not None and at * 0.01 <= 0.6, at
    assert coupling.coupled and coupling.suspected  # AEC3 is still converging on the new reference
    assert feed(coupling, far, near) is None and coupling.coupled  # never twice


def test_a_voice_talking_over_the_bot_never_couples_nor_raises_suspicion() -> None:
    far = scenes.load_clip("far_end")
    total = far.size / 16_000
    near = scenes.mix(
        scenes.place(scenes.load_clip("alice"), at_s=0.3, total_s=total),
        scenes.place(scenes.load_clip("bob"), at_s=4.0, total_s=total),
    )
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=16_000)
    suspected = []
    for i, (r, c) in enumerate(zip(chunks(far), chunks(near), strict=False)):
        coupling.observe(c, Chunk(samples=r, timestamp=i * 0.01))
        suspected.append(coupling.suspected)
    assert not coupling.coupled and not any(suspected)
    assert coupling.last_correlation is not None and coupling.last_correlation < 0.7


def test_silence_and_no_render_are_no_evidence() -> None:
    far = scenes.load_clip("far_end")
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=16_000)
    assert feed(coupling, far, scenes.silence(far.size / 16_000)) is None
    for c in chunks(scenes.echo_path(far, delay_ms=100.0, gain_db=-6.0)):
        coupling.observe(c, None)  # the bot is not playing: nothing to compare with
    assert not coupling.coupled and coupling.last_correlation is None


def test_the_gate_raises_suspicion_for_a_while_and_always_mode_is_coupled_from_the_start() -> None:
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=16_000, suspect_ms=100)
    coupling.note_echo()
    assert coupling.suspected and not coupling.coupled  # suspicion only: the gate has no lag evidence
    quiet = np.zeros(CHUNK, dtype=np.int16)
    for _ in range(10):
        coupling.observe(quiet, None)
    assert not coupling.suspected
    always = EchoCoupling(chunk_samples=CHUNK, rate=16_000, always=True)
    assert always.coupled and not always.suspected


def test_through_the_front_end_echo_couples_and_a_user_over_playback_interrupts_without_it() -> None:
    far = scenes.load_clip("far_end")
    total = far.size / 16_000
    echo_events, _ = play(far, scenes.echo_path(far, delay_ms=80.0, gain_db=-6.0))
    assert [e for e in echo_events if isinstance(e, EchoCouplingDetected)]
    assert not [e for e in echo_events if isinstance(e, SpeechStarted)]

    user = scenes.place(scenes.load_clip("bob"), at_s=1.0, total_s=total)
    user_events, t0 = play(far, user)
    assert not [e for e in user_events if isinstance(e, EchoCouplingDetected)]
    starts = [e for e in user_events if isinstance(e, SpeechStarted)]
    assert starts and starts[0].during_playback and starts[0].audio_time - t0 < 1.25
    # With the reference always fed, AEC3 suppresses the start of the same speech: the onset is later.
    fed_events, _ = play(far, user, FrontEndSettings(aec_reference="always"))
    fed = [e for e in fed_events if isinstance(e, SpeechStarted)]
    assert not fed or fed[0].audio_time > starts[0].audio_time
