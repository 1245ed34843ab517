"""The echo gate: echo alone never becomes user speech; speech over playback still does."""

from __future__ import annotations

import numpy as np

from openab_voice.audio import EchoGateDecision, FrontEnd, FrontEndSettings, SpeechStarted, scenes
from openab_voice.audio.echo_gate import EchoGate, mean_square
from openab_voice.audio.resample import Chunk
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock


def play(
    render: np.ndarray, near: np.ndarray, settings: FrontEndSettings | None = None
) -> tuple[list[Event], float]:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    frontend = FrontEnd(settings or FrontEndSettings(), bus=bus, clock=clock)
    t0 = clock.monotonic()
    render_frames = scenes.discord_frames(render, speaker_id=None, start_time=t0)
    near_frames = scenes.discord_frames(near, speaker_id="u1", start_time=t0)
    for r, c in zip(render_frames, near_frames, strict=True):
        frontend.push_render(r)
        frontend.push_capture(c)
        frontend.process_pending()
        clock.advance(0.02)
    return events, t0


def test_echo_only_never_passes_the_gate() -> None:
    far = scenes.load_clip("far_end")
    near = scenes.mix(
        scenes.echo_path(far, delay_ms=150.0, gain_db=-6.0), scenes.noise(far.size / 16_000, -70.0)
    )
    events, _ = play(far, near)
    assert not [e for e in events if isinstance(e, SpeechStarted)]
    assert not [e for e in events if isinstance(e, EchoGateDecision) and e.accepted]


def test_double_talk_is_detected_as_user_speech_during_playback() -> None:
    far = scenes.load_clip("far_end")
    total = far.size / 16_000
    user = scenes.place(scenes.load_clip("bob"), at_s=1.5, total_s=total)
    near = scenes.mix(scenes.echo_path(far, delay_ms=100.0, gain_db=-10.0), user)
    events, t0 = play(far, near)
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    assert starts, "user speech over playback was not detected"
    first = starts[0]
    assert first.during_playback and first.confidence == 1.0
    assert 1.5 <= first.audio_time - t0 <= 2.5
    decision = next(e for e in events if isinstance(e, EchoGateDecision) and e.accepted)
    assert decision.event_type == "echo_gate_decision"
    assert decision.bot_speaking and decision.reason == "user_speech_over_playback"
    assert decision.reference_aligned and not decision.apm_degraded
    assert decision.suppression_db < 12.0 and decision.render_correlation < 0.7
    assert decision.residual_dbfs > -50.0


def test_without_aec_the_gate_rejects_correlated_echo_and_says_degraded() -> None:
    far = scenes.load_clip("far_end")
    near = scenes.echo_path(far, delay_ms=80.0, gain_db=-6.0, rt60_ms=20.0)
    events, _ = play(far, near, FrontEndSettings(apm_provider="disabled"))
    decisions = [e for e in events if isinstance(e, EchoGateDecision)]
    assert decisions, "raw echo should trip the VAD when nothing cancels it"
    first = decisions[0]
    assert not first.accepted and first.reason == "render_correlated"
    assert first.render_correlation > 0.7 and first.apm_degraded and first.bot_speaking


def _gate() -> EchoGate:
    return EchoGate(FrontEndSettings(), chunk_samples=160, rate=16_000)


def _chunks(x: np.ndarray) -> list[np.ndarray]:
    return [x[i : i + 160] for i in range(0, x.size - 159, 160)]


