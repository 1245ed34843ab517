"""Every installed audio processor on one and the same echo path: ERLE and time per 10 ms frame.

``openab-voice self-test audio --json`` and ``openab-voice bench frontend --json`` put this table
beside their own figures, so the default APM (livekit's AEC3, ``webrtc``) and the one the product
brief names (``webrtc-audio-processing``, AEC2) are compared on equal terms.

The echo path is the self-test's (:mod:`openab_voice.diagnostics.audio`): the bot plays ``far_end``
twice; the microphone hears a copy delayed by 120 ms, attenuated by 10 dB and reverberated (RT60
150 ms) over a -70 dBFS noise floor. Each provider gets the same 10 ms frames at the front end's
internal rate, with the stages the front end is configured for, fed directly (no resampling, VAD or
echo gate): one render frame, then one capture frame, as :class:`~openab_voice.audio.apm.ApmStage`
does. ERLE over the second playback is the converged figure; over the first two seconds it shows how
fast each one converges. A provider that is not installed gets an entry with its structured error,
never a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import soxr

from openab_voice.audio import scenes
from openab_voice.audio.resample import Samples
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.clock import perf_ns
from openab_voice.errors import ErrorCode, OpenabError
from openab_voice.providers.apm import apm_registry

__all__ = [
    "COMPARED_PROVIDERS",
    "ECHO_DELAY_MS",
    "ECHO_GAIN_DB",
    "ECHO_RT60_MS",
    "compare_apms",
    "echo_path_scene",
]

COMPARED_PROVIDERS: Final = ("webrtc", "webrtc-audio-processing")
ECHO_DELAY_MS: Final = 120.0
ECHO_GAIN_DB: Final = -10.0
ECHO_RT60_MS: Final = 150.0
_CONVERGENCE_S: Final = 2.0


def echo_path_scene(rate: int = scenes.CLIP_RATE) -> tuple[Samples, Samples, int]:
    """The render reference, what the microphone hears, and the sample where the second playback starts."""
    far = scenes.load_clip("far_end")
    playback = np.concatenate((far, far, scenes.silence(1.0)))
    echo = scenes.echo_path(playback, delay_ms=ECHO_DELAY_MS, gain_db=ECHO_GAIN_DB, rt60_ms=ECHO_RT60_MS)
    near = scenes.mix(echo, scenes.noise(playback.size / scenes.CLIP_RATE, -70.0, seed=7))
    if rate != scenes.CLIP_RATE:

        def resampled(x: Samples) -> Samples:
            out: Samples = np.clip(
                np.round(soxr.resample(x.astype(np.float32), scenes.CLIP_RATE, rate)), -32768, 32767
            ).astype(np.int16)
            return out

        return resampled(playback), resampled(near), round(far.size * rate / scenes.CLIP_RATE)
    return playback, near, far.size


def _erle(near: Samples, out: Samples, lo: int, hi: int) -> float:
    e_in = float(np.sum(near[lo:hi].astype(np.float64) ** 2))
    e_out = float(np.sum(out[lo:hi].astype(np.float64) ** 2))
    return round(float(10.0 * np.log10(e_in / max(e_out, 1.0))), 1)


def _one(
    name: str, settings: FrontEndSettings, render: Samples, near: Samples, second: int
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "provider": name,
        "available": False,
        "erle_db": None,
        "erle_first_2s_db": None,
        "frame_us_p50": None,
        "frame_us_p95": None,
        "error": None,
    }
    try:
        apm = apm_registry().create(name, settings.apm_config())
    except OpenabError as exc:
        entry["error"] = exc.to_dict()
        return entry
    step = settings.internal_rate // 100
    frames = min(render.size, near.size) // step
    out = np.zeros(frames * step, dtype=np.int16)
    times: list[float] = []
    try:
        for i in range(frames):
            chunk = slice(i * step, (i + 1) * step)
            started = perf_ns()
            apm.process_render(render[chunk].tobytes())
            cleaned = apm.process_capture(near[chunk].tobytes())
            times.append((perf_ns() - started) / 1000.0)
            out[chunk] = np.frombuffer(cleaned, dtype=np.int16)
    except Exception as exc:  # a provider failing mid-run is reported, not raised: the others still run
        entry["error"] = {
            "code": getattr(exc, "code", ErrorCode.AUDIO_APM_RUNTIME_ERROR),
            "message": str(exc)[:300],
        }
        return entry
    finally:
        apm.close()
    rate = settings.internal_rate
    entry.update(
        available=True,
        erle_db=_erle(near, out, second, min(2 * second, out.size)),
        erle_first_2s_db=_erle(near, out, 0, min(round(_CONVERGENCE_S * rate), out.size)),
        frame_us_p50=round(float(np.percentile(times, 50)), 1),
        frame_us_p95=round(float(np.percentile(times, 95)), 1),
    )
    return entry


def compare_apms(
    settings: FrontEndSettings | None = None, providers: Sequence[str] = COMPARED_PROVIDERS
) -> list[dict[str, Any]]:
    """Run each provider over the same echo path.

    Returns:
        One entry per provider, in order: ``{"provider", "available", "erle_db", "erle_first_2s_db",
        "frame_us_p50", "frame_us_p95", "error"}``; figures are None and ``error`` is the structured
        error (``code``, ``message`` ...) when the provider could not run.
    """
    settings = settings or FrontEndSettings()
    render, near, second = echo_path_scene(settings.internal_rate)
    return [_one(name, settings, render, near, second) for name in providers]
