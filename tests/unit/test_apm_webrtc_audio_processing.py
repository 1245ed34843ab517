"""The optional ``webrtc-audio-processing`` APM (AEC2): a real build (scripts/setup.sh installs the
extra), on a real echo path."""

from __future__ import annotations

import numpy as np
import pytest

from openab_voice.audio import scenes
from openab_voice.audio.apm_compare import compare_apms, echo_path_scene
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.errors import AudioError, ProviderUnavailable
from openab_voice.providers.apm import ApmConfig, AudioProcessor, apm_registry
from openab_voice.providers.registry import refuse

NAME = "webrtc-audio-processing"


def test_processes_10ms_frames_and_declares_what_it_does() -> None:
    apm = apm_registry().create(NAME, ApmConfig(sample_rate=16_000))
    try:
        assert isinstance(apm, AudioProcessor)
        caps = apm.capabilities
        assert (caps.name, caps.frame_ms, caps.degraded) == (NAME, 10, False)
        assert caps.echo_cancellation and caps.noise_suppression and caps.auto_gain_control
        assert caps.high_pass_filter is False  # the binding has no switch for it: declared, not faked
        apm.process_render(np.zeros(160, dtype=np.int16).tobytes())
        out = apm.process_capture(np.zeros(160, dtype=np.int16).tobytes())
        assert isinstance(out, bytes) and len(out) == 320
    finally:
        apm.close()


@pytest.mark.parametrize("rate", [8_000, 16_000, 32_000, 48_000])
def test_every_webrtc_rate_gives_frames_of_the_same_size(rate: int) -> None:
    apm = apm_registry().create(NAME, ApmConfig(sample_rate=rate))
    try:
        tone = (3000 * np.sin(np.arange(rate // 100) * 0.2)).astype(np.int16).tobytes()
        apm.process_render(tone)
        assert len(apm.process_capture(tone)) == len(tone)
    finally:
        apm.close()


def test_reduces_a_synthetic_echo_by_a_measurable_amount() -> None:
    render, near, second = echo_path_scene()
    apm = apm_registry().create(
        NAME, ApmConfig(sample_rate=16_000, noise_suppression=False, auto_gain_control=False)
    )
    out = []
    try:
        for i in range(0, min(render.size, near.size) - 160 + 1, 160):
            apm.process_render(render[i : i + 160].tobytes())
            out.append(np.frombuffer(apm.process_capture(near[i : i + 160].tobytes()), dtype=np.int16))
    finally:
        apm.close()
    cleaned = np.concatenate(out).astype(np.float64)
    lo, hi = second, 2 * second
    erle = 10 * np.log10(np.sum(near[lo:hi].astype(np.float64) ** 2) / np.sum(cleaned[lo:hi] ** 2))
    # AEC2 alone, with the delay it estimated itself (the path's true delay is 120 ms): 40.6 dB measured.
    assert apm.delay_ms is not None and abs(apm.delay_ms - 120.0) <= 2.0
    assert erle >= 30.0, f"ERLE {erle:.1f} dB"


def test_a_configured_delay_hint_is_used_as_is() -> None:
    apm = apm_registry().create(NAME, ApmConfig(sample_rate=16_000, stream_delay_ms=80))
    try:
        assert apm.delay_ms == 80.0
    finally:
        apm.close()


def test_wrong_frame_sizes_are_structured_errors_not_native_reads() -> None:
    apm = apm_registry().create(NAME, ApmConfig(sample_rate=16_000))
    try:
        with pytest.raises(AudioError) as capture:
            apm.process_capture(bytes(100))
        assert capture.value.code == "AUDIO_APM_FORMAT_MISMATCH"
        assert capture.value.details["expected_bytes"] == 320 and capture.value.details["got_bytes"] == 100
        with pytest.raises(AudioError):
            apm.process_render(bytes(640))
    finally:
        apm.close()
    with pytest.raises(RuntimeError):
        apm.process_capture(bytes(320))  # closed
    apm.close()  # idempotent


def test_unsupported_format_fails_at_start_up_as_unavailable() -> None:
    with pytest.raises(ProviderUnavailable) as info:
        apm_registry().create(NAME, ApmConfig(sample_rate=44_100))
    assert info.value.details["provider"] == NAME
    assert "44100" in str(info.value)


def test_missing_binding_names_the_extra() -> None:
    registry = apm_registry(importer=refuse({"webrtc_audio_processing"}))
    with pytest.raises(ProviderUnavailable) as info:
        registry.create(NAME, ApmConfig(sample_rate=16_000))
    assert info.value.details["extra"] == NAME
    assert info.value.details["install"] == f"pip install 'openab-voice[{NAME}]'"


def test_comparison_runs_both_providers_on_the_same_echo_path() -> None:
    rows = compare_apms(FrontEndSettings())
    assert [r["provider"] for r in rows] == ["webrtc", NAME]
    for row in rows:
        assert row["available"] and row["error"] is None, row
        assert row["erle_db"] >= 30.0, row
        assert 0 < row["frame_us_p50"] <= row["frame_us_p95"]
        assert row["erle_first_2s_db"] is not None


def test_comparison_reports_an_unavailable_provider_with_its_error() -> None:
    rows = compare_apms(FrontEndSettings(), providers=("speex",))
    assert rows[0]["available"] is False and rows[0]["erle_db"] is None
    assert rows[0]["error"]["code"] == "CONFIG_INVALID"


def test_echo_path_scene_matches_the_clip_length() -> None:
    render, near, second = echo_path_scene()
    assert render.size == near.size and second == scenes.load_clip("far_end").size


def test_echo_path_scene_at_another_internal_rate() -> None:
    render16, near16, second16 = echo_path_scene()
    render48, near48, second48 = echo_path_scene(48_000)
    assert second48 == 3 * second16 and abs(render48.size - 3 * render16.size) <= 3
    assert render48.dtype == near48.dtype == np.int16
