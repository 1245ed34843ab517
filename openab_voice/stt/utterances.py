"""What the transcriber keeps per speaker and per utterance, and the decodes it asks for.

Plain data: :class:`~openab_voice.stt.redecode.RedecodeCore` owns the logic that fills and
schedules it.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from openab_voice.errors import ConfigError
from openab_voice.stt.base import Hypothesis
from openab_voice.stt.stability import StabilityFilter


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriberSettings:
    """Streaming transcription tunables.

    Attributes:
        partial_interval_ms: new audio between partial decodes once something is stable.
        initial_partial_interval_ms: the same until the first stable partial (faster first result).
        stable_agreement: consecutive hypotheses whose common word prefix becomes stable.
        pre_roll_ms: audio kept from before the speech onset. Generous, because the echo gate can
            accept a barge-in a few hundred ms after it began, and the first word is often the wake name.
        min_confidence: finals below this confidence (exp of the mean token log-probability) are
            discarded; partials are not filtered (the first decodes score low even when right).
        max_no_speech_prob: finals the model judges silence above this probability are discarded,
            unless their text is confident (``no_speech_unless_confidence``).
        no_speech_unless_confidence: Whisper's own rule (``logprob_threshold`` -1: e^-1): a confident
            text is kept despite its ``no_speech_prob``. The multilingual model scores a loud first
            Chinese question 0.60-0.79 while writing it right at 0.92 (ADR 0023).
        max_utterance_s: an utterance is cut (final decode) at this length; Whisper's window is 30 s.
        max_concurrent_decodes: decodes in flight across all speakers.
        max_batch: with a provider that decodes in batches (``SttCapabilities.batch``), the decodes
            due at once (several speakers) go out as one batch of at most this many, one batch in
            flight at a time, instead of ``max_concurrent_decodes`` single decodes. 1 (the default):
            never batch. Finals (speculative ones too) go out in batches of their own, never with
            partials. Batching triples the decoder's throughput for ten utterances and lowers the
            lag with six talkers, but with ten on two cores the front end fell behind more often with
            it (ADR 0012), so it is opt-in until that is understood.
        close_timeout_s: how long :meth:`RedecodeStream.aclose` waits for decodes in flight.
        speculate_after_ms: once the VAD score has stayed below ``speculate_below`` this long inside
            an utterance (the VAD is still waiting out its minimum silence), the final decode runs
            speculatively; if the utterance then ends with no speech in between, that decode is the
            final, published the moment the VAD declares the end instead of a decode later. 0: off.
        speculate_below: the VAD score under which a frame counts as quiet for speculation.
    """

    partial_interval_ms: int = 300
    initial_partial_interval_ms: int = 200
    stable_agreement: int = 2
    pre_roll_ms: int = 800
    min_confidence: float = 0.35
    max_no_speech_prob: float = 0.6
    no_speech_unless_confidence: float = 0.368  # e^-1
    max_utterance_s: float = 30.0
    max_concurrent_decodes: int = 1
    max_batch: int = 1
    close_timeout_s: float = 5.0
    speculate_after_ms: int = 150
    speculate_below: float = 0.35

    def __post_init__(self) -> None:
        if min(self.partial_interval_ms, self.initial_partial_interval_ms) < 20:
            raise ConfigError("partial intervals must be at least 20 ms", setting="partial_interval_ms")
        if self.stable_agreement < 2 or self.max_concurrent_decodes < 1 or self.max_batch < 1:
            raise ConfigError("need stable_agreement >= 2 and a decode slot", setting="stable_agreement")
        if not 0 < self.max_utterance_s <= 30 or self.pre_roll_ms < 0:
            raise ConfigError("max_utterance_s must be in (0, 30]", setting="max_utterance_s")


@dataclass(slots=True, eq=False)
class Utterance:
    id: str
    speaker_id: str
    audio_start: float
    chunks: list[npt.NDArray[np.int16]]
    samples: int
    pre_roll: int
    audio_end: float
    stability: StabilityFilter
    decoded_at: int = 0  # speech samples (after the pre-roll) at the last partial decode
    partials: int = 0
    concluded: bool = False
    first_stable: bool = False
    quiet_since: float | None = None  # start of the current run of quiet frames
    spec_quiet: float | None = None  # the quiet run a speculative final was decoded in
    spec: Hypothesis | None = None  # its result, valid while that quiet run lasts
    spec_doubtful: bool = False  # that run's quick decode came back doubtful: a full one may follow
    spec_announced: bool = False  # a TranscriptSpeculative went out for ``spec`` (not withdrawn)
    paused_quiet: float | None = None  # the quiet run in which the capture paused (speculate at once)
    ended_at: float | None = None  # clock time the utterance ended (its final is due from then)
    turn_quiet: float | None = None  # the quiet run the end-of-turn stage was asked to judge
    turn_pending: bool = False  # that check is running
    verdict: bool | None = None  # its answer (complete?); None: none yet, or the model failed
    holding: bool = False  # the VAD ended the speech, the end-of-turn stage did not: frames go on in

    @property
    def speculated(self) -> bool:
        """A speculative final exists for the quiet run still going on (no speech since)."""
        return self.spec is not None and self.spec_quiet is not None and self.spec_quiet == self.quiet_since


@dataclass(slots=True)
class SpeakerState:
    pre_roll: collections.deque[npt.NDArray[np.int16]] = field(default_factory=collections.deque)
    pre_roll_samples: int = 0
    current: Utterance | None = None
    finishing: collections.deque[Utterance] = field(default_factory=collections.deque)
    busy: bool = False
    end_at: float | None = None  # speech ended without a silent frame following (capture stopped)
    after_turn: bool = False  # the turn ended at a pause the VAD still counts as speech


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeJob:
    """One decode to run: ``stt.transcribe(samples, final=final, quick=quick)`` then
    :meth:`RedecodeCore.complete`."""

    speaker_id: str
    utterance_id: str
    samples: npt.NDArray[np.int16]
    final: bool
    audio_end: float
    speculative: bool = False
    quick: bool = False  # a speculative final's first pass: no slow second decode
    _utterance: Utterance = field(repr=False)
