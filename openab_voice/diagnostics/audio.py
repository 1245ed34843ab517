"""``openab-voice self-test audio``: the real front end on real speech, offline, with honest results.

Scenes built from the shipped Piper clips and run through :class:`~openab_voice.audio.frontend.FrontEnd`
as Discord audio would be: **echo only** (no speech start may pass the gate; ERLE over the second
playback), **double talk**, **VAD** boundaries and noise, **latency** of APM and VAD per frame
(:data:`APM_P95_TARGET_US`), and an informational **APM comparison**
(:mod:`openab_voice.audio.apm_compare`). Providers are the configured real ones: an unavailable or
degraded provider fails the test. No network; a :class:`~openab_voice.clock.FakeClock` per frame.
Scene parameters and targets: docs/adr/0003-webrtc-apm-provider.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openab_voice.audio import scenes

# The echo path is defined once, beside the APM comparison that runs on it too.
from openab_voice.audio.apm_compare import ECHO_DELAY_MS, ECHO_GAIN_DB, ECHO_RT60_MS, compare_apms
from openab_voice.audio.events import SpeechEnded, SpeechStarted
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.errors import OpenabError

ERLE_TARGET_DB = 35.0
APM_P95_TARGET_US = 250.0
VAD_ONSET_TOLERANCE_S = 0.15
VAD_END_TOLERANCE_S = 0.8

_ECHO, _DOUBLE, _VAD, _NOISE = "selftest-echo", "selftest-double-talk", "selftest-vad", "selftest-noise"


@dataclass
class _Run:
    """Everything one scene run produced."""

    events: list[Event] = field(default_factory=list)
    outputs: dict[str, list[ProcessedFrame]] = field(default_factory=dict)

    def starts(self, speaker: str) -> list[SpeechStarted]:
        return [e for e in self.events if isinstance(e, SpeechStarted) and e.speaker_id == speaker]

    def ends(self, speaker: str) -> list[SpeechEnded]:
        return [e for e in self.events if isinstance(e, SpeechEnded) and e.speaker_id == speaker]

    def audio(self, speaker: str) -> np.ndarray:
        pcm = b"".join(p.frame.pcm for p in self.outputs.get(speaker, []))
        return np.frombuffer(pcm, dtype=np.int16)


def _play(
    frontend: FrontEnd, clock: FakeClock, render: list[AudioFrame], captures: dict[str, list[AudioFrame]]
) -> dict[str, list[ProcessedFrame]]:
    """Feed frames tick by tick as the receiver and playback would, processing after each tick."""
    outputs: dict[str, list[ProcessedFrame]] = {name: [] for name in captures}
    ticks = max([len(render), *(len(frames) for frames in captures.values())])
    for i in range(ticks):
        if i < len(render):
            frontend.push_render(render[i])
        for frames in captures.values():
            if i < len(frames):
                frontend.push_capture(frames[i])
        for out in frontend.process_pending():
            outputs[out.frame.speaker_id or ""].append(out)
        clock.advance(0.02)
    clock.advance(1.0)  # let idle detection close any open segment
    for out in frontend.process_pending():
        outputs[out.frame.speaker_id or ""].append(out)
    return outputs


def _check(checks: list[dict[str, Any]], name: str, passed: bool, detail: str) -> bool:
    checks.append({"name": name, "passed": bool(passed), "detail": detail})
    return bool(passed)


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def run_audio_self_test(settings: FrontEndSettings | None = None) -> dict[str, Any]:
    """Run the audio self-test; ``passed`` is True only when every check passed.

    Returns:
        ``{"passed", "apm": {"provider", "erle_db", "frame_us_p50", "frame_us_p95"},
        "echo_only": {"speech_starts", "interruptions"}, "double_talk": {"user_speech_detected"},
        "vad": {"provider", "frame_us_p95"}, "checks": [{"name", "passed", "detail"}, ...],
        "apm_comparison": [{"provider", "available", "erle_db", "erle_first_2s_db", "frame_us_p50",
        "frame_us_p95", "error"}, ...]}``
    """
    settings = settings or FrontEndSettings()
    checks: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "passed": False,
        "apm": {
            "provider": settings.apm_provider,
            "erle_db": None,
            "frame_us_p50": None,
            "frame_us_p95": None,
        },
        "echo_only": {"speech_starts": None, "interruptions": None},
        "double_talk": {"user_speech_detected": False},
        "vad": {"provider": settings.vad_provider, "frame_us_p95": None},
        "checks": checks,
        "apm_comparison": compare_apms(settings),
    }
    bus, clock = EventBus(), FakeClock()
    run = _Run()
    bus.subscribe(Event, run.events.append)
    try:
        frontend = FrontEnd(settings, bus=bus, clock=clock, session_id="self-test")
    except OpenabError as exc:
        _check(checks, "providers", False, str(exc))
        return result
    ok = _check(
        checks,
        "providers",
        not frontend.degraded,
        f"apm={frontend.apm_capabilities.name} vad={frontend.vad_capabilities.name}"
        + (f" degraded: {', '.join(frontend.degraded_reasons)}" if frontend.degraded else ""),
    )
    result["apm"]["provider"] = frontend.apm_capabilities.name
    result["vad"]["provider"] = frontend.vad_capabilities.name
    try:
        ok = _echo_scenes(frontend, clock, run, result, checks) and ok
        ok = _vad_scenes(frontend, clock, run, result, checks) and ok
    finally:
        frontend.remove_speaker(_ECHO)
        frontend.remove_speaker(_DOUBLE)
        frontend.process_pending()
    result["passed"] = ok and all(c["passed"] for c in checks)
    return result


def _echo_scenes(
    frontend: FrontEnd, clock: FakeClock, run: _Run, result: dict[str, Any], checks: list[dict[str, Any]]
) -> bool:
    rate = scenes.CLIP_RATE
    far = scenes.load_clip("far_end")
    playback = np.concatenate((far, far, scenes.silence(1.0)))
    total_s = playback.size / rate
    echo = scenes.echo_path(playback, delay_ms=ECHO_DELAY_MS, gain_db=ECHO_GAIN_DB, rt60_ms=ECHO_RT60_MS)
    floor = scenes.noise(total_s, -70.0, seed=7)
    user_at = far.size / rate + 1.0
    alice = scenes.load_clip("alice")
    user = scenes.place(alice, at_s=user_at, total_s=total_s)
    near_echo = scenes.mix(echo, floor)
    near_double = scenes.mix(echo, user, floor)
    t0 = clock.monotonic()
    run.outputs.update(
        _play(
            frontend,
            clock,
            scenes.discord_frames(playback, speaker_id=None, start_time=t0),
            {
                _ECHO: scenes.discord_frames(near_echo, speaker_id=_ECHO, start_time=t0),
                _DOUBLE: scenes.discord_frames(near_double, speaker_id=_DOUBLE, start_time=t0),
            },
        )
    )
    # ERLE over the second playback: input and output energies of the echo-only listener.
    processed = run.audio(_ECHO).astype(np.float64)
    lo, hi = far.size, min(2 * far.size, processed.size)
    e_in = float(np.sum(near_echo[lo:hi].astype(np.float64) ** 2))
    e_out = float(np.sum(processed[lo:hi] ** 2))
    erle = round(float(10.0 * np.log10(e_in / max(e_out, 1.0))), 1)
    pipeline = frontend.pipeline(_ECHO)
    apm_us = pipeline.timings.samples_us("apm") if pipeline is not None else []
    result["apm"].update(
        erle_db=erle, frame_us_p50=_percentile(apm_us, 50), frame_us_p95=_percentile(apm_us, 95)
    )
    starts = run.starts(_ECHO)
    interruptions = [s for s in starts if s.during_playback]
    result["echo_only"].update(speech_starts=len(starts), interruptions=len(interruptions))
    user_end = user_at + alice.size / rate
    double_starts = run.starts(_DOUBLE)
    detected = [
        s for s in double_starts if s.during_playback and t0 + user_at - 0.1 <= s.audio_time <= t0 + user_end
    ]
    early = [s for s in double_starts if s.audio_time < t0 + user_at - 0.1]
    result["double_talk"]["user_speech_detected"] = bool(detected)
    p95 = result["apm"]["frame_us_p95"]
    results = [
        _check(
            checks, "apm_erle", erle >= ERLE_TARGET_DB, f"{erle} dB after convergence (>= {ERLE_TARGET_DB})"
        ),
        _check(
            checks,
            "apm_latency",
            p95 is not None and p95 <= APM_P95_TARGET_US,
            f"P95 {p95} us per 10 ms frame per speaker over {len(apm_us)} frames (<= {APM_P95_TARGET_US})",
        ),
        _check(
            checks,
            "echo_only",
            not starts and not interruptions,
            f"{len(starts)} speech starts, {len(interruptions)} interruptions over {total_s:.1f} s of echo",
        ),
        _check(
            checks,
            "double_talk",
            bool(detected) and not early,
            f"user speech at {user_at:.2f}-{user_end:.2f} s; detected at "
            f"{[round(s.audio_time - t0, 2) for s in detected]}; echo-only starts before it: {len(early)}",
        ),
    ]
    return all(results)


def _vad_scenes(
    frontend: FrontEnd, clock: FakeClock, run: _Run, result: dict[str, Any], checks: list[dict[str, Any]]
) -> bool:
    rate = scenes.CLIP_RATE
    bob = scenes.load_clip("bob")
    speech_at = 0.5
    clip = scenes.place(bob, at_s=speech_at, total_s=speech_at + bob.size / rate + 1.0)
    hiss = scenes.noise(3.0, -40.0, seed=3)
    t0 = clock.monotonic()
    run.outputs.update(
        _play(
            frontend,
            clock,
            [],
            {
                _VAD: scenes.discord_frames(clip, speaker_id=_VAD, start_time=t0),
                _NOISE: scenes.discord_frames(hiss, speaker_id=_NOISE, start_time=t0),
            },
        )
    )
    starts, ends = run.starts(_VAD), run.ends(_VAD)
    active_start, active_end = scenes.active_span(bob)
    true_start, true_end = speech_at + active_start, speech_at + active_end
    onset = round(starts[0].audio_time - t0, 3) if starts else None
    offset = round(ends[-1].audio_time - t0, 3) if ends else None
    pipeline = frontend.pipeline(_VAD)
    vad_us = pipeline.timings.samples_us("vad") if pipeline is not None else []
    result["vad"]["frame_us_p95"] = _percentile(vad_us, 95)
    noise_starts = run.starts(_NOISE)
    frontend.remove_speaker(_VAD)
    frontend.remove_speaker(_NOISE)
    return all(
        [
            _check(
                checks,
                "vad_speech",
                onset is not None
                and offset is not None
                and abs(onset - true_start) <= VAD_ONSET_TOLERANCE_S
                and -0.1 <= offset - true_end <= VAD_END_TOLERANCE_S,
                f"speech {true_start:.2f}-{true_end:.2f} s; detected start {onset}, end {offset}, "
                f"{len(starts)} segment(s)",
            ),
            _check(
                checks, "vad_noise", not noise_starts, f"{len(noise_starts)} speech starts on -40 dBFS noise"
            ),
        ]
    )
