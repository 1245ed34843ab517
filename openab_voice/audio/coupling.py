"""Echo coupling: does this speaker's microphone pick up the bot at all?

Most Discord clients cancel echo themselves (or the person wears headphones), and feeding such a
stream to AEC3 with the bot's playback removes the start of speech over the bot. So the render
reference reaches a speaker's APM only once that speaker's *raw* capture has been seen to follow
the render: while the bot plays, every ``check_ms`` the last ``window_ms`` of raw capture is
cross-correlated with the render (lags 0 .. ``max_lag_ms``); ``evidence`` windows at or above
``hit`` whose lags agree within ``lag_tolerance_ms`` and span at least ``span_ms`` couple the
speaker for the session. Until then, and for ``converge_ms`` after, onsets may be *suspected*
(``strong``, ``suspect_ms``) and the echo gate takes them for echo.

After coupling the path is verified for every bot utterance: a lag shorter than the AEC's by more
than ``realign_ms`` is a new echo path, reported by :meth:`observe` like a coupling (fresh APM).
Measurements and history: docs/adr/0005-echo-coupling-and-onset-latency.md.
"""

from __future__ import annotations

import collections

import numpy as np

from openab_voice.audio.echo_gate import dbfs, mean_square, peak_correlation
from openab_voice.audio.resample import Chunk, Samples


