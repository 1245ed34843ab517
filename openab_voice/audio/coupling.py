"""Echo coupling: does this speaker's microphone pick up the bot at all?

On Discord every speaker arrives as a separate stream, and most clients cancel echo themselves (or the
person wears headphones): their stream never contains the bot. Feeding such a stream to WebRTC AEC3
together with the bot's playback does harm: with a loud render and no converged echo path, AEC3's
suppressor treats the first ~0.7-0.9 s of a person talking over the bot as probable echo and removes
it (measured through the emulator: barge-in ~1,000 ms with the reference fed, ~140 ms without), so
interruptions come late and their first words are lost.

So the render reference reaches a speaker's APM only once that speaker's *raw* capture has been seen
to follow the render: while the bot plays, the raw capture is cross-correlated with the recent render
(lags 0 .. the render window) every ``check_ms``; ``evidence`` windows out of the last ``of`` above
``correlation`` mark the speaker as coupled, for the rest of the session (echo paths do not vanish).
Echo scores high (0.4-0.97 with reverb, mostly above 0.8); a person's own voice scores 0.1-0.6 even
against the same TTS voice, and a single window is never enough. Until a speaker is coupled the echo
gate still judges every onset during playback (correlation with the render), so an echo-only stream
that has not been recognised yet cannot interrupt either.
"""

from __future__ import annotations

import collections

import numpy as np

from openab_voice.audio.echo_gate import dbfs, mean_square, peak_normalized_correlation
from openab_voice.audio.resample import Chunk, Samples


class EchoCoupling:
    """Per-speaker evidence that the raw capture carries the bot's playback.

    Args:
        chunk_samples: samples per 10 ms chunk.
        rate: internal sample rate.
        window_ms: raw capture compared per check.
        max_lag_ms: render history before the window (echo delay the check can find).
        check_ms: how often a check runs while the bot plays and the capture is not silent.
        correlation / evidence / of: ``evidence`` checks out of the last ``of`` above ``correlation``.
        floor_dbfs: quieter raw capture is no evidence either way.
        converge_ms: after coupling, AEC3 needs this long to converge on the reference it starts
            getting; onsets meanwhile are still suspected echo.
        always: couple from the start (the reference is always fed, as before this detector).
    """

    def __init__(
        self,
        *,
        chunk_samples: int,
        rate: int,
        window_ms: int = 200,
        max_lag_ms: int = 400,
        check_ms: int = 50,
        correlation: float = 0.7,
        evidence: int = 2,
        of: int = 20,
        floor_dbfs: float = -55.0,
        converge_ms: int = 1000,
        always: bool = False,
    ) -> None:
        self._chunk = chunk_samples
        chunk_ms = 1000.0 * chunk_samples / rate
        self._window_n = max(1, round(window_ms / chunk_ms))
        self._render_n = self._window_n + max(1, round(max_lag_ms / chunk_ms))
        self._check_n = max(1, round(check_ms / chunk_ms))
        self._threshold = correlation
        self._evidence = evidence
        self._floor_ms = 10.0 ** (floor_dbfs / 10.0)
        self._raw: collections.deque[Samples] = collections.deque(maxlen=self._window_n)
        self._ren: collections.deque[Samples] = collections.deque(maxlen=self._render_n)
        self._silent = np.zeros(chunk_samples, dtype=np.int16)
        self._recent: collections.deque[bool] = collections.deque(maxlen=of)
        self._since_check = 0
        self._rendered = 0  # chunks with an active render in the window
        self._converge_n = max(0, round(converge_ms / chunk_ms))
        self._since_coupled = self._converge_n
        self.coupled = always
        self.last_correlation: float | None = None

    def observe(self, raw: Samples, render: Chunk | None) -> bool:
        """Record one capture chunk and the render chunk paired with it.

        Returns:
            True exactly once: when this chunk made the speaker coupled.
        """
        self._raw.append(raw)
        self._ren.append(render.samples if render is not None else self._silent)
        self._rendered = self._rendered + 1 if render is not None else 0
        if self.coupled:
            self._since_coupled += 1
            return False
        self._since_check += 1
        if self._since_check < self._check_n or self._rendered < self._window_n:
            return False
        self._since_check = 0
        window = np.concatenate(self._raw)
        if mean_square(window) < self._floor_ms:
            return False  # silence (or a muted mic): says nothing about the echo path
        history = np.concatenate(self._ren).astype(np.float64)
        corr = peak_normalized_correlation(window.astype(np.float64), history)
        self.last_correlation = round(corr, 3)
        self._recent.append(corr >= self._threshold)
        return self._decide()

    def note_echo(self) -> bool:
        """The echo gate found an onset of this speaker following the render: one more piece of evidence.

        Returns:
            True when it made the speaker coupled.
        """
        if self.coupled:
            return False
        self._recent.append(True)
        return self._decide()

    def _decide(self) -> bool:
        if sum(self._recent) < self._evidence:
            return False
        self.coupled = True
        self._since_coupled = 0
        return True

    @property
    def suspected(self) -> bool:
        """Onsets are probably echo: a recent check found the raw capture following the render but the
        speaker is not coupled yet, or it was coupled so recently that AEC3 has not converged."""
        if self.coupled:
            return self._since_coupled < self._converge_n
        return any(self._recent)

    @property
    def raw_dbfs(self) -> float:
        """Level of the raw window (for the coupling event)."""
        return round(dbfs(mean_square(np.concatenate(self._raw))), 1) if self._raw else -100.0
