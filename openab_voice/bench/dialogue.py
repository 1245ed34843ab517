"""Dialogue benchmark: barge-in, transcript, TTS and answer latencies, and echo false interrupts,
measured end to end through the loopback Discord emulator (DAVE on).

Everything is real but the LLM: Discord protocol, receiver, audio front end (APM, VAD, echo gate),
faster-whisper ``tiny.en``, Piper and the conversation engine. The chat model is
:class:`~openab_voice.testing.chat.ScriptedChatModel` with a configurable time to first token, so
the answer (four sentences, several seconds of speech) and its timing are fixed. One human is in
the channel, so every final transcript is a turn (no wake name needed).

Two sessions, ``trials`` rounds each:

* **barge-in**: the speaker asks a question; about 1.0 s after the bot's first audio reaches the
  emulator, the speaker says "Wait, stop please." ``barge_in_ms`` runs from the speech onset in
  the speaker's audio (the time ``say`` started plus the clip's leading silence, from its 20 ms RMS
  envelope) to the arrival at the emulator of the bot's last audio packet after that onset
  (``BotAudioSink.last_audio_at``): what a listener hears, not what the engine believes. A
  barge-in the engine never detected still counts (the answer's end is then its last audio) and is
  also reported in ``diagnostics.missed_barge_ins``. This session does not resume after a false
  interruption (resuming would only repeat the answer when the words are lost).
* **echo**: the speaker asks the question, then sends only the echo of the bot's answer
  (``say_echo_only``, 80 ms, -6 dB, 40 ms reverb) for the whole answer; every
  ``InterruptionDetected`` there is an ``echo_false_interrupts``.

``eou_to_first_audio_ms`` is what a listener waits for, measured at the emulator like barge-in:
from the end of the question's speech as sent (the time ``say`` returned, less the trailing Opus
silence frames and the clip's own trailing silence, from its RMS envelope) to the arrival of the
bot's first audio packet of the answer. Nothing is subtracted: the scripted model streams a word
every 20 ms after its time to first token (``ttft_ms``, 0 by default), so the figure is the
pipeline's own (end-of-speech detection, transcription, the model's first sentence at 50 tokens/s,
synthesis, output, network), which is what the target bounds; a model's own time to first token
adds to it, less what preemptive generation hides (``--ttft-ms`` shows how much). ``preemptive``
turns preemptive generation on (the default, as in the product) or off, for a comparison.
``first_stable_partial_ms`` and ``tts_first_chunk_ms`` are the engine's own ``LatencyMeasured``
samples from both sessions; the engine's own end-of-speech-to-first-frame figure (from where its
VAD placed the end, to the first frame handed to playback; answers to "stop" included) is in
``diagnostics.engine_eou_to_first_audio_ms``. ``diagnostics`` splits barge-in into its stages (speech the front end did
not flag, detection delay, engine, output stop), gives the engine's own ``barge_in_ms`` (from the
accepted onset) and the end-of-speech-to-final time, so a missed target points at its cause. Wall
time: about 20 s per trial (one round of each kind) plus model loading, on two cores.

``engine="realtime"`` runs the same rounds on the realtime engine against the loopback realtime
server (:mod:`openab_voice.testing.realtime`) through the real ``openai`` client: it hears the
committed turn audio with the same faster-whisper, answers with the same scripted texts and speaks
them with the same Piper voice, its first audio no earlier than ``first_audio_latency_ms`` after the
request (a provider's own latency). Two figures are added: ``truncate_sent_ms`` (the engine's
barge-in onset to its ``conversation.item.truncate`` sent) and ``audio_end_error_ms`` (the
``audio_end_ms`` it sent against the answer's audio the listener actually received at the emulator
before the cut); ``tts_first_chunk_ms`` has no meaning there (the provider speaks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.bench.realtime import LoopbackRealtimeServer, realtime_providers, realtime_server
from openab_voice.bench.stats import summary
from openab_voice.bus.events import Event
from openab_voice.clock import Clock, SystemClock, wait_for
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    LatencyMeasured,
    ProviderTruncated,
    TranscriptDiscarded,
    TranscriptFinal,
)
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.errors import EmulatorError
from openab_voice.providers.speech import ChatMessage, SpeechToText, TextToSpeech
from openab_voice.providers.speech_registry import SttConfig, TtsConfig, stt_registry, tts_registry
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EchoPath, EmulatorConfig, prepare_speech
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["TARGETS", "run"]

TARGETS: dict[str, float] = {
    "barge_in_ms": 120.0,
    "first_stable_partial_ms": 700.0,
    "tts_first_chunk_ms": 250.0,
    "eou_to_first_audio_ms": 700.0,
    "echo_false_interrupts": 0,
}
REALTIME_TARGETS: dict[str, float] = {
    **{k: v for k, v in TARGETS.items() if k != "tts_first_chunk_ms"},
    "truncate_sent_ms": 20.0,
    "audio_end_error_ms": 40.0,
}
_ENGINE_METRICS = ("first_stable_partial_ms", "eou_to_first_audio_ms", "tts_first_chunk_ms")
_SILENCE_FRAME_S = 0.02

QUESTION = "What is the capital of France?"
STOP = "Wait, stop please."
_SENTENCES = (
    "The capital of France is Paris.",
    "It lies on the river Seine.",
    "About two million people live there.",
    "It is famous for the Eiffel Tower.",
)
ANSWER = " ".join(_SENTENCES)  # about 7 s of Piper speech
ACK = "Okay."

_USER = 1001
_INTERRUPT_AFTER_S = 1.0  # after the bot's first audio reached the emulator
_ONSET_DBFS = -40.0  # a 20 ms frame louder than this starts the speech
_FRAME_BYTES = 48_000 * 4 // 50  # 20 ms of 48 kHz stereo s16le
_POLL_S = 0.005
_PAUSE_S = 0.15  # no bot audio this long: the bot paused (packets come every 20 ms while it speaks)
_WAIT_S = 30.0
_QUIET_S = 0.4  # bot silent and listening this long: the round is over
_CONCLUDE_S = 5.0  # after the interruption was said, its transcript (or discard) comes within this

E = TypeVar("E", bound=Event)


@dataclass(frozen=True, slots=True)
class _Clips:
    question: bytes
    question_tail_s: float  # trailing silence of ``question``
    stop: bytes
    stop_onset_s: float  # leading silence of ``stop``
    answer_s: float  # how long the bot's answer lasts when spoken


@dataclass(slots=True)
class _Samples:
    barge_in: list[float] = field(default_factory=list)
    heard_eou: list[float] = field(default_factory=list)  # end of the question -> first answer packet
    metrics: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in _ENGINE_METRICS})
    stages: dict[str, list[float]] = field(default_factory=dict)
    engine_barge_in: list[float] = field(default_factory=list)
    speech_end_to_final: list[float] = field(default_factory=list)
    echo_false_interrupts: list[int] = field(default_factory=list)  # per echo round
    missed_barge_ins: int = 0
    truncate_sent: list[float] = field(default_factory=list)  # realtime only
    audio_end_error: list[float] = field(default_factory=list)  # realtime only


def run(
    *,
    trials: int = 5,
    ttft_ms: float = 0.0,
    seed: int = 0,
    preemptive: bool = True,
    engine: str = "cascade",
    first_audio_latency_ms: float = 300.0,
) -> dict[str, Any]:
    """Run the benchmark (real STT and TTS, fake LLM) and return a JSON-friendly report.

    Args:
        trials: rounds of each kind (barge-in, echo only).
        ttft_ms: the fake LLM's time to first token (included in ``eou_to_first_audio_ms``).
        seed: seeds the emulator (impairments, RTP start) and the echo's reverb.
        preemptive: preemptive generation on (the product's default) or off (cascade only).
        engine: ``cascade`` or ``realtime`` (on the loopback realtime server).
        first_audio_latency_ms: realtime: the server's first audio no earlier than this after the
            response was requested.

    Returns:
        ``{"barge_in_ms": {"p50", "p95", "n"}, "first_stable_partial_ms": {...},
        "eou_to_first_audio_ms": {...}, "tts_first_chunk_ms": {...}, "echo_false_interrupts",
        "trials", "ttft_ms", "preemptive_generation", "targets", "meets_targets", "diagnostics"}``.

    Raises:
        ValueError: ``trials`` < 1 or a negative ``ttft_ms``.
        ProviderUnavailable: faster-whisper or Piper is not installed.
    """
    if trials < 1 or ttft_ms < 0 or first_audio_latency_ms < 0:
        raise ValueError("need at least one trial and a non-negative ttft_ms")
    if engine not in ("cascade", "realtime"):
        raise ValueError(f"unknown engine {engine!r}")
    realtime = first_audio_latency_ms / 1000.0 if engine == "realtime" else None
    samples = asyncio.run(_bench(trials, ttft_ms / 1000.0, seed, preemptive, realtime))
    report = _report(samples, trials=trials, ttft_ms=ttft_ms, realtime=realtime is not None)
    report["preemptive_generation"] = preemptive and realtime is None
    report["engine"] = engine
    if realtime is not None:
        report["first_audio_latency_ms"] = first_audio_latency_ms
    return report


async def _bench(
    trials: int, ttft_s: float, seed: int, preemptive: bool, realtime: float | None = None
) -> _Samples:
    clock = SystemClock()
    stt = stt_registry().create("faster-whisper", SttConfig())
    tts = tts_registry().create("piper", TtsConfig())
    samples = _Samples()
    server = None if realtime is None else await realtime_server(stt, tts, first_audio_latency_s=realtime)
    try:
        clips = await _clips(tts)
        # No resume after a false interruption here: when the interruption's words are lost, the
        # rest of the answer would be said again, which only costs time (barge-in is measured first).
        async with _Session(
            clock, stt, tts, ttft_s=ttft_s, seed=seed, resume=False, preemptive=preemptive, server=server
        ) as s:
            for _ in range(trials):
                await _barge_in_round(s, clips, samples)
            s.collect(samples)
        echo = EchoPath(delay_ms=80.0, gain_db=-6.0, reverb_ms=40.0, seed=seed)
        async with _Session(
            clock, stt, tts, ttft_s=ttft_s, seed=seed + 1, resume=True, preemptive=preemptive, server=server
        ) as s:
            for _ in range(trials):
                await _echo_round(s, clips, echo, samples)
            s.collect(samples)
    finally:
        if server is not None:
            await server.aclose()
        await tts.aclose()
        stt.close()
    return samples


async def _clips(tts: TextToSpeech) -> _Clips:
    async def speak(text: str) -> bytes:
        return b"".join([chunk async for chunk in tts.synthesize(text)])

    stop = await speak(STOP)
    answer_bytes = 0
    for sentence in _SENTENCES:  # the bot synthesizes sentence by sentence too
        answer_bytes += len(await speak(sentence))
    question = await speak(QUESTION)
    prepare_speech(question, stop)  # the speaker's client encodes on its own machine
    return _Clips(
        question=question,
        question_tail_s=trailing_silence_s(question),
        stop=stop,
        stop_onset_s=leading_silence_s(stop),
        answer_s=answer_bytes / (48_000 * 4),
    )


def leading_silence_s(pcm: bytes, *, threshold_dbfs: float = _ONSET_DBFS) -> float:
    """Seconds before the first 20 ms frame of 48 kHz stereo s16le whose RMS exceeds ``threshold_dbfs``
    (the clip's length when none does)."""
    samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 4], dtype="<i2").astype(np.float64)
    frames = len(pcm) // _FRAME_BYTES
    if frames == 0:
        return len(pcm) / (48_000 * 4)
    per_frame = _FRAME_BYTES // 2
    rms = np.sqrt(np.mean(samples[: frames * per_frame].reshape(frames, per_frame) ** 2, axis=1))
    loud = np.flatnonzero(rms > 32768.0 * 10 ** (threshold_dbfs / 20))
    return (int(loud[0]) if loud.size else frames) * 0.02


