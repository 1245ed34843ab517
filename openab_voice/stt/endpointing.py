"""The end-of-turn stage's rules: when a pause is judged, and what a verdict does to the utterance.

Without it a turn ends on silence alone: the VAD's minimum silence (``OPENAB_VAD_MIN_SILENCE_MS``)
after the last word. With a detector (:class:`~openab_voice.providers.turn.TurnDetector`, Smart
Turn v3.2), a pause is judged once it has lasted ``decide_after_ms`` and its speculative final has
been decoded (ADR 0012): the detector scores the utterance's audio up to now, and the pause's
transcript is read for a last word no sentence ends on ("the", "and", "my" ...).

* **complete** (P(complete) at or above ``threshold`` and the words do not continue): the utterance
  ends at the pause now; its speculative final is the final, and the answer prepared on it goes out.
* **incomplete**: the utterance stays open past the VAD's end of speech, until the speaker talks
  again (the same utterance goes on) or the pause reaches ``max_silence_ms``.
* **no verdict** (the speculative final was doubtful or late, the model failed): the VAD's end of
  speech ends the utterance, as without a detector.

Measured, and why the words are read too: docs/adr/0021-semantic-end-of-turn.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from openab_voice.errors import ConfigError
from openab_voice.settings.defaults import default_of
from openab_voice.settings.voice import VoiceSettings
from openab_voice.stt.events import TurnDecided

if TYPE_CHECKING:
    from openab_voice.stt.utterances import Utterance

__all__ = ["EndOfTurnSettings", "TurnCheck", "is_complete", "text_continues"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndOfTurnSettings:
    """The end-of-turn stage's tunables.

    Attributes:
        decide_after_ms: a pause is judged once it has lasted this long.
        max_silence_ms: a pause judged incomplete ends the utterance once it has lasted this long.
        threshold: the detector's P(complete) at or above which a pause can end the turn.
        read_words: also read the pause's transcript (a last word no sentence ends on is incomplete).
        vocative: with ``read_words``, says whether the pause's transcript only addresses the bot
            (its wake name alone: "Jarvis, ⟨pause⟩ what is ..."), which is no turn yet; set per
            voice session, which knows the name (None: no name to read).
    """

    decide_after_ms: int = default_of(VoiceSettings, "turn_decide_after_ms")
    max_silence_ms: int = default_of(VoiceSettings, "turn_max_silence_ms")
    threshold: float = default_of(VoiceSettings, "turn_threshold")
    read_words: bool = True
    vocative: Callable[[str], bool] | None = None

    def continues(self, text: str) -> bool:
        """The pause's words say the speaker is mid-turn (when the words are read)."""
        if not self.read_words:
            return False
        return text_continues(text) or (self.vocative is not None and self.vocative(text))

    def __post_init__(self) -> None:
        if not 0 < self.decide_after_ms < self.max_silence_ms:
            raise ConfigError(
                "the end-of-turn decision must come before the maximum silence", setting="turn_max_silence_ms"
            )
        if not 0.0 < self.threshold < 1.0:
            raise ConfigError("the end-of-turn threshold must be in (0, 1)", setting="turn_threshold")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCheck:
    """One pause to judge: run the detector on ``samples``, then
    :meth:`~openab_voice.stt.redecode.RedecodeCore.turn_judged`."""

    speaker_id: str
    utterance_id: str
    samples: npt.NDArray[np.int16]
    quiet_since: float  # the pause judged (the utterance's quiet run)
    pause_ms: float
    text: str  # the pause's speculative final
    _utterance: Utterance = field(repr=False)


# Words an English sentence does not end on (articles, possessive determiners, conjunctions), and
# prepositions that end one only in a question ("What is it for?"), so only without a question mark.
# Not "in", "on", "to", "like": particles and infinitives end plain sentences ("Turn it on.",
# "I'd love to.", "Whatever you like.").
_NEVER_LAST = frozenset(
    ["a", "an", "the", "my", "your", "our", "their", "its", "and", "or", "but", "nor", "because"]
    + ["although", "whereas", "unless", "if"]
)
_NOT_LAST_UNLESS_ASKED = frozenset(["of", "for", "with", "about", "from", "at", "into", "than"])
_WORD = re.compile(r"[a-z']+")


