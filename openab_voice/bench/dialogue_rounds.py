"""The dialogue benchmark's rounds, and how each measures what a listener hears at the emulator.

* **barge-in**: the speaker talks over the answer; ``barge_in_ms`` runs from the speech onset in the
  speaker's audio to the bot's last audio packet at the emulator after it.
* **echo**: only the echo of the bot's answer comes back; every ``InterruptionDetected`` is an
  ``echo_false_interrupts``.

* **backchannel**: a backchannel ("okay, got it", "yeah", ...) over the answer, then a "wait,
  stop please" over what follows. A ``backchannel_cutoffs`` when the backchannel was answered as a
  turn, or it stopped the answer and the answer never resumed; a ``real_interruptions_missed`` when
  the stop did not interrupt the bot, or the answer resumed after it (docs/adr/0019-backchannels.md).

``eou_to_first_audio_ms``: from the end of the question's speech as sent to the bot's first audio
packet at the emulator. Method in detail: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import asyncio

from openab_voice.audio.events import SpeechStarted
from openab_voice.bench.dialogue_clips import Clips
from openab_voice.bench.dialogue_report import Samples
from openab_voice.bench.dialogue_session import POLL_S, USER, WAIT_S, DialogueSession
from openab_voice.clock import wait_for
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    ProviderToldHeard,
    ProviderTruncated,
    TurnAccepted,
)
from openab_voice.providers.tts import TextToSpeech
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal
from openab_voice.testing.emulator import EchoPath, prepare_speech

_SILENCE_FRAME_S = 0.02
_INTERRUPT_AFTER_S = 1.0  # after the bot's first audio reached the emulator
_PAUSE_S = 0.15  # no bot audio this long: the bot paused (packets come every 20 ms while it speaks)
_CONCLUDE_S = 5.0  # after the interruption was said, its transcript (or discard) comes within this
# One per trial, in turn. The short ones (~0.3 s of speech) may fall inside the echo canceller's
# double-talk suppression and not be heard at all; the longer ones (~1 s) are.
BACKCHANNELS = ("Okay, got it.", "Yeah.", "Yeah, that's right.", "Mm-hmm.")
_RESUMES = ("backchannel", "false_interruption")  # causes of a cut answer going on
_RESUME_WITHIN_S = 3.0  # after the backchannel's transcript, the answer goes on within this


async def ask(s: DialogueSession, clips: Clips, samples: Samples) -> float:
    """Say the question; returns the arrival of the answer's first packet (and records the wait)."""
    speaker = s.h.emulator.speaker(USER)
    asked = s.clock.monotonic()
    report = await speaker.say(clips.question)
    ended = s.clock.monotonic() - report.silence_frames * _SILENCE_FRAME_S - clips.question_tail_s
    first = await s.first_audio_after(asked)
    samples.heard_eou.append((first - ended) * 1000.0)
    return first


async def barge_in_round(s: DialogueSession, clips: Clips, samples: Samples) -> None:
    speaker = s.h.emulator.speaker(USER)
    sink = s.h.emulator.bot_audio
    before_ms = sink.ms
    first = await ask(s, clips, samples)
    await s.clock.sleep(first + _INTERRUPT_AFTER_S - s.clock.monotonic())
    mark = len(s.events)
    said = s.clock.monotonic()
    onset = said + clips.stop_onset_s
    # The interrupted answer ends at the last packet before the first pause in the bot's audio after
    # the onset. Its reply to "stop" can only begin once the stop was said and its end confirmed
    # (prepared ahead, it may start at once then), so that pause always comes first; an answer that
    # was never cut runs on, and its own end is then the figure.
    answer_end = asyncio.ensure_future(_audio_pause_after(s, onset, mark))
    heard_ms: list[float] = []  # the answer's audio the listener got, when its cut was detected
    answer_end.add_done_callback(lambda _: heard_ms.append(sink.ms - before_ms))
    try:
        await speaker.say(clips.stop)

        def concluded() -> bool:
            return s.user_idle() and bool(s.of(TranscriptFinal, mark) or s.of(TranscriptDiscarded, mark))

        if not await s.poll(concluded, _CONCLUDE_S):
            await s.settle()
        last = await wait_for(s.clock, WAIT_S, answer_end)
    finally:
        answer_end.cancel()
    if not s.of(InterruptionDetected, mark):
        samples.missed_barge_ins += 1
    if last is not None and last > onset:
        samples.barge_in.append((last - onset) * 1000.0)
        _stages(s, mark, onset, last, samples.stages)
    truncated = s.of(ProviderTruncated, mark)
    if truncated and heard_ms:
        samples.audio_end_error.append(abs(truncated[0].audio_end_ms - heard_ms[0]))
    told = s.of(ProviderToldHeard, mark)  # the live engine's note of what was heard
    if told and heard_ms:
        samples.heard_position_error.append(abs(told[0].played_ms - heard_ms[0]))
    await s.settle()  # the reply to "stop", if its words were understood


async def _audio_pause_after(s: DialogueSession, onset: float, mark: int) -> float | None:
    """The arrival of the bot's last audio packet before its first pause (``_PAUSE_S`` without audio)
    after ``onset`` once the answer was cut or ended (a gap between two sentences is no end); None
    when the bot sent nothing after the onset."""
    sink = s.h.emulator.bot_audio

    def over() -> bool:
        return bool(s.of(InterruptionDetected, mark) or s.of(BotUtteranceFinished, mark))

    while True:
        last, now = sink.last_audio_at, s.clock.monotonic()
        if last is None or last <= onset:
            if now - onset >= _PAUSE_S and over():
                return None
        elif now - last >= _PAUSE_S and over():
            return last
        await s.clock.sleep(POLL_S)


