"""The echo gate: is a VAD onset during playback the user, or the bot's own echo?

AEC removes most echo, but what remains (before convergence, after a path change, with a disabled
APM) can still look like speech to a level-insensitive VAD such as Silero. So while the bot is
speaking, an onset counts as user speech only if it is *not explained by the render reference*:

* ``residual_too_quiet``: after APM the capture is below ``gate_min_residual_dbfs``;
* ``echo_suppressed``: the APM removed more than ``gate_max_suppression_db`` from the capture over
  the onset window, i.e. what came in was mostly echo (user speech survives AEC: suppression stays
  within a few dB; AGC can even make it negative);
* ``echo_dominated``: the APM removed more than ``gate_dominated_suppression_db`` *and* what is left
  is more than ``gate_residual_below_render_db`` under the render level (residual echo);
* ``echo_suspected``: the speaker is not coupled yet (its APM does not get the reference, see
  :mod:`~openab_voice.audio.coupling`) but its raw capture recently followed the render;
* ``echo_uncancelled``: the APM removed little (under ``gate_dominated_suppression_db``) and the raw
  capture correlates with the render as ``render_correlated`` asks of the processed one, with the
  quiet limit chosen by the raw capture's level (gain control may have raised the residual): echo the
  AEC did not cancel (a changed echo path), which noise suppression reshapes in the residual;
* ``render_correlated``: the processed capture's waveform (or the raw one, for a speaker not coupled)
  correlates with the recent render above ``gate_max_correlation`` at some lag within the gate window
  (the only test left when the APM is ``disabled``); above ``gate_quiet_max_correlation`` already when
  the capture is well under the render level, where that level says something: after cancellation
  (coupled) or with no AEC. A quiet talker whose mic never carried the bot is not held to it.

:meth:`EchoGate.gather` measures an onset's :class:`GateEvidence`; the pure :func:`decide` weighs it
(the first reason that holds wins, in the order ``residual_too_quiet``, ``echo_suppressed``,
``echo_suspected``, ``render_correlated``, ``echo_uncancelled``, ``echo_dominated``) and the verdict
carries it into ``EchoGateDecision``.

Confidence drops (and the suppression test tightens by ``gate_drift_margin_db``) while the reference
drifts or the APM re-converges; a ``disabled`` APM can only rely on correlation and says so. Spec:
"Echo never interrupts" (DESIGN.md decision 4), "Software render-reference interruption gate".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from openab_voice.audio.resample import Chunk, Samples
from openab_voice.audio.settings import FrontEndSettings

_FULL_SCALE_SQ = 32768.0 * 32768.0
_FLOOR = 1e-10  # -100 dBFS: keeps logs finite on digital silence


def mean_square(samples: Samples) -> float:
    """Mean square of int16 samples relative to full scale (1.0 = 0 dBFS square wave)."""
    if samples.size == 0:
        return 0.0
    x = samples.astype(np.float64)
    return float(np.dot(x, x)) / (samples.size * _FULL_SCALE_SQ)


def dbfs(ms: float) -> float:
    """Level in dBFS of a mean square from :func:`mean_square`."""
    return 10.0 * math.log10(max(ms, _FLOOR))


@dataclass(frozen=True, slots=True, kw_only=True)
class GateEvidence:
    """What the gate knows about an onset: everything :func:`decide` weighs, unrounded.

    Attributes:
        bot_speaking: a render chunk above the activity level within the gate window.
        confidence: 1.0 normally; lower while the reference drifts or the APM re-converges.
        echo_cancelling: the APM cancels echo (False for ``disabled``).
        coupled: the APM gets this speaker's render reference (:mod:`~openab_voice.audio.coupling`).
        echo_suspected: recent raw capture of this (not yet coupled) speaker followed the render.
        raw_dbfs: capture level before APM over the onset window.
        residual_dbfs: capture level after APM over the onset window.
        render_dbfs: render level over the gate window.
        correlation: peak normalised cross-correlation of the processed capture with the render (the
            larger of processed and raw for a speaker not coupled); 0.0 while the bot is silent.
        raw_correlation: the same for the raw capture, measured only where it is the better witness
            (a speaker not coupled, an onset the AEC left uncancelled); 0.0 elsewhere.
    """

    bot_speaking: bool
    confidence: float
    echo_cancelling: bool
    coupled: bool
    echo_suspected: bool
    raw_dbfs: float
    residual_dbfs: float
    render_dbfs: float
    correlation: float
    raw_correlation: float

    @property
    def suppression_db(self) -> float:
        """``raw_dbfs - residual_dbfs``: how much the APM removed."""
        return self.raw_dbfs - self.residual_dbfs

    @property
    def cancelling(self) -> bool:
        """The APM cancels echo for this speaker: it cancels at all and gets the speaker's reference."""
        return self.echo_cancelling and self.coupled