class EchoCoupling:
    """Per-speaker evidence that the raw capture carries the bot's playback.

    Args:
        chunk_samples: samples per 10 ms chunk.
        rate: internal sample rate.
        window_ms: raw capture compared per check.
        max_lag_ms: render history before the window (echo delay the check can find).
        check_ms: how often a check runs while the bot plays and the capture is not silent.
        hit / strong: correlation of a window that counts as evidence / that alone raises suspicion.
        evidence / lag_tolerance_ms / span_ms / memory_ms: ``evidence`` hits within ``memory_ms``
            whose lags agree within the tolerance and whose checks span ``span_ms`` couple the speaker.
        floor_dbfs: quieter raw capture is no evidence either way.
        suspect_ms: how long a suspicion lasts.
        converge_ms: after coupling, onsets stay suspected this long while AEC3 converges.
        realign_ms: an utterance's echo lag shorter than the AEC's by more than this is a new path
            (one AEC3 block, 64 samples at 16 kHz: in the scripted scene drops of 2-4 ms did no
            harm, 6 and 15 ms leaked).
        always: couple from the start (the reference is always fed).
    """

    def __init__(
        self,
        *,
        chunk_samples: int,
        rate: int,
        window_ms: int = 200,
        max_lag_ms: int = 400,
        check_ms: int = 50,
        hit: float = 0.5,
        strong: float = 0.8,
        evidence: int = 3,
        lag_tolerance_ms: float = 1.0,
        span_ms: int = 200,
        memory_ms: int = 1000,
        floor_dbfs: float = -55.0,
        suspect_ms: int = 1000,
        converge_ms: int = 1000,
        realign_ms: float = 4.0,
        always: bool = False,
    ) -> None:
        chunk_ms = 1000.0 * chunk_samples / rate
        self._window_n = max(1, round(window_ms / chunk_ms))
        self._render_n = self._window_n + max(1, round(max_lag_ms / chunk_ms))
        self._check_n = max(1, round(check_ms / chunk_ms))
        self._hit, self._strong, self._evidence = hit, strong, evidence
        self._lag_tol = lag_tolerance_ms * rate / 1000.0
        self._span_n = round(span_ms / chunk_ms)
        self._memory_n = round(memory_ms / chunk_ms)
        self._suspect_n = round(suspect_ms / chunk_ms)
        self._converge_n = round(converge_ms / chunk_ms)
        self._realign = realign_ms * rate / 1000.0
        self._floor_ms = 10.0 ** (floor_dbfs / 10.0)
        self._raw: collections.deque[Samples] = collections.deque(maxlen=self._window_n)
        self._ren: collections.deque[Samples] = collections.deque(maxlen=self._render_n)
        self._silent = np.zeros(chunk_samples, dtype=np.int16)
        self._hits: collections.deque[tuple[int, int]] = collections.deque()  # (chunk index, lag)
        self._i = 0
        self._since_check = 0
        self._rendered = 0  # consecutive chunks with a render
        self._suspect_until = -1
        self._coupled_at: int | None = 0 if always else None
        self.last_correlation: float | None = None
        # After coupling: the lag the AEC is aligned to, and this utterance's hits and misses.
        self._path_lag: int | None = None
        self._run_hits: list[tuple[int, int]] = []
        self._run_misses = 0
        self._run_verified = False
        self._run_start = 0  # chunk index where this utterance's pairing began
        self.new_paths = 0  # shorter echo paths found after coupling (each restarts the APM)

    @property
    def coupled(self) -> bool:
        """The APM gets this speaker's render reference."""
        return self._coupled_at is not None

    @property
    def suspected(self) -> bool:
        """Onsets during playback are probably echo (see the module docstring)."""
        if self._coupled_at is not None:
            converging = self._coupled_at > 0 and self._i - self._coupled_at < self._converge_n
            return converging or (self._rendered > 0 and not self._run_verified)
        return self._i < self._suspect_until or len(self._hits) >= 2 and self._agreeing()[0] >= 2

    def observe(self, raw: Samples, render: Chunk | None) -> bool:
        """Record one capture chunk and the render chunk paired with it.

        Returns:
            True when this chunk made the speaker coupled, or (coupled already) found a shorter echo
            path: the AEC must start afresh.
        """
        self._i += 1
        self._raw.append(raw)
        self._ren.append(render.samples if render is not None else self._silent)
        self._rendered = self._rendered + 1 if render is not None else 0
        coupled = self._coupled_at is not None
        if coupled and self._rendered == 1:  # a new utterance: its echo path is verified anew
            self._run_hits, self._run_misses, self._run_verified = [], 0, False
            self._run_start = self._i
        if coupled and self._run_verified:
            return False  # verified: nothing to check until the next utterance
        self._since_check += 1
        # Coupling needs a whole window of render; verifying a coupled path starts with the render.
        if self._since_check < self._check_n or self._rendered < (1 if coupled else self._window_n):
            return False
        self._since_check = 0
        window = np.concatenate(self._raw)
        if mean_square(window) < self._floor_ms:
            return False  # silence (or a muted mic): says nothing about the echo path
        history = np.concatenate(self._ren).astype(np.float64)
        corr, lag = peak_correlation(window.astype(np.float64), history)
        self.last_correlation = round(corr, 3)
        while self._hits and self._i - self._hits[0][0] > self._memory_n:
            self._hits.popleft()
        if coupled:
            return self._verify(corr, lag)
        if corr >= self._strong:
            self._suspect_until = self._i + self._suspect_n
        if corr < self._hit:
            return False
        self._hits.append((self._i, lag))
        count, span, agreed = self._agreeing()
        if count >= self._evidence and span >= self._span_n:
            self._coupled_at = self._i
            self._path_lag = agreed
            self._run_verified = True  # this utterance's path is the one just found
            return True
        return False

    def _verify(self, corr: float, lag: int) -> bool:
        """One check of a coupled speaker's current utterance; True when it found a shorter path."""
        if corr < self._hit:
            # A miss says "no echo" only once the window holds nothing from before this utterance
            # (the last one's echo tail against the new render scores low at any lag).
            if self._i - self._run_start >= self._window_n:
                self._run_misses += 1
            if self._run_misses >= 2:
                self._run_verified = True  # no echo in this utterance (so far)
            return False
        self._run_misses = 0
        self._run_hits.append((self._i, lag))
        agreed = [i for i, other in self._run_hits if abs(other - lag) <= self._lag_tol]
        if len(agreed) < self._evidence or agreed[-1] - agreed[0] < self._span_n:
            return False  # the same evidence as the first coupling, so a voice's stray peak is none
        self._run_verified = True
        shorter = self._path_lag is not None and lag < self._path_lag - self._realign
        self._path_lag = lag
        if shorter:
            self._coupled_at = self._i  # onsets suspected while the fresh AEC converges
            self.new_paths += 1
        return shorter

    def note_echo(self) -> None:
        """The echo gate found an onset of this speaker following the render: suspect echo for a while."""
        if self._coupled_at is None:
            self._suspect_until = self._i + self._suspect_n

    def _agreeing(self) -> tuple[int, int, int | None]:
        """The largest group of recent hits at one lag: (how many, chunks between first and last,
        that lag)."""
        best: tuple[int, int, int | None] = (0, 0, None)
        for _, lag in self._hits:
            group = [i for i, other in self._hits if abs(other - lag) <= self._lag_tol]
            if (len(group), group[-1] - group[0]) > best[:2]:
                best = (len(group), group[-1] - group[0], lag)
        return best

    @property
    def raw_dbfs(self) -> float:
        """Level of the raw window (for the coupling event)."""
        return round(dbfs(mean_square(np.concatenate(self._raw))), 1) if self._raw else -100.0