def text_continues(text: str) -> bool:
    """The transcript stops on a word no sentence ends on: the speaker is mid-sentence."""
    words = _WORD.findall(text.lower())
    if not words:
        return False
    last = words[-1]
    if last in _NEVER_LAST:
        return True
    return last in _NOT_LAST_UNLESS_ASKED and not text.rstrip().endswith("?")


def is_complete(probability: float | None, text: str, settings: EndOfTurnSettings) -> bool:
    """The verdict on a pause: the model says done and (when read) the words do not continue."""
    if probability is None or probability < settings.threshold:
        return False
    return not settings.continues(text)


class EndOfTurnStage:
    """Which pause of an utterance is due for judgement, and the silence a held utterance may last.

    Args:
        settings: the tunables.
        rate: the utterance audio's sample rate.
        window_s: the detector looks at this much of the most recent audio.
    """

    def __init__(self, settings: EndOfTurnSettings, *, rate: int, window_s: float) -> None:
        self.settings = settings
        self._window = int(window_s * rate)

    def due(self, utt: Utterance) -> TurnCheck | None:
        """The check to run for ``utt``'s current pause, once (None: not due, or already asked).

        Due once the pause has lasted ``decide_after_ms`` and its speculative final is decoded (it is
        the text read, and the final should the pause end the turn)."""
        quiet = utt.quiet_since
        if quiet is None or not utt.speculated or utt.spec is None:
            return None
        pause_ms = (utt.audio_end - quiet) * 1000.0
        if utt.turn_quiet == quiet or pause_ms < self.settings.decide_after_ms:
            return None
        utt.turn_quiet, utt.turn_pending, utt.verdict = quiet, True, None
        samples = np.concatenate(utt.chunks)[-self._window :]
        return TurnCheck(
            speaker_id=utt.speaker_id,
            utterance_id=utt.id,
            samples=samples,
            quiet_since=quiet,
            pause_ms=pause_ms,
            text=utt.spec.text,
            _utterance=utt,
        )

    def holds(self, utt: Utterance) -> bool:
        """At the VAD's end of speech: the utterance stays open, because its pause is still to be
        judged (its speculative final is being decoded, or the model runs) or was judged incomplete.
        Not when no verdict can come: the pause's first pass was doubtful, or the model failed."""
        quiet = utt.quiet_since
        if quiet is None:
            return False
        if utt.turn_quiet == quiet:
            return utt.turn_pending or utt.verdict is False
        return not (utt.spec_doubtful and utt.spec_quiet == quiet)

    def ends_held(self, utt: Utterance) -> bool:
        """A held utterance ends: its pause reached the maximum silence, or no verdict can come."""
        quiet = utt.quiet_since
        if quiet is None:
            return False  # louder frames the VAD has not called speech (yet)
        over = (utt.audio_end - quiet) * 1000.0 >= self.settings.max_silence_ms
        return over or not self.holds(utt)

    def verdict(
        self,
        check: TurnCheck,
        result: float | BaseException,
        check_ms: float,
        *,
        at: float,
        session_id: str | None,
    ) -> TurnDecided:
        """The judgement of ``check`` from the detector's P(complete) (or the exception it raised:
        no probability, not complete)."""
        probability = None if isinstance(result, BaseException) else result
        complete = is_complete(probability, check.text, self.settings)
        utt = check._utterance
        if utt.turn_quiet == check.quiet_since:  # the answer for the utterance's latest check
            utt.turn_pending = False
            utt.verdict = complete if probability is not None else None
        return TurnDecided(
            at=at,
            session_id=session_id,
            speaker_id=check.speaker_id,
            utterance_id=check.utterance_id,
            complete=complete,
            probability=probability,
            text_continues=self.settings.continues(check.text),
            pause_ms=check.pause_ms,
            check_ms=check_ms,
        )

    @staticmethod
    def current(utt: Utterance, check: TurnCheck, open_now: Utterance | None) -> bool:
        """``check``'s verdict still applies: its utterance is open and its pause goes on."""
        return open_now is utt and utt.quiet_since == check.quiet_since

    def deadline(self, utt: Utterance) -> float | None:
        """When a held utterance's pause reaches the maximum silence (None: it is not held). Frames
        usually say so first; a client that stops sending (Discord's silence) sends none."""
        if not utt.holding or utt.quiet_since is None:
            return None
        return utt.quiet_since + self.settings.max_silence_ms / 1000.0