@dataclass(frozen=True, slots=True, kw_only=True)
class GateVerdict:
    """The gate's decision and the evidence it was reached on; the rounded properties are what
    ``EchoGateDecision`` reports."""

    accepted: bool
    reason: str
    confidence: float
    evidence: GateEvidence

    @property
    def bot_speaking(self) -> bool:
        return self.evidence.bot_speaking

    @property
    def raw_dbfs(self) -> float:
        return round(self.evidence.raw_dbfs, 1)

    @property
    def residual_dbfs(self) -> float:
        return round(self.evidence.residual_dbfs, 1)

    @property
    def render_dbfs(self) -> float:
        return round(self.evidence.render_dbfs, 1)

    @property
    def suppression_db(self) -> float:
        return round(self.evidence.suppression_db, 1)

    @property
    def render_correlation(self) -> float:
        """The larger of the processed and the raw capture's correlation: the one the gate weighed."""
        return round(max(self.evidence.correlation, self.evidence.raw_correlation), 3)


def decide(evidence: GateEvidence, settings: FrontEndSettings) -> GateVerdict:
    """The gate's verdict on ``evidence`` under ``settings``' thresholds (pure; reasons in the module docstring)."""
    if not evidence.bot_speaking:
        return GateVerdict(accepted=True, reason="render_idle", confidence=1.0, evidence=evidence)
    reason = _echo_reason(evidence, settings)
    confidence = evidence.confidence
    if reason is None and not evidence.echo_cancelling:
        # Correlation alone misses reverberant echo; say so in the confidence.
        confidence *= 0.5
    return GateVerdict(
        accepted=reason is None,
        reason=reason or "user_speech_over_playback",
        confidence=round(confidence, 3),
        evidence=evidence,
    )


def _uncancelled(*, cancelling: bool, suppression_db: float, settings: FrontEndSettings) -> bool:
    # Coupled, but the APM removed little over the onset window: an echo it did not cancel (a
    # changed echo path) reaches the residual reshaped by noise suppression and gain control,
    # and the raw capture is the better witness of it.
    return cancelling and suppression_db < settings.gate_dominated_suppression_db


