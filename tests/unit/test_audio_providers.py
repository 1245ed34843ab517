"""Provider selection through the registries, and structured unavailability."""

from __future__ import annotations

import numpy as np
import pytest

from openab_voice.audio import AudioPipelineStarted, EchoGateDecision, FrontEnd, FrontEndSettings, scenes
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.errors import ConfigError, ProviderUnavailable
from openab_voice.providers.apm import ApmConfig, AudioProcessor, apm_registry
from openab_voice.providers.registry import refuse
from openab_voice.providers.vad import VadConfig, VoiceActivityDetector, vad_registry


def test_registries_list_the_shipped_providers() -> None:
    assert apm_registry().names() == ("webrtc", "webrtc-audio-processing", "disabled")
    assert vad_registry().names() == ("silero", "webrtcvad")
    assert apm_registry().spec("disabled").development_only


def test_default_apm_is_real_webrtc_with_every_stage() -> None:
    apm = apm_registry().create("webrtc", ApmConfig(sample_rate=16_000))
    try:
        assert isinstance(apm, AudioProcessor)
        caps = apm.capabilities
        assert (caps.name, caps.frame_ms, caps.degraded) == ("webrtc", 10, False)
        assert (
            caps.echo_cancellation
            and caps.noise_suppression
            and caps.auto_gain_control
            and caps.high_pass_filter
        )
        out = apm.process_capture(np.zeros(160, dtype=np.int16).tobytes())
        apm.process_render(np.zeros(160, dtype=np.int16).tobytes())
        assert len(out) == 320
    finally:
        apm.close()


@pytest.mark.parametrize(
    ("name", "frame", "probabilistic"), [("silero", 512, True), ("webrtcvad", 320, False)]
)
def test_vad_providers_score_speech_above_silence(name: str, frame: int, probabilistic: bool) -> None:
    vad = vad_registry().create(name, VadConfig(sample_rate=16_000))
    assert isinstance(vad, VoiceActivityDetector)
    assert (vad.capabilities.name, vad.capabilities.frame_samples) == (name, frame)
    assert vad.capabilities.probabilistic is probabilistic
    clip = scenes.load_clip("alice")
    start, end = scenes.active_span(clip)
    speech = clip[round(start * 16_000) : round(end * 16_000)]
    silent = [vad.speech_probability(np.zeros(frame, dtype=np.int16)) for _ in range(10)]
    vad.reset()
    voiced = [vad.speech_probability(speech[i : i + frame]) for i in range(0, speech.size - frame, frame)]
    assert max(silent) < 0.5
    assert np.mean(np.array(voiced) >= 0.5) > 0.6


def test_unknown_provider_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        apm_registry().create("speex", ApmConfig(sample_rate=16_000))
    assert info.value.setting == "apm_provider"


def test_missing_livekit_is_a_structured_error_naming_the_extra() -> None:
    registry = apm_registry(importer=refuse({"livekit"}))
    with pytest.raises(ProviderUnavailable) as info:
        registry.create("webrtc", ApmConfig(sample_rate=16_000))
    err = info.value
    assert err.code == "PROVIDER_UNAVAILABLE"
    assert err.details["extra"] == "audio" and err.details["missing_module"] == "livekit.rtc"
    assert err.details["install"] == "pip install 'openab-voice[audio]'"
    assert "audio" in str(err)


def test_missing_onnxruntime_and_webrtcvad_name_their_extras() -> None:
    with pytest.raises(ProviderUnavailable) as silero:
        vad_registry(importer=refuse({"onnxruntime"})).create("silero", VadConfig(sample_rate=16_000))
    assert silero.value.details["extra"] == "audio"
    with pytest.raises(ProviderUnavailable) as webrtc:
        vad_registry(importer=refuse({"webrtcvad"})).create("webrtcvad", VadConfig(sample_rate=16_000))
    assert webrtc.value.details["extra"] == "webrtcvad"


def test_webrtc_audio_processing_without_its_binding_is_unavailable_with_its_extra_named() -> None:
    registry = apm_registry(importer=refuse({"webrtc_audio_processing"}))
    with pytest.raises(ProviderUnavailable) as info:
        registry.create("webrtc-audio-processing", ApmConfig(sample_rate=16_000))
    assert info.value.details["extra"] == "webrtc-audio-processing"


def test_front_end_start_up_fails_instead_of_passing_audio_through() -> None:
    with pytest.raises(ProviderUnavailable) as info:
        FrontEnd(
            FrontEndSettings(),
            bus=EventBus(),
            clock=FakeClock(),
            apm_providers=apm_registry().with_importer(refuse({"livekit"})),
        )
    assert info.value.details["provider"] == "webrtc"


def test_native_start_failure_is_a_provider_error() -> None:
    registry = apm_registry()

    def broken(config: ApmConfig) -> AudioProcessor:
        raise OSError("cannot load liblivekit_ffi.so")

    registry.register(registry.spec("webrtc"), broken)
    with pytest.raises(ProviderUnavailable) as info:
        registry.create("webrtc", ApmConfig(sample_rate=16_000))
    assert "liblivekit_ffi" in info.value.message


def test_settings_reject_inconsistent_values() -> None:
    with pytest.raises(ConfigError):
        FrontEndSettings(internal_rate=22_050)
    with pytest.raises(ConfigError):
        FrontEndSettings(internal_rate=48_000)  # silero runs at 16 kHz only
    with pytest.raises(ConfigError):
        FrontEndSettings(vad_start_threshold=0.3, vad_end_threshold=0.5)
    assert FrontEndSettings(internal_rate=48_000, vad_provider="webrtcvad").internal_rate == 48_000


def test_disabled_apm_is_reported_degraded_everywhere() -> None:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    frontend = FrontEnd(
        FrontEndSettings(apm_provider="disabled", vad_provider="webrtcvad"), bus=bus, clock=clock
    )
    assert frontend.degraded and frontend.degraded_reasons == ("apm_disabled",)
    far = scenes.load_clip("far_end")[: 16_000 * 2]
    user = scenes.place(scenes.load_clip("bob"), at_s=0.5, total_s=2.0)
    t0 = clock.monotonic()
    render = scenes.discord_frames(far, speaker_id=None, start_time=t0)
    capture = scenes.discord_frames(user, speaker_id="u1", start_time=t0)
    outputs = []
    for r, c in zip(render, capture, strict=True):
        frontend.push_render(r)
        frontend.push_capture(c)
        outputs += frontend.process_pending()
        clock.advance(0.02)
    started = [e for e in events if isinstance(e, AudioPipelineStarted)]
    assert len(started) == 1 and started[0].degraded and started[0].apm_provider == "disabled"
    assert outputs and all(o.degraded for o in outputs)
    decisions = [e for e in events if isinstance(e, EchoGateDecision)]
    assert decisions and all(d.apm_degraded for d in decisions)
