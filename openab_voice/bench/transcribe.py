"""Many people talking at once: whole, in-order transcripts per speaker through the emulator.

``speakers`` users each say two shipped Piper clips at once through the loopback Discord emulator
(DAVE on, ``loss`` packet loss) to the real bot with transcription on and dialogue off. Reported:
``out_of_order``, ``finals``, ``fragments``, ``missing``, ``discarded``, ``wer``, ``lag_ms`` (end of
speech to the utterance's last final) and ``backlog``; targets: :func:`targets_for`.
Method and targets: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from openab_voice.audio import scenes
from openab_voice.audio.events import AudioBufferOverrun
from openab_voice.bench.stats import summary
from openab_voice.bench.stt import CLIPS, word_error_rate
from openab_voice.bus.events import Event
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.stt.base import SttConfig, stt_registry
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal, TranscriptionBacklog
from openab_voice.testing.emulator import EmulatorConfig, load_wav_48k_stereo, prepare_speech
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["run", "targets_for"]

_FIRST_USER: Final = 2001
_START_S: Final = 1.0
_STAGGER_S: Final = 0.1
_GAP_S: Final = 1.0  # between one speaker's two utterances
_DRAIN_S: Final = 20.0  # the longest wait for the last finals after the last speech ended
_POLL_S: Final = 0.05
_ROUNDS: Final = 2


def targets_for(speakers: int) -> dict[str, float]:
    """The targets that hold for ``speakers`` people talking at once (ADR 0018)."""
    if speakers <= 6:
        return {"lag_p95_ms": 800.0}
    return {"fragments": 0, "lag_p95_ms": 1500.0}


@dataclass(slots=True)
class _Utterance:
    speaker: str
    clip: str
    onset: float  # true speech onset / end on the bot's clock
    end: float
    finals: list[TranscriptFinal] = field(default_factory=list)


def run(*, speakers: int = 10, loss: float = 0.01, seed: int = 0) -> dict[str, Any]:
    """Run the benchmark and return a JSON-friendly report (see the module docstring).

    Raises:
        ValueError: fewer than one speaker, or loss outside [0, 0.5].
        ProviderUnavailable: faster-whisper or an audio provider is not installed.
    """
    if speakers < 1 or not 0.0 <= loss <= 0.5:
        raise ValueError("need at least one speaker and a loss in [0, 0.5]")
    return asyncio.run(_bench(speakers, loss, seed))


async def _bench(speakers: int, loss: float, seed: int) -> dict[str, Any]:
    clock = SystemClock()
    stt = stt_registry().create("faster-whisper", SttConfig())
    providers = ConversationProviders(stt=stt)
    settings = load_settings({}, transcription_enabled=True, dialogue_enabled=False)
    users = {_FIRST_USER + i: f"talker{i + 1}" for i in range(speakers)}
    clips = {name: load_wav_48k_stereo(scenes.ASSETS_DIR / f"{name}.wav") for name in CLIPS}
    prepare_speech(*clips.values())  # the talkers' clients encode on their own machines
    spans = {name: scenes.active_span(scenes.load_clip(name)) for name in CLIPS}
    names = list(CLIPS)
    events: list[Event] = []
    utterances: list[_Utterance] = []
    try:
        config = EmulatorConfig(dave=True, loss=loss, seed=seed)
        async with BotOnEmulator(settings, config, users=users, clock=clock, providers=providers) as h:
            h.bus.subscribe(Event, events.append)

            async def talk(i: int, user: int) -> None:
                at = _START_S + i * _STAGGER_S
                for r in range(_ROUNDS):
                    name = names[(i + r) % len(names)]
                    await h.at(at)
                    said = clock.monotonic()
                    lo, hi = spans[name]
                    utterances.append(_Utterance(str(user), name, said + lo, said + hi))
                    await h.emulator.speaker(user).say(clips[name])
                    at = h.clock.monotonic() - h.origin + _GAP_S

            await asyncio.gather(*(talk(i, user) for i, user in enumerate(users)))
            last_end = max(u.end for u in utterances)
            await _drain(clock, events, utterances, last_end)
            snapshot = h.session.receiver.snapshot()
    finally:
        stt.close()
    return _report(events, utterances, speakers=speakers, loss=loss, receive=snapshot)


async def _drain(clock: SystemClock, events: list[Event], utterances: list[_Utterance], last: float) -> None:
    """Wait until every utterance is concluded (a final or a discard after its end), bounded."""
    deadline = last + _DRAIN_S
    while clock.monotonic() < deadline:
        concluded = sum(
            1 for e in events if isinstance(e, TranscriptFinal | TranscriptDiscarded) and e.at > last
        )
        if concluded and clock.monotonic() > last + 2.0 and _all_heard(events, utterances):
            return
        await clock.sleep(_POLL_S)


def _all_heard(events: list[Event], utterances: list[_Utterance]) -> bool:
    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    return all(any(_owns(u, f) for f in finals) for u in utterances)


def _owns(u: _Utterance, final: TranscriptFinal) -> bool:
    return (
        final.speaker_id == u.speaker and final.audio_start < u.end + 0.3 and final.audio_end > u.onset - 0.3
    )


def _report(
    events: list[Event], utterances: list[_Utterance], *, speakers: int, loss: float, receive: dict[str, Any]
) -> dict[str, Any]:
    finals = [e for e in events if isinstance(e, TranscriptFinal)]
    unowned = 0
    for final in finals:
        owners = [u for u in utterances if _owns(u, final)]
        if not owners:
            unowned += 1
            continue
        # The utterance it overlaps most.
        best = max(owners, key=lambda u: min(u.end, final.audio_end) - max(u.onset, final.audio_start))
        best.finals.append(final)
    fragments = sum(max(0, len(u.finals) - 1) for u in utterances)
    missing = sum(1 for u in utterances if not u.finals)
    lags = [(max(f.at for f in u.finals) - u.end) * 1000.0 for u in utterances if u.finals]
    errors = words = 0.0
    per: list[dict[str, Any]] = []
    for u in sorted(utterances, key=lambda u: (u.speaker, u.onset)):
        text = " ".join(f.text for f in sorted(u.finals, key=lambda f: f.audio_start))
        reference = CLIPS[u.clip]
        wer = word_error_rate(reference, text)
        n = len(reference.split())
        errors, words = errors + wer * n, words + n
        per.append(
            {
                "speaker": u.speaker,
                "clip": u.clip,
                "finals": len(u.finals),
                "text": text,
                "wer": round(wer, 3),
                "lag_ms": round((max(f.at for f in u.finals) - u.end) * 1000.0, 1) if u.finals else None,
                "partials": sum(f.partials for f in u.finals),
            }
        )
    out_of_order = 0  # a speaker's utterance whose first final came before an earlier utterance's
    for speaker in {u.speaker for u in utterances}:
        mine = sorted((u for u in utterances if u.speaker == speaker and u.finals), key=lambda u: u.onset)
        firsts = [min(f.at for f in u.finals) for u in mine]
        out_of_order += sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if b < a)
    backlog = [e for e in events if isinstance(e, TranscriptionBacklog)]
    overruns: dict[str, int] = {}
    for e in events:
        if isinstance(e, AudioBufferOverrun):
            overruns[e.ring] = overruns.get(e.ring, 0) + e.dropped
    lag = summary(lags)
    targets = targets_for(speakers)
    meets: dict[str, bool] = {}
    if "fragments" in targets:
        meets["fragments"] = fragments <= targets["fragments"] and missing == 0
    p95 = lag["p95"]
    meets["lag_p95_ms"] = p95 is not None and missing == 0 and p95 <= targets["lag_p95_ms"]
    return {
        "speakers": speakers,
        "loss": loss,
        "dave": True,
        "utterances": len(utterances),
        "finals": len(finals),
        "fragments": fragments,
        "missing": missing,
        "unattributed_finals": unowned,
        "out_of_order": out_of_order,
        "discarded": [e.reason for e in events if isinstance(e, TranscriptDiscarded)],
        "wer": round(errors / max(1.0, words), 3),
        "lag_ms": lag,
        "backlog": {
            "events": len(backlog),
            "max_waiting": max((e.waiting for e in backlog), default=0),
            "partials_shed": max((e.partials_shed for e in backlog), default=0),
        },
        "front_end_overruns": overruns,
        "receive_drops": receive.get("unattributed", {}),
        "targets": targets,
        "meets_targets": meets,
        "per_utterance": per,
    }