def _echo_reason(e: GateEvidence, s: FrontEndSettings) -> str | None:
    """Why an onset during playback is taken for echo, or None when it counts as the user."""
    margin = s.gate_drift_margin_db if e.confidence < 1.0 else 0.0
    suppression = e.suppression_db
    if e.residual_dbfs < s.gate_min_residual_dbfs:
        return "residual_too_quiet"
    if e.cancelling and suppression > s.gate_max_suppression_db - margin:
        return "echo_suppressed"
    if e.echo_suspected:
        return "echo_suspected"
    # A residual quieter than the render has to correlate less with it to count as a voice: a
    # user talking over the bot is about as loud as the bot and does not follow its waveform.
    # That level comparison means something only where the render reaches the capture at a
    # known gain: after cancellation (coupled) or with nothing cancelled at all (no AEC). For a
    # speaker whose raw capture has never followed the render, a mic level under the bot's is
    # no evidence of echo, and a voice scores up to ~0.6 against the bot's TTS voice at some
    # lag (module docstring of coupling); the coupling checks are that speaker's echo witness.
    quiet_below = e.render_dbfs - s.gate_quiet_residual_db
    quiet = (e.coupled or not e.echo_cancelling) and e.residual_dbfs < quiet_below
    if e.correlation > (s.gate_quiet_max_correlation if quiet else s.gate_max_correlation):
        return "render_correlated"
    # The raw capture's own level says how loud the echo came in: gain control may have raised
    # an uncancelled echo well above it in the residual (measured with a core busy: raw 17 dB
    # under the render, the residual 12 dB over the raw, correlation 0.63, taken for a person).
    raw_limit = s.gate_quiet_max_correlation if e.raw_dbfs < quiet_below else s.gate_max_correlation
    uncancelled = _uncancelled(cancelling=e.cancelling, suppression_db=suppression, settings=s)
    if uncancelled and e.raw_correlation > raw_limit:
        # Not ``render_correlated``: that also tells the coupling this mic carries the bot, and
        # an onset the AEC let through is no new evidence of that.
        return "echo_uncancelled"
    if (
        e.cancelling
        and suppression > s.gate_dominated_suppression_db - margin
        and e.residual_dbfs < e.render_dbfs - s.gate_residual_below_render_db
    ):
        # The APM removed a lot and what is left is far below what the bot is playing: residual
        # echo after cancellation, not a voice talking over the bot. Measured through the
        # emulator: leaked echo onsets had 9.6-12 dB suppression and a residual 14-25 dB under the
        # render; users talking over the bot had ~3 dB suppression and a residual above it.
        return "echo_dominated"
    return None


class EchoGate:
    """Per-speaker evidence history and the onset decision.

    Observing a chunk only copies samples into rings (it runs for every 10 ms chunk of every
    speaker); levels and correlation are computed when an onset is evaluated. The render level per
    chunk comes precomputed with the render chunk (the front end computes it once for all speakers).

    Args:
        settings: gate thresholds.
        chunk_samples: samples per chunk.
        rate: internal sample rate.
    """

    def __init__(self, settings: FrontEndSettings, *, chunk_samples: int, rate: int) -> None:
        self._s = settings
        chunk_s = chunk_samples / rate
        self._onset_n = max(2, round(settings.gate_onset_window_ms / 1000.0 / chunk_s))
        self._render_n = max(self._onset_n, round(settings.gate_render_window_ms / 1000.0 / chunk_s))
        self._chunk = chunk_samples
        self._raw = np.zeros(self._onset_n * chunk_samples, dtype=np.int16)
        self._res = np.zeros(self._onset_n * chunk_samples, dtype=np.int16)
        self._ren = np.zeros(self._render_n * chunk_samples, dtype=np.int16)
        self._ren_ms = np.zeros(self._render_n)
        self._i = 0
        self._last_active = -(10**9)
        self._render_active_ms = 10.0 ** (settings.gate_render_active_dbfs / 10.0)

    def observe(self, raw: Samples, processed: Samples, render: Chunk | None) -> None:
        """Record one chunk: capture before APM, after APM, and the render chunk fed with it."""
        c = self._chunk
        j = (self._i % self._onset_n) * c
        self._raw[j : j + c] = raw
        self._res[j : j + c] = processed
        k = self._i % self._render_n
        if render is None:
            self._ren[k * c : (k + 1) * c] = 0
            self._ren_ms[k] = 0.0
        else:
            self._ren[k * c : (k + 1) * c] = render.samples
            level = render.mean_square if render.mean_square is not None else mean_square(render.samples)
            self._ren_ms[k] = level
            if level >= self._render_active_ms:
                self._last_active = self._i
        self._i += 1

    @property
    def bot_speaking(self) -> bool:
        """Any render chunk above the activity level within the gate window."""
        return self._i - self._last_active <= self._render_n

    def _ordered(self, ring: Samples, chunks: int) -> npt.NDArray[np.float64]:
        cut = (self._i % chunks) * self._chunk
        return np.concatenate((ring[cut:], ring[:cut])).astype(np.float64)

    def evaluate(
        self, *, confidence: float, echo_cancelling: bool, coupled: bool = True, echo_suspected: bool = False
    ) -> GateVerdict:
        """Decide on an onset now: :func:`decide` on :meth:`gather`'s evidence (same arguments)."""
        return decide(
            self.gather(
                confidence=confidence,
                echo_cancelling=echo_cancelling,
                coupled=coupled,
                echo_suspected=echo_suspected,
            ),
            self._s,
        )

    def gather(
        self, *, confidence: float, echo_cancelling: bool, coupled: bool = True, echo_suspected: bool = False
    ) -> GateEvidence:
        """Measure the evidence on an onset now.

        Args:
            confidence: 1.0 normally; lower while the reference drifts or the APM re-converges.
            echo_cancelling: the APM cancels echo (False for ``disabled``); without it the
                suppression test says nothing and only correlation remains.
            coupled: the APM gets this speaker's render reference (:mod:`~openab_voice.audio.coupling`).
                When it does not, nothing was cancelled: the suppression tests say nothing, and the raw
                capture (untouched by noise suppression and gain control) is the better echo witness,
                so the correlation is the larger of raw and processed.
            echo_suspected: recent raw capture of this (not yet coupled) speaker followed the render:
                every onset during playback is taken for echo until coupling decides.
        """
        raw_db = dbfs(mean_square(self._raw))
        res_db = dbfs(mean_square(self._res))
        speaking = self.bot_speaking
        correlation = 0.0
        raw_correlation = 0.0  # of the raw capture, where it is the better witness
        if speaking:
            render = self._ordered(self._ren, self._render_n)
            correlation = peak_normalized_correlation(self._ordered(self._res, self._onset_n), render)
            uncancelled = _uncancelled(
                cancelling=echo_cancelling and coupled, suppression_db=raw_db - res_db, settings=self._s
            )
            if not coupled or uncancelled:
                raw_correlation = peak_normalized_correlation(self._ordered(self._raw, self._onset_n), render)
            if not coupled:
                correlation = max(correlation, raw_correlation)
        return GateEvidence(
            bot_speaking=speaking,
            confidence=confidence,
            echo_cancelling=echo_cancelling,
            coupled=coupled,
            echo_suspected=echo_suspected,
            raw_dbfs=raw_db,
            residual_dbfs=res_db,
            render_dbfs=dbfs(float(self._ren_ms.mean())),
            correlation=correlation,
            raw_correlation=raw_correlation,
        )


