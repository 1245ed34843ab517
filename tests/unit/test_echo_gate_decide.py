"""The echo gate's pure decision on hand-built evidence: each reason, the order they are tried in,
and the evidence the verdict reports."""

from __future__ import annotations

import dataclasses

import pytest

from openab_voice.audio import EchoGateDecision, FrontEndSettings, scenes
from openab_voice.audio.echo_gate import GateEvidence, decide
from tests.unit.test_audio_echo_gate import play

S = FrontEndSettings()  # min residual -50 dBFS; suppression 12 / 6 dB; correlation 0.7 / 0.45


def over_playback(**changes: object) -> GateEvidence:
    """A user talking over the bot: as loud as the render, 2 dB removed, not following it."""
    base = GateEvidence(
        bot_speaking=True,
        confidence=1.0,
        echo_cancelling=True,
        coupled=True,
        echo_suspected=False,
        raw_dbfs=-20.0,
        residual_dbfs=-22.0,
        render_dbfs=-20.0,
        correlation=0.2,
        raw_correlation=0.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("evidence", "reason"),
    [
        # Digital silence after the APM, though everything else says echo: quiet wins.
        (over_playback(residual_dbfs=-55.0, correlation=0.9), "residual_too_quiet"),
        (over_playback(raw_dbfs=-10.0, residual_dbfs=-23.0), "echo_suppressed"),  # 13 dB removed
        # 8 dB removed: within 12, yet over 12 - 6 while the reference drifts.
        (over_playback(raw_dbfs=-14.0, confidence=0.9), "echo_suppressed"),
        # Not coupled: nothing was cancelled, so only the coupling's suspicion counts.
        (over_playback(coupled=False, echo_suspected=True), "echo_suspected"),
        (over_playback(correlation=0.75), "render_correlated"),
        # Well under the render (coupled): the quiet limit 0.45 applies.
        (over_playback(raw_dbfs=-28.0, residual_dbfs=-30.0, correlation=0.5), "render_correlated"),
        # Coupled, little removed, the raw capture follows the render.
        (over_playback(raw_dbfs=-21.0, correlation=0.3, raw_correlation=0.75), "echo_uncancelled"),
        # Raw capture quiet (gain control raised the residual over it): the quiet limit for the raw.
        (over_playback(raw_dbfs=-30.0, residual_dbfs=-18.0, raw_correlation=0.5), "echo_uncancelled"),
        # 9 dB removed and the residual 14 dB under the render.
        (
            over_playback(raw_dbfs=-20.0, residual_dbfs=-29.0, render_dbfs=-15.0, correlation=0.3),
            "echo_dominated",
        ),
        # 4 dB removed: over 6 - 6 while the reference drifts.
        (
            over_playback(
                raw_dbfs=-25.0, residual_dbfs=-29.0, render_dbfs=-15.0, correlation=0.3, confidence=0.9
            ),
            "echo_dominated",
        ),
    ],
)
def test_each_echo_reason_rejects(evidence: GateEvidence, reason: str) -> None:
    verdict = decide(evidence, S)
    assert (verdict.accepted, verdict.reason) == (False, reason)
    assert verdict.confidence == evidence.confidence and verdict.evidence is evidence


@pytest.mark.parametrize(
    "evidence",
    [
        over_playback(),
        # The suppression tests need a cancelling APM that gets this speaker's reference.
        over_playback(raw_dbfs=-10.0, residual_dbfs=-23.0, coupled=False),
        # A quiet mic that never carried the bot is not held to the quiet limit.
        over_playback(raw_dbfs=-28.0, residual_dbfs=-30.0, correlation=0.5, coupled=False),
        # The raw witness only counts where the APM removed little.
        over_playback(raw_dbfs=-13.0, residual_dbfs=-20.0, raw_correlation=0.9),
        # A lot removed, but the residual is not far under the render: a voice.
        over_playback(raw_dbfs=-13.0, residual_dbfs=-22.0, render_dbfs=-20.0),
    ],
)
def test_user_speech_over_playback(evidence: GateEvidence) -> None:
    verdict = decide(evidence, S)
    assert (verdict.accepted, verdict.reason, verdict.confidence) == (True, "user_speech_over_playback", 1.0)


def test_idle_render_accepts_anything_at_full_confidence() -> None:
    evidence = over_playback(bot_speaking=False, residual_dbfs=-80.0, echo_suspected=True, confidence=0.5)
    verdict = decide(evidence, S)
    assert (verdict.accepted, verdict.reason, verdict.confidence) == (True, "render_idle", 1.0)


def test_without_aec_only_correlation_counts_and_confidence_halves() -> None:
    suppressed = over_playback(raw_dbfs=-10.0, residual_dbfs=-23.0, echo_cancelling=False, confidence=0.8)
    verdict = decide(suppressed, S)
    assert (verdict.accepted, verdict.reason, verdict.confidence) == (True, "user_speech_over_playback", 0.4)
    assert decide(dataclasses.replace(suppressed, correlation=0.71), S).reason == "render_correlated"


def test_verdict_reports_its_evidence_rounded() -> None:
    evidence = over_playback(
        raw_dbfs=-20.04, residual_dbfs=-22.96, correlation=0.31234, raw_correlation=0.4567
    )
    verdict = decide(evidence, S)
    assert (verdict.raw_dbfs, verdict.residual_dbfs, verdict.suppression_db) == (-20.0, -23.0, 2.9)
    assert verdict.render_correlation == 0.457  # the larger of the processed and the raw capture's


def test_the_decision_event_carries_the_evidence() -> None:
    far = scenes.load_clip("far_end")
    near = scenes.echo_path(far, delay_ms=80.0, gain_db=-6.0, rt60_ms=20.0)
    events, _ = play(far, near, FrontEndSettings(apm_provider="disabled"))
    first = next(e for e in events if isinstance(e, EchoGateDecision))
    assert (first.reason, first.echo_cancelling, first.echo_suspected) == ("render_correlated", False, False)
    assert first.render_correlation >= first.raw_correlation