def trailing_silence_s(pcm: bytes, *, threshold_dbfs: float = _ONSET_DBFS) -> float:
    """Seconds after the last 20 ms frame louder than ``threshold_dbfs`` (as :func:`leading_silence_s`)."""
    usable = pcm[: len(pcm) - len(pcm) % _FRAME_BYTES]
    frames = np.frombuffer(usable, dtype="<i2").reshape(-1, _FRAME_BYTES // 2)[::-1]
    return leading_silence_s(np.ascontiguousarray(frames).tobytes(), threshold_dbfs=threshold_dbfs)


async def _ask(s: _Session, clips: _Clips, samples: _Samples) -> float:
    """Say the question; returns the arrival of the answer's first packet (and records the wait)."""
    speaker = s.h.emulator.speaker(_USER)
    asked = s.clock.monotonic()
    report = await speaker.say(clips.question)
    ended = s.clock.monotonic() - report.silence_frames * _SILENCE_FRAME_S - clips.question_tail_s
    first = await s.first_audio_after(asked)
    samples.heard_eou.append((first - ended) * 1000.0)
    return first


class _Session:
    """One bot on the emulator with one user, its events recorded and waited on by polling."""

    def __init__(
        self,
        clock: Clock,
        stt: SpeechToText,
        tts: TextToSpeech,
        *,
        ttft_s: float,
        seed: int,
        resume: bool,
        preemptive: bool,
        server: LoopbackRealtimeServer | None = None,
    ) -> None:
        self.clock = clock
        self.chat = ScriptedChatModel(clock, [_reply], ttft_s=ttft_s, token_s=0.02)
        dialogue, caps = negotiate(
            DialogueSettings(resume_after_false_interruption=resume, preemptive_generation=preemptive),
            stt=stt.capabilities,
            tts=tts.capabilities,
            chat=self.chat.capabilities,
        )
        providers = ConversationProviders(
            stt=stt, tts=tts, chat=self.chat, dialogue=dialogue, capabilities=caps
        )
        if server is not None:
            providers = realtime_providers(stt, dialogue, server)
        settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
        self.h = BotOnEmulator(
            settings,
            EmulatorConfig(dave=True, seed=seed),
            users={_USER: "alice"},
            clock=clock,
            providers=providers,
        )
        self.events: list[Event] = []
        self.state = "idle"
        self._speech = [0, 0]  # the user's SpeechStarted, SpeechEnded
        self._ended_at: float | None = None  # last SpeechEnded not yet followed by its transcript
        self.h.bus.subscribe(Event, self._on_event)

    def _on_event(self, e: Event) -> None:
        """Record ``e`` and keep what the waits poll up to date (polling never scans the log)."""
        self.events.append(e)
        match e:
            case DialogueStateChanged():
                self.state = e.state
            case SpeechStarted() if e.speaker_id == str(_USER):
                self._speech[0] += 1
            case SpeechEnded() if e.speaker_id == str(_USER):
                self._speech[1] += 1
                self._ended_at = e.at
            case TranscriptFinal() | TranscriptDiscarded() if e.speaker_id == str(_USER):
                self._ended_at = None

    def user_idle(self) -> bool:
        """The user is not talking and the last utterance was transcribed (or, after 3 s, never will be)."""
        started, ended = self._speech
        pending = self._ended_at is not None and self.clock.monotonic() - self._ended_at < 3.0
        return ended >= started and not pending

    async def __aenter__(self) -> _Session:
        await self.h.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.h.aclose()

    def of(self, kind: type[E], since: int = 0) -> list[E]:
        return [e for e in self.events[since:] if isinstance(e, kind)]

    async def poll(self, ready: Callable[[], bool], within_s: float) -> bool:
        """Poll ``ready`` every few ms; False when ``within_s`` passed first."""
        deadline = self.clock.monotonic() + within_s
        while not ready():
            if self.clock.monotonic() > deadline:
                return False
            await self.clock.sleep(_POLL_S)
        return True

    async def until(self, ready: Callable[[], bool], what: str, within_s: float = _WAIT_S) -> None:
        if not await self.poll(ready, within_s):
            raise EmulatorError(f"dialogue bench: {what} within {within_s} s", code="EMULATOR_TIMEOUT")

    async def first_audio_after(self, since: float) -> float:
        """Poll until the bot starts to sound after ``since``; returns its first packet's arrival (not
        the poll's time: a poll late under load must not add its own delay)."""
        sink = self.h.emulator.bot_audio
        await self.until(lambda: sink.first_audio_after(since) is not None, "no bot audio")
        first = sink.first_audio_after(since)
        assert first is not None
        return first

    async def settle(self) -> None:
        """Wait until the user is idle, the bot listening and silent, all for ``_QUIET_S`` unbroken."""
        sink = self.h.emulator.bot_audio
        since: list[float] = []

        def quiet() -> bool:
            now, last = self.clock.monotonic(), sink.last_audio_at
            silent = last is None or now - last > _QUIET_S
            if not (self.state in ("listening", "idle") and silent and self.user_idle()):
                since.clear()
                return False
            if not since:
                since.append(now)
            return now - since[0] >= _QUIET_S

        await self.until(quiet, "the bot did not go quiet")

    def collect(self, samples: _Samples) -> None:
        for e in self.of(LatencyMeasured):
            if e.metric == "barge_in_ms":
                samples.engine_barge_in.append(e.value_ms)
            elif e.metric == "truncate_sent_ms":
                samples.truncate_sent.append(e.value_ms)
            elif e.metric in samples.metrics:
                samples.metrics[e.metric].append(e.value_ms)
        for f in self.of(TranscriptFinal):
            samples.speech_end_to_final.append((f.at - f.audio_end) * 1000.0)


def _reply(messages: Sequence[ChatMessage]) -> str:
    """The long answer to the question; a short one to anything else (the stop, or echo that leaked
    through as a turn), so that a round never waits on a second long answer."""
    heard = messages[-1].content.lower() if messages else ""
    return ANSWER if "capital" in heard or "france" in heard else ACK


async def _barge_in_round(s: _Session, clips: _Clips, samples: _Samples) -> None:
    speaker = s.h.emulator.speaker(_USER)
    sink = s.h.emulator.bot_audio
    before_ms = sink.ms
    first = await _ask(s, clips, samples)
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
        last = await wait_for(s.clock, _WAIT_S, answer_end)
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
    await s.settle()  # the reply to "stop", if its words were understood


async def _audio_pause_after(s: _Session, onset: float, mark: int) -> float | None:
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
        await s.clock.sleep(_POLL_S)


def _stages(s: _Session, mark: int, onset: float, last: float, out: dict[str, list[float]]) -> None:
    """Where this round's barge-in time went, from its first accepted onset and interruption.

    ``onset_to_detected_audio``: speech the front end did not flag (APM suppression, VAD onset);
    ``detection_delay``: from that audio to ``SpeechStarted`` (jitter buffer, front-end batch, VAD
    window); ``engine``: to ``InterruptionDetected``; ``output_stop``: to the last bot packet.
    """
    started = [e for e in s.of(SpeechStarted, mark) if e.speaker_id == str(_USER)]
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


async def _echo_round(s: _Session, clips: _Clips, echo: EchoPath, samples: _Samples) -> None:
    speaker = s.h.emulator.speaker(_USER)
    mark = len(s.events)
    await _ask(s, clips, samples)
    # Margin for the gaps between sentences (each one synthesized when its turn comes).
    await speaker.say_echo_only(clips.answer_s + 0.5, echo)
    await s.until(lambda: bool(s.of(BotUtteranceFinished, mark)), "the answer did not finish")
    await s.settle()
    samples.echo_false_interrupts.append(len(s.of(InterruptionDetected, mark)))


def _report(samples: _Samples, *, trials: int, ttft_ms: float, realtime: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"barge_in_ms": summary(samples.barge_in)}
    out.update({m: summary(v) for m, v in samples.metrics.items()})
    out["eou_to_first_audio_ms"] = summary(samples.heard_eou)
    targets = REALTIME_TARGETS if realtime else TARGETS
    if realtime:
        out["truncate_sent_ms"] = summary(samples.truncate_sent)
        out["audio_end_error_ms"] = summary(samples.audio_end_error)
    false_interrupts = sum(samples.echo_false_interrupts)
    out.update(echo_false_interrupts=false_interrupts, trials=trials, ttft_ms=ttft_ms)
    out["targets"] = dict(targets)
    meets: dict[str, bool] = {}
    for name, target in targets.items():
        if name == "echo_false_interrupts":
            meets[name] = false_interrupts <= target
        else:
            p95 = out[name]["p95"]
            meets[name] = p95 is not None and p95 <= target
    out["meets_targets"] = meets
    out["diagnostics"] = {
        "engine_barge_in_ms": summary(samples.engine_barge_in),
        "engine_eou_to_first_audio_ms": summary(samples.metrics["eou_to_first_audio_ms"]),
        "speech_end_to_final_ms": summary(samples.speech_end_to_final),
        "missed_barge_ins": samples.missed_barge_ins,
        "echo_false_interrupts_per_trial": samples.echo_false_interrupts,
        "barge_in_stages_ms": {k: summary(v) for k, v in samples.stages.items()},
    }
    return out