def peak_normalized_correlation(capture: npt.NDArray[np.float64], render: npt.NDArray[np.float64]) -> float:
    """Peak |normalised cross-correlation| of ``capture`` with ``render`` at lags >= 0.

    Both end at the same moment; ``render`` is longer. Echo follows the render it came from, so
    capture sample ``t`` is compared with render sample ``t - k`` for every lag ``k`` the render
    history covers. Echo (direct path) scores high; another voice scores low (measured on Piper
    speech: echo 0.4-0.97 with up to 300 ms RT60, user speech 0.1-0.6 against the same voice).
    """
    return peak_correlation(capture, render)[0]


def peak_correlation(capture: npt.NDArray[np.float64], render: npt.NDArray[np.float64]) -> tuple[float, int]:
    """:func:`peak_normalized_correlation` and the lag of the peak, in samples (how far the capture
    trails the render): an echo path keeps its lag from one window to the next, a voice does not."""
    n, m = capture.size, render.size
    cap_energy = float(np.dot(capture, capture))
    if n == 0 or m < n or cap_energy <= 0.0:
        return 0.0, 0
    size = 1 << (n + m - 1).bit_length()
    spectrum = np.fft.rfft(render, size) * np.conj(np.fft.rfft(capture, size))
    # full[j] = sum_t render[j + t] * capture[t], for render windows starting at j.
    full = np.fft.irfft(spectrum, size)[: m - n + 1]
    cumulative = np.concatenate(([0.0], np.cumsum(render * render)))
    window_energy = cumulative[n:] - cumulative[: m - n + 1]
    valid = window_energy > cap_energy * 1e-6
    if not valid.any():
        return 0.0, 0
    corr = np.zeros(full.size)
    corr[valid] = np.abs(full[valid]) / np.sqrt(window_energy[valid] * cap_energy)
    j = int(corr.argmax())
    return float(min(1.0, corr[j])), (m - n) - j