def _stages(s: DialogueSession, mark: int, onset: float, last: float, out: dict[str, list[float]]) -> None:
    """Where this round's barge-in time went, from its first accepted onset and interruption.

    ``onset_to_detected_audio``: speech the front end did not flag (APM suppression, VAD onset);
    ``detection_delay``: from that audio to ``SpeechStarted`` (jitter buffer, front-end batch, VAD
    window); ``engine``: to ``InterruptionDetected``; ``output_stop``: to the last bot packet.
    """
    started = [e for e in s.of(SpeechStarted, mark) if e.speaker_id == str(USER)]
    interrupted = s.of(InterruptionDetected, mark)
    if not started or not interrupted:
        return
    first, cut = started[0], interrupted[0]
    stages = {
        "onset_to_detected_audio_ms": first.audio_time - onset,
        "detection_delay_ms": first.at - first.audio_time,
        "engine_ms": cut.at - first.at,
        "output_stop_ms": last - cut.at,
    }
    for name, seconds in stages.items():
        out.setdefault(name, []).append(seconds * 1000.0)


async def echo_round(s: DialogueSession, clips: Clips, echo: EchoPath, samples: Samples) -> None:
    speaker = s.h.emulator.speaker(USER)
    mark = len(s.events)
    await ask(s, clips, samples)
    # Margin for the gaps between sentences (each one synthesized when its turn comes).
    await speaker.say_echo_only(clips.answer_s + 0.5, echo)
    await s.until(lambda: bool(s.of(BotUtteranceFinished, mark)), "the answer did not finish")
    await s.settle()
    samples.echo_false_interrupts.append(len(s.of(InterruptionDetected, mark)))


async def backchannel_clips(tts: TextToSpeech) -> tuple[bytes, ...]:
    """:data:`BACKCHANNELS` in the bot's own voice, encoded ahead as the other clips are."""
    clips = tuple([b"".join([c async for c in tts.synthesize(text)]) for text in BACKCHANNELS])
    prepare_speech(*clips)
    return clips


async def backchannel_round(s: DialogueSession, clips: Clips, backchannel: bytes, samples: Samples) -> None:
    """A backchannel over the answer, then a real interruption over what follows (asked again when
    the backchannel ended the answer). Its questions' waits are not this round's figures."""
    speaker = s.h.emulator.speaker(USER)
    sink = s.h.emulator.bot_audio
    first = await ask(s, clips, Samples())
    await s.clock.sleep(first + _INTERRUPT_AFTER_S - s.clock.monotonic())
    mark = len(s.events)
    onset = s.clock.monotonic()
    paused = asyncio.ensure_future(_audio_pause_after(s, onset, mark))
    try:
        samples.backchannels += 1
        await speaker.say(backchannel)
        said = s.clock.monotonic()
        await s.poll(lambda: _concluded(s, mark), _CONCLUDE_S)
        cut = bool(s.of(InterruptionDetected, mark))

        def went_on() -> bool:
            return not cut or any(e.cause in _RESUMES for e in s.of(DialogueStateChanged, mark))

        def sounding() -> bool:  # a cut answer sounds again once it resumed
            return went_on() and (not cut or sink.first_audio_after(said) is not None)

        await s.poll(sounding, _RESUME_WITHIN_S)
        answered = any(e.speaker_id == str(USER) for e in s.of(TurnAccepted, mark))
        heard = " | ".join(e.text for e in s.of(TranscriptFinal, mark) if e.speaker_id == str(USER))
        if answered or not went_on():
            samples.backchannel_cutoffs += 1
            heard += " (cut off)"
        samples.backchannel_heard.append(heard)
        last = await wait_for(s.clock, WAIT_S, paused) if cut else None
    finally:
        paused.cancel()
    if cut:
        samples.backchannel_barge_ins += 1
        resumed = sink.first_audio_after(last) if last is not None else None
        if last is not None and resumed is not None and not answered:
            samples.backchannel_gap.append((resumed - last) * 1000.0)
    if s.state not in ("thinking", "speaking"):  # the answer is over: ask again, to be interrupted
        await s.settle()
        first = await ask(s, clips, Samples())
        await s.clock.sleep(first + _INTERRUPT_AFTER_S - s.clock.monotonic())
    else:
        await s.clock.sleep(_INTERRUPT_AFTER_S)
    mark = len(s.events)
    samples.real_interruptions += 1
    await speaker.say(clips.stop)
    await s.poll(lambda: _concluded(s, mark), _CONCLUDE_S)
    await s.settle()  # a resumed answer (the stop taken for a false alarm) plays out first
    resumed_after = any(e.cause in _RESUMES for e in s.of(DialogueStateChanged, mark))
    if not s.of(InterruptionDetected, mark) or resumed_after:
        samples.real_interruptions_missed += 1


def _concluded(s: DialogueSession, mark: int) -> bool:
    """The user is done and their speech since ``mark`` was transcribed (or discarded)."""
    return s.user_idle() and bool(s.of(TranscriptFinal, mark) or s.of(TranscriptDiscarded, mark))
