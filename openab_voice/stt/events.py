"""Transcript events, whatever the STT provider: per speaker and utterance, any number of
:class:`TranscriptPartial` (``stable=False`` for a raw hypothesis, ``stable=True`` once the stability
filter agrees), then exactly one :class:`TranscriptFinal` or :class:`TranscriptDiscarded`; a final
announced early is :class:`TranscriptSpeculative` (taken back by :class:`SpeculationWithdrawn`), and
:class:`TranscriptionBacklog` says decoding fell behind."""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.bus.events import Event, sanitize


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptPartial(Event):
    speaker_id: str
    utterance_id: str
    text: str
    stable: bool
    audio_start: float  # monotonic time of the utterance's first speech sample
    audio_end: float  # monotonic time up to which audio was decoded
    stage: str = "stt"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", sanitize(self.text))


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptFinal(Event):
    speaker_id: str
    utterance_id: str
    text: str
    audio_start: float
    audio_end: float  # end of speech
    partials: int
    confidence: float | None = None
    stage: str = "stt"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", sanitize(self.text))


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptSpeculative(Event):
    """What the final of an utterance still open will be if its speaker says nothing more.

    Published when a speculative final decode (run inside the utterance's first quiet stretch, before
    the VAD has waited its minimum silence) passed the same checks as a final. Exactly this text
    becomes the ``TranscriptFinal`` unless speech follows, in which case a
    :class:`SpeculationWithdrawn` comes first. The conversation may prepare its answer on it
    (preemptive generation); nothing may be said or done on it alone.
    """

    speaker_id: str
    utterance_id: str
    text: str
    audio_start: float
    audio_end: float  # the audio the decode saw ends here
    stage: str = "stt"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", sanitize(self.text))


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculationWithdrawn(Event):
    """The speaker went on talking: the utterance's last :class:`TranscriptSpeculative` is void."""

    speaker_id: str
    utterance_id: str
    stage: str = "stt"


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptDiscarded(Event):
    """An utterance that produced no usable text (empty, punctuation only, low confidence)."""

    speaker_id: str
    utterance_id: str
    reason: str
    text: str = ""
    stage: str = "stt"


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptionBacklog(Event):
    """Transcription fell behind real time, or caught up again (``waiting`` 0).

    Published when the backlog starts, at most once a second while it lasts, and when it clears.

    Attributes:
        waiting: finals queued for a decode slot (utterances that ended and wait for their text).
        talking: speakers inside an utterance.
        partials_shed: partial decodes skipped so far in this session to let finals through.
        oldest_wait_ms: how long the oldest queued final has waited since its end of speech.
    """

    waiting: int
    talking: int
    partials_shed: int
    oldest_wait_ms: float
    stage: str = "stt"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDecided(Event):
    """The end-of-turn stage judged a pause in an open utterance (:mod:`openab_voice.stt.endpointing`).

    ``complete``: the utterance ended at the pause (its final follows at once). Otherwise the
    speaker is waited for up to the maximum silence, past the VAD's own end of speech.
    """

    speaker_id: str
    utterance_id: str
    complete: bool
    probability: float | None  # the model's P(complete); None when it failed
    text_continues: bool  # the pause's transcript ends on a word no sentence ends on
    pause_ms: float  # how long the pause had lasted when the check was asked
    check_ms: float  # the model run
    stage: str = "stt"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeechResumed(Event):
    """The speaker talks on after the end-of-turn stage ended their turn at a pause the VAD still
    counted as speech: a new utterance starts inside the same speech segment, so the front end sends
    no :class:`~openab_voice.audio.events.SpeechStarted` for it. For the engine it is that onset (a
    barge-in candidate when the bot already answers the turn just ended)."""

    speaker_id: str
    utterance_id: str
    audio_time: float  # where the new words begin
    stage: str = "stt"