def test_gate_evidence_for_each_verdict() -> None:
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.echo_path(far, delay_ms=60.0, gain_db=0.0, rt60_ms=30.0)
    user = scenes.load_clip("alice")[16_000:24_000]

    def feed(raw: np.ndarray, processed: np.ndarray, render: np.ndarray | None) -> EchoGate:
        gate = _gate()
        for i, (r, p) in enumerate(zip(_chunks(raw), _chunks(processed), strict=True)):
            chunk = None
            if render is not None:
                samples = render[i * 160 : (i + 1) * 160]
                chunk = Chunk(float(i), samples, mean_square(samples))
            gate.observe(r, p, chunk)
        return gate

    idle = feed(user, user, None).evaluate(confidence=1.0, echo_cancelling=True)
    assert idle.accepted and idle.reason == "render_idle" and not idle.bot_speaking

    cancelled = (echo.astype(np.float64) * 0.003).astype(np.int16)  # AEC removed ~50 dB
    suppressed = feed(echo, cancelled, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert not suppressed.accepted and suppressed.reason in ("echo_suppressed", "residual_too_quiet")
    assert suppressed.suppression_db > 40.0

    leaked = (echo.astype(np.float64) * 0.1).astype(np.int16)  # 20 dB removed: still mostly echo
    partial = feed(echo, leaked, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert not partial.accepted and partial.reason == "echo_suppressed"

    uncancelled = feed(echo, echo, far).evaluate(confidence=1.0, echo_cancelling=False)
    assert not uncancelled.accepted and uncancelled.reason == "render_correlated"
    assert uncancelled.render_correlation > 0.7

    talk = scenes.mix(echo, user)
    over = feed(talk, user, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert over.accepted and over.reason == "user_speech_over_playback" and over.bot_speaking
    assert over.render_correlation < 0.7 and over.suppression_db < 12.0

    # While the reference drifts the suppression test tightens and confidence drops.
    borderline = (talk.astype(np.float64) * 10 ** (-9 / 20)).astype(np.int16)  # 9 dB removed
    gate = feed(talk, borderline, far)
    assert gate.evaluate(confidence=1.0, echo_cancelling=True).accepted
    drifting = gate.evaluate(confidence=0.5, echo_cancelling=True)
    assert not drifting.accepted and drifting.confidence == 0.5


def _feed_gate(raw: np.ndarray, processed: np.ndarray, render: np.ndarray) -> EchoGate:
    gate = _gate()
    for i, (r, p) in enumerate(zip(_chunks(raw), _chunks(processed), strict=True)):
        samples = render[i * 160 : (i + 1) * 160]
        gate.observe(r, p, Chunk(float(i), samples, mean_square(samples)))
    return gate


def test_residual_far_under_the_render_after_heavy_suppression_is_echo() -> None:
    # What leaked through the emulator: ~9 dB suppressed (under the 12 dB rule) and 10+ dB under the render.
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.echo_path(far, delay_ms=60.0, gain_db=-6.0, rt60_ms=30.0)
    rng = np.random.default_rng(1)
    residual_rms = (
        np.sqrt(mean_square(echo[-3200:])) * 32768 * 10 ** (-9 / 20)
    )  # the gate weighs the last 200 ms
    residual = np.clip(rng.standard_normal(echo.size) * residual_rms, -32768, 32767).astype(np.int16)
    verdict = _feed_gate(echo, residual, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert 6.0 < verdict.suppression_db < 12.0
    assert verdict.residual_dbfs < verdict.render_dbfs - 10.0
    assert not verdict.accepted and verdict.reason == "echo_dominated"


def test_quiet_residual_that_follows_the_render_is_echo() -> None:
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.echo_path(far, delay_ms=60.0, gain_db=-12.0, rt60_ms=30.0)
    # Echo plus as much uncorrelated noise: correlation lands between the quiet (0.45) and normal (0.7) limits.
    rms = np.sqrt(mean_square(echo[-3200:])) * 32768
    noisy = echo + np.random.default_rng(2).standard_normal(echo.size) * rms
    leaked = np.clip(noisy, -32768, 32767).astype(np.int16)
    verdict = _feed_gate(leaked, leaked, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert verdict.suppression_db < 1.0 and verdict.residual_dbfs < verdict.render_dbfs - 6.0
    assert 0.45 < verdict.render_correlation <= 0.7
    assert not verdict.accepted and verdict.reason == "render_correlated"


def test_a_voice_as_loud_as_the_bot_is_still_accepted() -> None:
    far = scenes.load_clip("far_end")[16_000:24_000]
    user = scenes.load_clip("alice")[16_000:24_000]
    verdict = _feed_gate(user, user, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert verdict.accepted and verdict.reason == "user_speech_over_playback"


def test_a_quiet_voice_on_a_mic_that_never_carried_the_bot_is_not_held_to_the_quiet_rule() -> None:
    # bob's Piper voice against the bot's (the same TTS voice) peaks at 0.62 at some lag in this
    # window: a chance match (voice windows score 0.20 median, 0.37 P90 here). 10 dB under the render.
    far = scenes.load_clip("far_end")[52_000 + 3_200 - 8_000 : 52_000 + 3_200]
    voice = scenes.load_clip("bob")[24_000 + 3_200 - 8_000 : 24_000 + 3_200]
    scale = np.sqrt(mean_square(far[-3200:]) / mean_square(voice[-3200:])) * 10 ** (-10 / 20)
    quiet = np.clip(voice.astype(np.float64) * scale, -32768, 32767).astype(np.int16)
    gate = _feed_gate(quiet, quiet, far)
    uncoupled = gate.evaluate(confidence=1.0, echo_cancelling=True, coupled=False)
    assert 0.45 < uncoupled.render_correlation < 0.7
    assert uncoupled.residual_dbfs < uncoupled.render_dbfs - 6.0
    assert uncoupled.accepted and uncoupled.reason == "user_speech_over_playback"
    # Where the level says something (the APM cancels this speaker's echo, or nothing is cancelled),
    # the same capture is still taken for residual echo.
    coupled = gate.evaluate(confidence=1.0, echo_cancelling=True, coupled=True)
    no_aec = gate.evaluate(confidence=1.0, echo_cancelling=False, coupled=False)
    assert not coupled.accepted and coupled.reason == "render_correlated"
    assert not no_aec.accepted and no_aec.reason == "render_correlated"


def _reshaped(x: np.ndarray) -> np.ndarray:
    """``x`` with every other 10 ms block inverted: the same level, its waveform no longer the
    render's over the window (as noise suppression and gain control reshape an uncancelled echo)."""
    out = x.astype(np.int32).reshape(-1, 160)
    out[1::2] *= -1
    return np.clip(out.reshape(-1), -32768, 32767).astype(np.int16)


def test_echo_the_aec_did_not_cancel_is_judged_on_the_raw_capture() -> None:
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.echo_path(far, delay_ms=80.0, gain_db=-6.0, rt60_ms=40.0)
    residual = _reshaped(echo)
    only_residual = _feed_gate(residual, residual, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert only_residual.accepted  # the residual alone would let this echo through as a person
    verdict = _feed_gate(echo, residual, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert abs(verdict.suppression_db) < 1.0
    assert verdict.render_correlation > 0.7
    assert not verdict.accepted and verdict.reason == "echo_uncancelled"


def test_a_quiet_uncancelled_echo_raised_by_gain_control_is_judged_on_its_raw_level() -> None:
    """What got through with a core busy: the AEC removed nothing, gain control raised the residual
    12 dB over the raw capture (18 here), and the raw capture, 17 dB under the render, correlated 0.63
    with it: under the 0.7 limit for a capture as loud as the bot, over the 0.45 one for a quiet one."""
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.mix(
        scenes.echo_path(far, delay_ms=80.0, gain_db=-18.0, rt60_ms=40.0),
        scenes.noise(far.size / 16_000, -45.0),
    )
    raised = np.clip(_reshaped(echo).astype(np.int32) * 8, -32768, 32767).astype(np.int16)
    verdict = _feed_gate(echo, raised, far).evaluate(confidence=1.0, echo_cancelling=True)
    assert verdict.suppression_db < -6.0  # the residual is louder than what came in
    assert verdict.raw_dbfs < verdict.render_dbfs - 6.0 < verdict.residual_dbfs
    assert 0.45 < verdict.render_correlation < 0.7
    assert not verdict.accepted and verdict.reason == "echo_uncancelled"


def test_a_voice_over_uncancelled_echo_is_still_accepted() -> None:
    far = scenes.load_clip("far_end")[16_000:24_000]
    echo = scenes.echo_path(far, delay_ms=80.0, gain_db=-6.0, rt60_ms=40.0)
    user = scenes.load_clip("alice")[16_000:24_000].astype(np.int32) * 2
    talk = np.clip(user + echo, -32768, 32767).astype(np.int16)
    verdict = _feed_gate(talk, _reshaped(talk), far).evaluate(confidence=1.0, echo_cancelling=True)
    assert verdict.suppression_db < 6.0
    assert verdict.accepted and verdict.reason == "user_speech_over_playback"
