"""Resampling to the internal format and the APM format guard (AUDIO_APM_FORMAT_MISMATCH)."""

from __future__ import annotations

import numpy as np
import pytest

from openab_voice.audio import FrontEnd, FrontEndSettings
from openab_voice.audio.apm import ApmStage
from openab_voice.audio.frame import AudioFrame
from openab_voice.audio.resample import Chunker, Resampler, check_apm_format, downmix
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.errors import AudioError, ErrorCode
from openab_voice.providers.apm import ApmConfig
from openab_voice.providers.apm_disabled import DisabledApm


def tone(freq: float, rate: int, seconds: float, channels: int, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(round(rate * seconds)) / rate
    mono = np.round(np.sin(2 * np.pi * freq * t) * amplitude * 32767).astype(np.int16)
    return np.repeat(mono[:, None], channels, axis=1)


def frames_of(samples: np.ndarray, rate: int, frame_s: float = 0.02) -> list[AudioFrame]:
    step = round(rate * frame_s)
    return [
        AudioFrame(
            pcm=samples[i : i + step].tobytes(),
            sample_rate=rate,
            channels=samples.shape[1],
            timestamp=5.0 + i / rate,
            frame_id=i // step,
            speaker_id="u1",
        )
        for i in range(0, samples.shape[0] - step + 1, step)
    ]


def dominant_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x.astype(np.float64) * np.hanning(x.size)))
    return float(np.argmax(spectrum) * rate / x.size)


def test_discord_48k_stereo_becomes_16k_mono_with_the_same_content() -> None:
    resampler = Resampler(16_000)
    out = np.concatenate([resampler.process(f) for f in frames_of(tone(440.0, 48_000, 1.0, 2), 48_000)])
    assert out.dtype == np.int16 and out.ndim == 1
    assert 0 <= 16_000 - out.size <= 400  # the stream holds back ~21 ms of filter delay
    steady = out[2000:14000]
    assert abs(dominant_hz(steady, 16_000) - 440.0) < 3.0
    rms = float(np.sqrt(np.mean(steady.astype(np.float64) ** 2)))
    assert abs(rms - 0.5 * 32767 / np.sqrt(2)) / (0.5 * 32767 / np.sqrt(2)) < 0.02


def test_downmix_averages_channels() -> None:
    pcm = np.array([[1000, 3000], [-2000, -4000], [32767, 32767]], dtype=np.int16)
    frame = AudioFrame(
        pcm=pcm.tobytes(), sample_rate=48_000, channels=2, timestamp=0.0, frame_id=0, speaker_id="u"
    )
    assert downmix(frame).tolist() == [2000, -3000, 32767]


def test_a_source_changing_rate_is_resampled_explicitly() -> None:
    resampler = Resampler(16_000)
    first = np.concatenate([resampler.process(f) for f in frames_of(tone(300.0, 48_000, 0.5, 2), 48_000)])
    second = np.concatenate([resampler.process(f) for f in frames_of(tone(300.0, 44_100, 0.5, 1), 44_100)])
    # Only the current stream's filter delay (< 30 ms) is held back: nothing is lost at the switch.
    assert 0 <= 16_000 - (first.size + second.size) <= 480
    assert abs(dominant_hz(second[1000:7000], 16_000) - 300.0) < 4.0


def test_chunker_cuts_10ms_chunks_with_first_sample_timestamps() -> None:
    chunker = Chunker(160, 16_000)
    chunks = chunker.push(np.arange(400, dtype=np.int16), end_time=1.025)
    assert [c.samples.size for c in chunks] == [160, 160]
    assert chunks[0].timestamp == pytest.approx(1.0)
    assert chunks[1].timestamp == pytest.approx(1.01)
    assert chunker.pending == 80
    more = chunker.push(np.arange(80, dtype=np.int16), end_time=1.03)
    assert len(more) == 1 and more[0].timestamp == pytest.approx(1.02)
    assert more[0].samples[:80].tolist() == list(range(320, 400))


def test_check_apm_format_names_both_formats() -> None:
    check_apm_format(
        capture_rate=16_000,
        capture_channels=1,
        capture_samples=160,
        render_rate=16_000,
        render_channels=1,
        render_samples=160,
        apm_rate=16_000,
    )
    with pytest.raises(AudioError) as info:
        check_apm_format(
            capture_rate=16_000,
            capture_channels=1,
            capture_samples=160,
            render_rate=48_000,
            render_channels=2,
            render_samples=480,
            apm_rate=16_000,
        )
    assert info.value.code == ErrorCode.AUDIO_APM_FORMAT_MISMATCH == "AUDIO_APM_FORMAT_MISMATCH"
    assert info.value.details["render"] == {"rate": 48_000, "channels": 2, "samples": 480}
    assert info.value.to_dict()["capture"]["samples"] == 160


def test_apm_stage_refuses_mismatched_chunks() -> None:
    stage = ApmStage(
        lambda: DisabledApm(ApmConfig(sample_rate=16_000)),
        provider="disabled",
        sample_rate=16_000,
        speaker_id="u1",
        reconverge_s=1.0,
        clock=FakeClock(),
        emit=lambda e: None,
    )
    good = np.zeros(160, dtype=np.int16)
    out, ok = stage.process(good, good, 1.0)
    assert ok and out.size == 160
    with pytest.raises(AudioError) as twenty_ms:
        stage.process(np.zeros(320, dtype=np.int16), None, 1.0)
    assert twenty_ms.value.code == "AUDIO_APM_FORMAT_MISMATCH"
    with pytest.raises(AudioError) as stereo_render:
        stage.process(good, np.zeros((160, 2), dtype=np.int16), 1.0)
    assert stereo_render.value.code == "AUDIO_APM_FORMAT_MISMATCH"
    assert stereo_render.value.details["render"]["channels"] == 2


def test_front_end_resamples_any_render_format_to_the_capture_format() -> None:
    clock = FakeClock()
    frontend = FrontEnd(
        FrontEndSettings(apm_provider="disabled", vad_provider="webrtcvad"), bus=EventBus(), clock=clock
    )
    t0 = clock.monotonic()
    render = tone(500.0, 44_100, 0.4, 1)
    capture = tone(700.0, 48_000, 0.4, 2)
    for i, (r, c) in enumerate(zip(frames_of(render, 44_100), frames_of(capture, 48_000), strict=False)):
        frontend.push_render(
            AudioFrame(
                pcm=r.pcm,
                sample_rate=44_100,
                channels=1,
                timestamp=t0 + i * 0.02,
                frame_id=i,
                speaker_id=None,
            )
        )
        frontend.push_capture(
            AudioFrame(
                pcm=c.pcm,
                sample_rate=48_000,
                channels=2,
                timestamp=t0 + i * 0.02,
                frame_id=i,
                speaker_id="u1",
            )
        )
    outputs = frontend.process_pending()
    assert outputs and all(o.frame.sample_rate == 16_000 and o.frame.channels == 1 for o in outputs)
    pipeline = frontend.pipeline("u1")
    assert pipeline is not None and pipeline.gate.bot_speaking  # the 44.1 kHz render reached the gate
