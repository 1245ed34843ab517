"""Soak: the whole bot on the loopback emulator for ``minutes``, sampled every ``sample_s``.

Everything is real but the LLM (:class:`~openab_voice.testing.chat.ScriptedChatModel`); the call is
:mod:`openab_voice.bench.soak_script` (speakers talking to and over the bot, members joining and
leaving, a forced voice event every ``resume_every_s``). What each sample holds is
:mod:`~openab_voice.bench.soak_sampler`; the targets and the report are
:mod:`~openab_voice.bench.soak_report`. Method: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from openab_voice.bench.soak_probes import ExceptionCounter, LoopLagMonitor, rss_bytes
from openab_voice.bench.soak_report import TARGETS, soak_report, write_report
from openab_voice.bench.soak_sampler import Sampler
from openab_voice.bench.soak_script import ALICE, BOB, LINES, ResumeKind, Script
from openab_voice.bench.soak_tally import Tally
from openab_voice.bus.events import Event
from openab_voice.clock import Clock, SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.providers.chat import ChatMessage
from openab_voice.providers.tts import TtsConfig, tts_registry
from openab_voice.stt.base import SttConfig, stt_registry
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator

__all__ = ["TARGETS", "run"]

ANSWER = (
    "The capital of France is Paris. It lies on the river Seine. About two million people live "
    "there. It is famous for the Eiffel Tower."
)
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


class _Soak:
    def __init__(self, **options: Any) -> None:
        self.o = options
        self.clock: Clock = SystemClock()
        self.tally = Tally()
        self.lag = LoopLagMonitor(self.clock)
        self.exceptions = ExceptionCounter()
        self.sampler = Sampler(self.clock, self.tally, self.lag, self.exceptions)
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
        self.sampler.rss_start = rss_bytes()
        talking = asyncio.create_task(script.talk(), name="soak-talk")
        jobs = [script.churn(), script.force(started), self.lag.run(), self.sampler.poll_queues(h)]
        tasks = [talking] + [asyncio.create_task(job, name=f"soak-{i}") for i, job in enumerate(jobs)]
        try:
            end = started + self.o["minutes"] * 60.0
            while (now := self.clock.monotonic()) < end:
                await self.clock.sleep(min(self.o["sample_s"], end - now))
                self.sampler.samples.append(self.sampler.sample(h, script, started))
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
        self.sampler.samples.append(self.sampler.sample(h, script, started))

    def _report(self, h: BotOnEmulator, script: Script, started: float, *, final: bool) -> dict[str, Any]:
        return soak_report(
            self.sampler, h, script, self.o, started=started, silent_phase=self.silent_phase, final=final
        )

    def _write(self, report: dict[str, Any]) -> None:
        write_report(report, self.o["out"])


def _reply(messages: list[ChatMessage] | Any) -> str:
    """The long answer to a question; a short one to anything else (a stop, an aside)."""
    heard = messages[-1].content.lower() if messages else ""
    return ANSWER if any(w in heard for w in ("capital", "france", "tower", "eiffel")) else "Okay."
