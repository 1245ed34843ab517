"""Soak: the whole bot on the loopback emulator for ``minutes``, sampled every ``sample_s``.

Everything is real but the LLM (:class:`~openab_voice.testing.chat.ScriptedChatModel`, a long answer):
Discord protocol with DAVE on, ``loss`` packet loss and ``jitter_ms`` jitter on every speaker, our
receiver, the audio front end, faster-whisper, Piper and the conversation engine. The call itself is
:mod:`openab_voice.bench.soak_script`: two speakers talking to the bot and over it, a third member
joining and leaving, and a forced voice event every ``resume_every_s`` (``--resume``: 4015, 4006,
move or none; what the bot did after each is reported, not assumed).

Each sample (JSON, one per interval): resident memory, every queue's largest depth in the interval
against its bound (:mod:`openab_voice.bench.soak_probes`), drops by reason (receive, front-end rings,
frame subscriptions; cumulative), capture/render drift (reference drift events and their largest
skew), decode and decrypt errors, event-loop lag (P50/P95/max of a 50 ms ticker), unhandled
exceptions (the loop's exception handler and ``threading.excepthook``, installed for the run).

Targets (``summary`` holds each statistic under the target's name; ``meets_targets`` compares exactly
that value):

* ``rss_growth_pct`` ≤ 5: of the samples taken after the warm-up, (median RSS of the last third −
  median of the first third) / median of the first third, in % (medians: the allocator's swings of a
  few tens of MB are not growth; the peak is reported beside it). The warm-up is ``warmup_minutes``
  (5), or half the run when that is shorter; ``rss_window`` says which samples were compared. The
  harness's own recordings (every frame the bot heard, everything it played) are dropped as the run
  goes, so the RSS is the bot's, its models' and the emulator's.
* ``queue_overruns`` = 0: samples in which a bounded queue held more than its bound.
* ``uncounted_packets`` = 0: packets the emulator sent to the bot (after its own impairments) that the
  receiver neither attributed nor counted as a drop, at the end of the run.
* ``unhandled_exceptions`` = 0.
* ``silent_phase_missed`` = 0, when ``silence_s`` is set: after the call, nobody speaks for
  ``silence_s`` (the emulator's NAT closes after ``nat_timeout_s`` without a datagram from the bot),
  then one question; 1 when no final transcript of it came within ``_SILENT_FINAL_WAIT_S``.
  ``silent_phase`` reports when it was said, when its final came, and the emulator's UDP counters
  (``udp_from_bot`` by kind, ``nat_dropped``) over the phase.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

from openab_voice.audio.events import AudioBufferOverrun, AudioReferenceDrift, AudioReferenceRealigned
from openab_voice.bench.soak_probes import (
    ExceptionCounter,
    LoopLagMonitor,
    QueueDepth,
    queue_depths,
    rss_bytes,
)
from openab_voice.bench.soak_script import ALICE, BOB, LINES, ResumeKind, Script, recovery
from openab_voice.bench.stats import summary
from openab_voice.bus.events import ErrorRaised, Event, VoiceConnected, VoiceDisconnected
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import load_settings
from openab_voice.discord.session import VoiceSession
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import InterruptionDetected, SpeechDropped, TranscriptFinal
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.providers.speech import ChatMessage
from openab_voice.providers.speech_registry import SttConfig, TtsConfig, stt_registry, tts_registry
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["TARGETS", "run"]

TARGETS: dict[str, float] = {
    "rss_growth_pct": 5.0,
    "queue_overruns": 0,
    "uncounted_packets": 0,
    "unhandled_exceptions": 0,
}
ANSWER = (
    "The capital of France is Paris. It lies on the river Seine. About two million people live "
    "there. It is famous for the Eiffel Tower."
)
# Receive drops that are not a speaker's audio (the server's and discord.py's own datagrams).
_NOT_SPEECH = frozenset({"rtcp", "keepalive", "ip_discovery"})
_QUEUE_POLL_S = 1.0
_SILENT_FINAL_WAIT_S = 30.0


def run(
    *,
    minutes: float,
    sample_s: float = 60.0,
    warmup_minutes: float = 5.0,
    resume: ResumeKind = "4015",
    resume_every_s: float = 300.0,
    churn_every_s: float = 60.0,
    loss: float = 0.02,
    jitter_ms: float = 20.0,
    seed: int = 0,
    silence_s: float = 0.0,
    nat_timeout_s: float | None = None,
    out: Path | None = None,
) -> dict[str, Any]:
    """Run the soak and return its report (also written to ``out`` after every sample, when given).

    Raises:
        ValueError: a non-positive duration or interval.
        ProviderUnavailable: faster-whisper or Piper is not installed.
    """
    if minutes <= 0 or sample_s <= 0 or resume_every_s <= 0 or churn_every_s <= 0 or silence_s < 0:
        raise ValueError(
            "minutes, sample_s, resume_every_s and churn_every_s must be positive, silence_s not negative"
        )
    soak = _Soak(
        minutes=minutes,
        sample_s=sample_s,
        warmup_s=min(warmup_minutes * 60.0, minutes * 30.0),
        resume=resume,
        resume_every_s=resume_every_s,
        churn_every_s=churn_every_s,
        loss=loss,
        jitter_ms=jitter_ms,
        seed=seed,
        silence_s=silence_s,
        nat_timeout_s=nat_timeout_s,
        out=out,
    )
    return asyncio.run(soak.main())


class _Tally:
    """Bus events folded into counters (cumulative) and per-interval figures."""

    def __init__(self) -> None:
        self.finals_at: list[float] = []
        self.interruptions = 0
        self.speech_dropped = 0
        self.errors: dict[str, int] = {}
        self.ring_drops: dict[str, int] = {}
        self.voice: dict[str, int] = {"connected": 0, "disconnected": 0}
        self.other: dict[str, int] = {}  # gap / resume events of the voice session's life, by name
        self.gaps: list[Event] = []  # VoiceGap: a gap in the voice session, over
        self.drift: list[float] = []  # |skew_ms| of this interval's drift events
        self.realigned = 0

    def __call__(self, event: Event) -> None:
        match event:
            case TranscriptFinal():
                self.finals_at.append(event.at)
            case InterruptionDetected():
                self.interruptions += 1
            case SpeechDropped():
                self.speech_dropped += 1
            case ErrorRaised():
                code = str(getattr(event, "code", type(event).__name__))
                self.errors[code] = self.errors.get(code, 0) + 1
            case AudioBufferOverrun():
                self.ring_drops[event.ring] = self.ring_drops.get(event.ring, 0) + event.dropped
            case AudioReferenceDrift():
                self.drift.append(abs(event.skew_ms))
            case AudioReferenceRealigned():
                self.realigned += 1
            case VoiceConnected():
                self.voice["connected"] += 1
            case VoiceDisconnected():
                self.voice["disconnected"] += 1
            case _ if "Gap" in type(event).__name__ or "Resum" in type(event).__name__:
                name = type(event).__name__
                self.other[name] = self.other.get(name, 0) + 1
                if name == "VoiceGap":
                    self.gaps.append(event)


class _Soak:
    def __init__(self, **options: Any) -> None:
        self.o = options
        self.clock: Clock = SystemClock()
        self.tally = _Tally()
        self.lag = LoopLagMonitor(self.clock)
        self.exceptions = ExceptionCounter()
        self.samples: list[dict[str, Any]] = []
        self.queue_max: dict[str, QueueDepth] = {}  # this interval's largest depth per queue
        self.queue_overruns = 0
        self.queues_seen: dict[str, QueueDepth] = {}  # over the run
        self.sessions: dict[int, VoiceSession] = {}
        self.silent_phase: dict[str, Any] | None = None

    async def main(self) -> dict[str, Any]:
        self.exceptions.install(asyncio.get_running_loop())
        stt = stt_registry().create("faster-whisper", SttConfig())
        tts = tts_registry().create("piper", TtsConfig())
        try:
            clips = {k: b"".join([c async for c in tts.synthesize(t)]) for k, t in LINES.items()}
            chat = ScriptedChatModel(self.clock, [_reply], ttft_s=0.0, token_s=0.02)
            dialogue, caps = negotiate(
                DialogueSettings(), stt=stt.capabilities, tts=tts.capabilities, chat=chat.capabilities
            )
            providers = ConversationProviders(
                stt=stt, tts=tts, chat=chat, dialogue=dialogue, capabilities=caps
            )
            settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
            config = EmulatorConfig(
                dave=True,
                loss=self.o["loss"],
                jitter_ms=self.o["jitter_ms"],
                seed=self.o["seed"],
                bot_name="Jarvis",
                nat_timeout_s=self.o["nat_timeout_s"],
            )
            async with BotOnEmulator(
                settings, config, users={ALICE: "alice", BOB: "bob"}, clock=self.clock, providers=providers
            ) as h:
                h.bus.subscribe(Event, self.tally)
                return await self._soak(h, clips)
        finally:
            await tts.aclose()
            stt.close()
            self.exceptions.uninstall()

    async def _soak(self, h: BotOnEmulator, clips: dict[str, bytes]) -> dict[str, Any]:
        script = Script(
            h,
            clips,
            clock=self.clock,
            seed=self.o["seed"],
            resume=self.o["resume"],
            resume_every_s=self.o["resume_every_s"],
            churn_every_s=self.o["churn_every_s"],
        )
        started = self.clock.monotonic()
        self.rss_start = rss_bytes()
        talking = asyncio.create_task(script.talk(), name="soak-talk")
        jobs = [script.churn(), script.force(started), self.lag.run(), self._poll_queues(h)]
        tasks = [talking] + [asyncio.create_task(job, name=f"soak-{i}") for i, job in enumerate(jobs)]
        try:
            end = started + self.o["minutes"] * 60.0
            while (now := self.clock.monotonic()) < end:
                await self.clock.sleep(min(self.o["sample_s"], end - now))
                self.samples.append(self._sample(h, script, started))
                self._write(self._report(h, script, started, final=False))
        finally:
            script.stop()  # the last round ends on its own, so every packet it sent is reported
            await asyncio.wait({talking}, timeout=60.0)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.o["silence_s"] > 0:
            await self._silent_phase(h, script, started)
        await self.clock.sleep(1.0)  # what is in flight lands before the final count
        session = h.bot.voice.get(h.emulator.guild_id)
        if session is not None:
            await session.receiver.sync()
        report = self._report(h, script, started, final=True)
        self._write(report)
        return report

    async def _silent_phase(self, h: BotOnEmulator, script: Script, started: float) -> None:
        """Silence, then one question: its final transcript must still come."""
        udp_before = h.emulator.udp_stats()
        began, sent = await script.after_silence(self.o["silence_s"])
        deadline = began + _SILENT_FINAL_WAIT_S
        final_at = None
        while final_at is None and self.clock.monotonic() < deadline:
            final_at = next((t for t in self.tally.finals_at if t > began), None)
            await self.clock.sleep(0.1)
        udp = h.emulator.udp_stats()
        self.silent_phase = {
            "silence_s": self.o["silence_s"],
            "nat_timeout_s": self.o["nat_timeout_s"],
            "said_at_s": round(began - started, 1),
            "packets_sent": sent.sent,
            "final_after_s": None if final_at is None else round(final_at - began, 2),
            "udp_from_bot": {k: v - udp_before["udp_from_bot"][k] for k, v in udp["udp_from_bot"].items()},
            "nat_dropped": udp["nat_dropped"] - udp_before["nat_dropped"],
        }
        self.samples.append(self._sample(h, script, started))

    # --- sampling --------------------------------------------------------------------------------

    def _current_sessions(self, h: BotOnEmulator) -> list[VoiceSession]:
        session = h.bot.voice.get(h.emulator.guild_id)
        if session is not None:
            self.sessions.setdefault(id(session), session)
        return list(self.sessions.values())

    async def _poll_queues(self, h: BotOnEmulator) -> None:
        while True:
            # The harness keeps every frame the bot heard and the emulator everything it played (for
            # tests that read them back): dropped here, so the RSS measured is the bot's own.
            h.recorder.clear()
            h.emulator.bot_audio.forget_pcm()
            for session in self._current_sessions(h)[-1:]:
                for name, depth in queue_depths(session, "session").items():
                    best = self.queue_max.get(name)
                    if best is None or depth.depth > best.depth:
                        self.queue_max[name] = depth
            await self.clock.sleep(_QUEUE_POLL_S)

    def _receive(self, h: BotOnEmulator) -> tuple[dict[str, int], int]:
        """Drops by reason over every session of the run, and the packets attributed to speakers."""
        drops: dict[str, int] = {}
        attributed = 0
        for session in self._current_sessions(h):
            snap = session.receiver.snapshot()
            for counters in snap.get("speakers", {}).values():
                attributed += int(counters.get("packets", 0))
                for kind in ("lost", "concealed"):  # network loss the receiver noticed (not drops)
                    drops[f"network.{kind}"] = drops.get(f"network.{kind}", 0) + int(counters.get(kind, 0))
                for reason, n in counters.get("dropped", {}).items():
                    drops[f"receive.{reason}"] = drops.get(f"receive.{reason}", 0) + int(n)
            for reason, n in snap.get("unattributed", {}).items():
                key = f"receive.unattributed.{reason}"
                drops[key] = drops.get(key, 0) + int(n)
            for index, sub in enumerate(getattr(session.receiver, "_subscriptions", [])):
                drops[f"frames.subscriber{index}"] = drops.get(f"frames.subscriber{index}", 0) + int(
                    sub.dropped
                )
        for ring, n in self.tally.ring_drops.items():
            drops[f"audio.{ring}"] = n
        return drops, attributed

    def _sample(self, h: BotOnEmulator, script: Script, started: float) -> dict[str, Any]:
        drops, _ = self._receive(h)
        sink = h.emulator.bot_audio
        queues = {name: {"max": d.depth, "bound": d.bound} for name, d in sorted(self.queue_max.items())}
        over = [name for name, d in self.queue_max.items() if d.bound is not None and d.depth > d.bound]
        self.queue_overruns += len(over)
        for name, d in self.queue_max.items():
            seen = self.queues_seen.get(name)
            if seen is None or d.depth > seen.depth:
                self.queues_seen[name] = d
        self.queue_max = {}
        lag = summary(self.lag.take())
        drift, self.tally.drift = self.tally.drift, []
        counts = script.counts
        return {
            "t_s": round(self.clock.monotonic() - started, 1),
            "rss_mb": round(rss_bytes() / 2**20, 1),
            "queues": queues,
            "queues_over_bound": over,
            "drops": drops,
            "drift": {
                "events": len(drift),
                "max_abs_skew_ms": max(drift, default=0.0),
                "realigned": self.tally.realigned,
            },
            "decode_errors": {
                "receive_opus": sum(v for k, v in drops.items() if k.endswith("opus_decode_failed")),
                "receive_dave": sum(v for k, v in drops.items() if k.endswith("dave_decrypt_failed")),
                "receive_transport": sum(
                    v for k, v in drops.items() if k.endswith("transport_decrypt_failed")
                ),
                "emulator_decode": sink.decode_failures,
                "emulator_decrypt": sink.decrypt_failures,
            },
            "loop_lag_ms": lag,
            "unhandled_exceptions": self.exceptions.count,
            "errors": dict(self.tally.errors),
            "conversation": {
                "rounds": counts.rounds,
                "answered": counts.answered,
                "finals": len(self.tally.finals_at),
                "interruptions": self.tally.interruptions,
                "speech_dropped": self.tally.speech_dropped,
                "round_errors": counts.round_errors,
            },
            "members": {"joins": counts.joins, "leaves": counts.leaves},
            "voice": {**self.tally.voice, **self.tally.other, "forced": len(counts.forced)},
        }

    # --- the report ------------------------------------------------------------------------------

    def _report(self, h: BotOnEmulator, script: Script, started: float, *, final: bool) -> dict[str, Any]:
        counts = script.counts
        drops, attributed = self._receive(h)
        sent = sum(counts.sent_packets.values())
        counted = attributed + sum(
            v
            for k, v in drops.items()
            if k.startswith("receive.unattributed.") and k.rsplit(".", 1)[1] not in _NOT_SPEECH
        )
        rss = self._rss_window()
        all_lag = [s["loop_lag_ms"] for s in self.samples if s["loop_lag_ms"]["n"]]
        result = {
            "rss_growth_pct": rss.pop("growth_pct"),
            "rss_window": rss,
            "queue_overruns": self.queue_overruns,
            "queues": {n: {"max": d.depth, "bound": d.bound} for n, d in sorted(self.queues_seen.items())},
            "uncounted_packets": sent - counted if final else None,
            "packets": {
                "sent": sent,
                "attributed": attributed,
                "counted": counted,
                "impairment_drops": counts.impairment_drops,
            },
            "drops_by_reason": drops,
            "unhandled_exceptions": self.exceptions.count,
            "unhandled_messages": list(self.exceptions.messages),
            "loop_lag_ms_p95_max": max((s["p95"] or 0.0 for s in all_lag), default=None),
            "loop_lag_ms_max": max((s["max"] or 0.0 for s in all_lag), default=None),
            "forced_voice_events": [
                recovery(
                    r,
                    answers_at=counts.answers_at,
                    finals_at=self.tally.finals_at,
                    gaps=self.tally.gaps,
                    ended_at=min(self.clock.monotonic(), started + self.o["minutes"] * 60.0),
                )
                for r in counts.forced
            ],
            "script_notes": list(counts.errors),
        }
        targets = dict(TARGETS)
        if self.o["silence_s"] > 0:
            phase = self.silent_phase
            result["silent_phase"] = phase
            result["silent_phase_missed"] = (
                None if phase is None else int(phase["final_after_s"] is None) if final else None
            )
            targets["silent_phase_missed"] = 0
        meets = {k: result[k] is not None and result[k] <= v for k, v in targets.items()}
        return {
            "minutes": self.o["minutes"],
            "complete": final,
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in self.o.items()},
            "summary": result,
            "targets": targets,
            "meets_targets": meets,
            "samples": self.samples,
        }

    def _rss_window(self) -> dict[str, Any]:
        """RSS growth after the warm-up: the median of the last third of the samples taken after it
        against the median of the first third (medians, so one allocator swing is not growth)."""
        warm = [s["rss_mb"] for s in self.samples if s["t_s"] >= self.o["warmup_s"] - 1e-6]
        if len(warm) < 2:
            return {"growth_pct": None, "note": "fewer than two samples after the warm-up"}
        third = max(1, len(warm) // 3)
        first, last = statistics.median(warm[:third]), statistics.median(warm[-third:])
        times = [s["t_s"] for s in self.samples if s["t_s"] >= self.o["warmup_s"] - 1e-6]
        return {
            "growth_pct": round((last - first) / first * 100.0, 2),
            "definition": "(median RSS of the last third of the samples after the warm-up - median of "
            "the first third) / median of the first third * 100",
            "first_third_s": [times[0], times[third - 1]],
            "first_third_median_mb": first,
            "last_third_s": [times[-third], times[-1]],
            "last_third_median_mb": last,
            "peak_after_warmup_mb": max(warm),
            "start_mb": round(self.rss_start / 2**20, 1),
            "end_mb": warm[-1],
            "warmup_s": self.o["warmup_s"],
        }

    def _write(self, report: dict[str, Any]) -> None:
        out: Path | None = self.o["out"]
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def _reply(messages: list[ChatMessage] | Any) -> str:
    """The long answer to a question; a short one to anything else (a stop, an aside)."""
    heard = messages[-1].content.lower() if messages else ""
    return ANSWER if any(w in heard for w in ("capital", "france", "tower", "eiffel")) else "Okay."
