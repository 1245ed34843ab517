"""Dialogue benchmark: barge-in, transcript, TTS and answer latencies, and echo false interrupts,
measured end to end through the loopback Discord emulator (DAVE on).

Everything is real but the LLM (:class:`~openab_voice.testing.chat.ScriptedChatModel`, a fixed
answer with a configurable time to first token). Two sessions (:mod:`~openab_voice.bench.dialogue_session`)
of ``trials`` rounds (:mod:`~openab_voice.bench.dialogue_rounds`): **barge-in** and **echo**, and on
the cascade a third of **backchannel** rounds (a "yeah", then a "wait, stop", over the answer); the
report is :mod:`~openab_voice.bench.dialogue_report`. ``preemptive`` turns preemptive generation on
or off; ``engine="realtime"`` / ``"live"`` runs the rounds on the realtime / live engine against the
loopback realtime / GPT-Live server. Method, extra figures and wall time: docs/adr/0018-benchmarks-on-real-components.md.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from openab_voice.bench.dialogue_clips import synthesize_clips
from openab_voice.bench.dialogue_report import LIVE_TARGETS, REALTIME_TARGETS, TARGETS, Samples, report
from openab_voice.bench.dialogue_rounds import (
    backchannel_clips,
    backchannel_round,
    barge_in_round,
    echo_round,
)
from openab_voice.bench.dialogue_session import DialogueSession, EngineProviders
from openab_voice.bench.live import LoopbackLiveServer, live_providers, live_server
from openab_voice.bench.realtime import LoopbackRealtimeServer, realtime_providers, realtime_server
from openab_voice.clock import SystemClock
from openab_voice.providers.tts import TtsConfig, tts_registry
from openab_voice.providers.turn import TurnConfig, turn_registry
from openab_voice.stt.base import SttConfig, stt_registry
from openab_voice.testing.emulator import EchoPath

__all__ = ["LIVE_TARGETS", "REALTIME_TARGETS", "TARGETS", "run"]


def run(
    *,
    trials: int = 5,
    ttft_ms: float = 0.0,
    seed: int = 0,
    preemptive: bool = True,
    engine: str = "cascade",
    first_audio_latency_ms: float = 300.0,
    load: int = 0,
    end_of_turn: str = "silence",
) -> dict[str, Any]:
    """Run the benchmark (real STT and TTS, fake LLM) and return a JSON-friendly report.

    Args:
        trials: rounds of each kind (barge-in, echo only).
        ttft_ms: the fake LLM's time to first token (included in ``eou_to_first_audio_ms``).
        seed: seeds the emulator (impairments, RTP start) and the echo's reverb.
        preemptive: preemptive generation on (the product's default) or off (cascade only).
        engine: ``cascade``, ``realtime`` (on the loopback realtime server) or ``live`` (on the
            loopback GPT-Live server).
        first_audio_latency_ms: realtime and live: the server's first audio no earlier than this
            after the response was requested (live: after the server's own end of the turn).
        load: busy cores beside the run: with one or more, the loaded targets apply.
        end_of_turn: ``silence`` (the product's default: the VAD's silence alone) or ``semantic``
            (Smart Turn and the pause's words judge each pause, ADR 0021), to compare.

    Returns:
        ``{"barge_in_ms": {"p50", "p95", "n"}, "first_stable_partial_ms": {...},
        "eou_to_first_audio_ms": {...}, "tts_first_chunk_ms": {...}, "echo_false_interrupts",
        "backchannel_cutoffs", "backchannels", "real_interruptions_missed", "real_interruptions",
        "trials", "ttft_ms", "preemptive_generation", "targets", "meets_targets", "diagnostics"}``.

    Raises:
        ValueError: ``trials`` < 1 or a negative ``ttft_ms``.
        ProviderUnavailable: faster-whisper or Piper is not installed.
    """
    if trials < 1 or ttft_ms < 0 or first_audio_latency_ms < 0:
        raise ValueError("need at least one trial and a non-negative ttft_ms")
    if engine not in ("cascade", "realtime", "live"):
        raise ValueError(f"unknown engine {engine!r}")
    if end_of_turn not in ("semantic", "silence"):
        raise ValueError(f"unknown end of turn {end_of_turn!r}")
    semantic = end_of_turn == "semantic"
    samples = asyncio.run(
        _bench(trials, ttft_ms / 1000.0, seed, preemptive, engine, first_audio_latency_ms / 1000.0, semantic)
    )
    result = report(samples, trials=trials, ttft_ms=ttft_ms, engine=engine, load=load)
    result["preemptive_generation"] = preemptive and engine == "cascade"
    result["engine"] = engine
    result["end_of_turn"] = end_of_turn
    if engine != "cascade":
        result["first_audio_latency_ms"] = first_audio_latency_ms
    return result


async def _bench(
    trials: int,
    ttft_s: float,
    seed: int,
    preemptive: bool,
    engine: str = "cascade",
    first_audio_s: float = 0.3,
    semantic: bool = False,
) -> Samples:
    clock = SystemClock()
    stt = stt_registry().create("faster-whisper", SttConfig())
    tts = tts_registry().create("piper", TtsConfig())
    detector = turn_registry().create("smart-turn", TurnConfig()) if semantic else None
    samples = Samples()
    server: LoopbackLiveServer | LoopbackRealtimeServer | None = None
    providers: EngineProviders | None = None
    if engine == "live":
        live = server = await live_server(stt, tts, first_audio_latency_s=first_audio_s)
        providers = functools.partial(live_providers, server=live)
    elif engine == "realtime":
        speech = server = await realtime_server(stt, tts, first_audio_latency_s=first_audio_s)
        providers = functools.partial(realtime_providers, server=speech)
    try:
        clips = await synthesize_clips(tts)
        # Every round's session: the same providers and settings; its own seed, resume and server.
        session = functools.partial(
            DialogueSession, clock, stt, tts, ttft_s=ttft_s, preemptive=preemptive, turn_detector=detector
        )
        # No resume after a false interruption here: when the interruption's words are lost, the
        # rest of the answer would be said again, which only costs time (barge-in is measured first).
        async with session(seed=seed, resume=False, engine_providers=providers) as s:
            for _ in range(trials):
                await barge_in_round(s, clips, samples)
            s.collect(samples)
        echo = EchoPath(delay_ms=80.0, gain_db=-6.0, reverb_ms=40.0, seed=seed)
        async with session(seed=seed + 1, resume=True, engine_providers=providers) as s:
            for _ in range(trials):
                await echo_round(s, clips, echo, samples)
            s.collect(samples)
        if server is None:  # the cascade's (a speech model's resume is not the words cut)
            backchannels = await backchannel_clips(tts)
            async with session(seed=seed + 2, resume=True) as s:
                for i in range(trials):  # its figures are its counts only (not collected)
                    await backchannel_round(s, clips, backchannels[i % len(backchannels)], samples)
    finally:
        if server is not None:
            await server.aclose()
        await tts.aclose()
        stt.close()
        if detector is not None:
            detector.close()
    return samples
