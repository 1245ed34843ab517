"""What the soak samples every interval: resident memory, every queue's largest depth against its
bound, drops by reason, drift, decode and decrypt errors, event-loop lag, unhandled exceptions, and
the conversation's and the call's counters; the probes themselves are
:mod:`~openab_voice.bench.soak_probes`."""

from __future__ import annotations

from typing import Any

from openab_voice.bench.soak_probes import (
    ExceptionCounter,
    LoopLagMonitor,
    QueueDepth,
    queue_depths,
    rss_bytes,
)
from openab_voice.bench.soak_script import Script
from openab_voice.bench.soak_tally import Tally
from openab_voice.bench.stats import summary
from openab_voice.clock import Clock
from openab_voice.discord.host.session import VoiceSession
from openab_voice.testing.harness import BotOnEmulator

_QUEUE_POLL_S = 1.0


class Sampler:
    """The samples of one soak, and the figures kept between them.

    Attributes:
        samples: one per interval, oldest first.
        queue_overruns: samples in which a bounded queue held more than its bound (one per queue).
        queues_seen: each queue's largest depth over the run.
        rss_start: the resident set size when the call began.
    """

    def __init__(self, clock: Clock, tally: Tally, lag: LoopLagMonitor, exceptions: ExceptionCounter) -> None:
        self.clock = clock
        self.tally = tally
        self.lag = lag
        self.exceptions = exceptions
        self.samples: list[dict[str, Any]] = []
        self.queue_max: dict[str, QueueDepth] = {}  # this interval's largest depth per queue
        self.queue_overruns = 0
        self.queues_seen: dict[str, QueueDepth] = {}  # over the run
        self.sessions: dict[int, VoiceSession] = {}
        self.rss_start = 0

    def current_sessions(self, h: BotOnEmulator) -> list[VoiceSession]:
        session = h.bot.voice.get(h.emulator.guild_id)
        if session is not None:
            self.sessions.setdefault(id(session), session)
        return list(self.sessions.values())

    async def poll_queues(self, h: BotOnEmulator) -> None:
        while True:
            # The harness keeps every frame the bot heard and the emulator everything it played (for
            # tests that read them back): dropped here, so the RSS measured is the bot's own.
            h.recorder.clear()
            h.emulator.bot_audio.forget_pcm()
            for session in self.current_sessions(h)[-1:]:
                for name, depth in queue_depths(session, "session").items():
                    best = self.queue_max.get(name)
                    if best is None or depth.depth > best.depth:
                        self.queue_max[name] = depth
            await self.clock.sleep(_QUEUE_POLL_S)

    def receive(self, h: BotOnEmulator) -> tuple[dict[str, int], int]:
        """Drops by reason over every session of the run, and the packets attributed to speakers."""
        drops: dict[str, int] = {}
        attributed = 0
        for session in self.current_sessions(h):
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

    def sample(self, h: BotOnEmulator, script: Script, started: float) -> dict[str, Any]:
        drops, _ = self.receive(h)
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
