"""Front-end benchmark: CPU per speaker per second of audio, and speakers one core sustains.

Prepared before timing: each speaker's Opus packets (a different shipped Piper clip per speaker,
looped, encoded by ``discord.opus.Encoder`` as a Discord client would) and the bot's render
reference (``far_end``, looped, so the bot is always playing).

Timed, single-threaded, tick by tick (20 ms of audio per tick): Opus decode per speaker
(``discord.opus.Decoder``) -> :meth:`FrontEnd.push_capture`, the render frame ->
:meth:`FrontEnd.push_render`, then :meth:`FrontEnd.process_pending` (resample, APM with the render
fan-out, VAD, echo gate). CPU is the thread's CPU time (``clock.thread_cpu_ns``), so other processes
on the machine inflate wall time but not the result; the shared render work is split over speakers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from openab_voice.audio import scenes
from openab_voice.audio.apm_compare import compare_apms
from openab_voice.audio.frame import DISCORD_CHANNELS, DISCORD_FRAME_SAMPLES, DISCORD_RATE, AudioFrame
from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.resample import Samples
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock, perf_ns, thread_cpu_ns
from openab_voice.errors import ProviderUnavailable

__all__ = ["TARGET_SPEAKERS_PER_CORE", "run"]

TARGET_SPEAKERS_PER_CORE = 25
_CLIPS = ("alice", "bob", "greeting", "far_end")
_TICK_S = DISCORD_FRAME_SAMPLES / DISCORD_RATE


def _opus() -> Any:
    import discord.opus as opus

    if not opus.is_loaded() and not opus._load_default():
        raise ProviderUnavailable(
            "libopus is not loaded (install the system package libopus0)", kind="codec", provider="opus"
        )
    return opus


def _looped(name: str, seconds: float, offset_s: float) -> Samples:
    clip = np.concatenate((scenes.load_clip(name), scenes.silence(0.4)))
    need = round(seconds * scenes.CLIP_RATE)
    reps = need // clip.size + 2
    start = round(offset_s * scenes.CLIP_RATE) % clip.size
    out: Samples = np.tile(clip, reps)[start : start + need]
    return out


def _packets(samples: Samples, encoder: Any) -> list[bytes]:
    frames = scenes.discord_frames(samples, speaker_id="encode", start_time=0.0)
    return [encoder.encode(f.pcm, DISCORD_FRAME_SAMPLES) for f in frames]


def run(
    *, seconds: float = 10.0, speakers: int = 4, settings: FrontEndSettings | None = None
) -> dict[str, Any]:
    """Benchmark the front end for ``speakers`` concurrent speakers over ``seconds`` of audio.

    The headline figures use the configured ``aec_reference`` (default ``auto``: these echo-free
    speakers never couple, so their APMs get no render, but the coupling check runs every 50 ms while
    they talk over the bot). ``other_reference`` repeats the run with the other mode (``always``: every
    APM gets the render, as if every microphone carried the bot), so both costs are on record.

    Returns:
        A JSON-friendly dict: CPU ms per speaker per audio second, speakers per core in real time,
        per-stage microseconds per 20 ms frame, whether the 25-speakers-per-core target is met, and
        ``apm_comparison`` (:func:`openab_voice.audio.apm_compare.compare_apms`: ERLE and microseconds
        per 10 ms frame of every APM provider on the same echo path).
    """
    if speakers < 1 or seconds <= 0:
        raise ValueError("need at least one speaker and a positive duration")
    opus = _opus()
    base = settings or FrontEndSettings()
    ids = [f"bench-{i}" for i in range(speakers)]
    packets = {
        sid: _packets(_looped(_CLIPS[i % len(_CLIPS)], seconds, 0.37 * i), opus.Encoder())
        for i, sid in enumerate(ids)
    }
    result = _timed(base, ids, packets, seconds, opus)
    other = dataclasses.replace(base, aec_reference="always" if base.aec_reference == "auto" else "auto")
    second = _timed(other, ids, packets, seconds, opus)
    result["other_reference"] = {
        key: second[key]
        for key in ("aec_reference", "cpu_ms_per_speaker_per_audio_s", "realtime_speakers_per_core")
    }
    # Both APM providers on one echo path, so the configured one's cost is seen beside the other's.
    result["apm_comparison"] = compare_apms(base)
    return result


def _timed(
    settings: FrontEndSettings, ids: list[str], packets: dict[str, list[bytes]], seconds: float, opus: Any
) -> dict[str, Any]:
    speakers = len(ids)
    clock = FakeClock()
    render = scenes.discord_frames(
        _looped("far_end", seconds, 0.0), speaker_id=None, start_time=clock.monotonic()
    )
    decoders = {sid: opus.Decoder() for sid in ids}
    frontend = FrontEnd(settings, bus=EventBus(), clock=clock)
    ticks = min(len(render), *(len(p) for p in packets.values()))

    decode_ns = 0
    wall_start, cpu_start = perf_ns(), thread_cpu_ns()
    for i in range(ticks):
        now = clock.monotonic()
        frontend.push_render(render[i])
        for sid in ids:
            d0 = perf_ns()
            pcm = decoders[sid].decode(packets[sid][i])
            decode_ns += perf_ns() - d0
            frontend.push_capture(
                AudioFrame(
                    pcm=pcm,
                    sample_rate=DISCORD_RATE,
                    channels=DISCORD_CHANNELS,
                    timestamp=now,
                    frame_id=i,
                    speaker_id=sid,
                )
            )
        frontend.process_pending()
        clock.advance(_TICK_S)
    cpu_ns = thread_cpu_ns() - cpu_start
    wall_ns = perf_ns() - wall_start

    audio_s = ticks * _TICK_S
    cpu_ms_per_speaker_s = cpu_ns / 1e6 / speakers / audio_s
    stage_us: dict[str, float | None] = {"opus_decode": round(decode_ns / 1000.0 / (ticks * speakers), 1)}
    for stage, per_frame in (("resample", 1), ("apm", 2), ("vad", _TICK_S / 0.032)):
        values = [
            v for sid in ids if (p := frontend.pipeline(sid)) is not None for v in p.timings.samples_us(stage)
        ]
        stage_us[stage] = round(float(np.mean(values)) * per_frame, 1) if values else None
    per_core = int(1000.0 / cpu_ms_per_speaker_s) if cpu_ms_per_speaker_s > 0 else 0
    result: dict[str, Any] = {
        "seconds": round(audio_s, 2),
        "speakers": speakers,
        "apm_provider": frontend.apm_capabilities.name,
        "vad_provider": frontend.vad_capabilities.name,
        "aec_reference": settings.aec_reference,
        "cpu_ms_per_speaker_per_audio_s": round(cpu_ms_per_speaker_s, 2),
        "wall_ms_per_speaker_per_audio_s": round(wall_ns / 1e6 / speakers / audio_s, 2),
        "cpu_us_per_speaker_frame": round(cpu_ns / 1000.0 / (ticks * speakers), 1),
        "stage_us_per_20ms_frame": stage_us,
        "realtime_speakers_per_core": per_core,
        "target_speakers_per_core": TARGET_SPEAKERS_PER_CORE,
        "meets_target": per_core >= TARGET_SPEAKERS_PER_CORE,
    }
    for sid in ids:
        frontend.remove_speaker(sid)
    frontend.process_pending()
    return result
