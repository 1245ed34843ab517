"""A runtime APM failure emits a structured event and recovers with a fresh instance."""

from __future__ import annotations

import numpy as np

from openab_voice.audio import AudioProcessingError, FrontEnd, FrontEndSettings, ProcessedFrame, scenes
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.providers.apm import ApmCapabilities, ApmConfig, AudioProcessor, apm_registry
from openab_voice.providers.apm_livekit import LivekitApm
from openab_voice.providers.registry import ProviderRegistry


class FlakyApm:
    """The real WebRTC APM, except that one capture call raises (as livekit's FFI can)."""

    created: list[FlakyApm] = []

    def __init__(self, config: ApmConfig, fail_at: int | None) -> None:
        self.inner = LivekitApm(config)
        self.fail_at = fail_at
        self.calls = 0
        self.closed = False
        FlakyApm.created.append(self)

    @property
    def capabilities(self) -> ApmCapabilities:
        return self.inner.capabilities

    def process_render(self, pcm: bytes) -> None:
        self.inner.process_render(pcm)

    def process_capture(self, pcm: bytes) -> bytes:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("apm_process_stream failed: internal error")
        return self.inner.process_capture(pcm)

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def front_end(
    registry: ProviderRegistry[ApmConfig, AudioProcessor],
) -> tuple[FakeClock, list[Event], FrontEnd]:
    """A front end on a fake clock, its APM from ``registry``, and every event it publishes."""
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    return clock, events, FrontEnd(FrontEndSettings(), bus=bus, clock=clock, apm_providers=registry)


def run_front_end(factory_fail_at: list[int | None]) -> tuple[list[Event], list[ProcessedFrame], np.ndarray]:
    """Two seconds of speech over playback; the n-th APM instance fails at ``factory_fail_at[n]``."""
    FlakyApm.created = []
    plan = iter(factory_fail_at)
    registry = apm_registry()
    registry.register(registry.spec("webrtc"), lambda cfg: FlakyApm(cfg, next(plan, None)))
    clock, events, frontend = front_end(registry)
    speech = scenes.place(scenes.load_clip("alice"), at_s=0.2, total_s=2.0)
    t0 = clock.monotonic()
    render = scenes.discord_frames(scenes.load_clip("far_end")[:32_000], speaker_id=None, start_time=t0)
    capture = scenes.discord_frames(speech, speaker_id="u1", start_time=t0)
    outputs: list[ProcessedFrame] = []
    for r, c in zip(render, capture, strict=True):
        frontend.push_render(r)
        frontend.push_capture(c)
        outputs += frontend.process_pending()
        clock.advance(0.02)
    return events, outputs, speech


def test_runtime_error_recovers_with_a_fresh_instance() -> None:
    # Instance 1 is the start-up probe; instance 2 serves u1 and fails on its 40th frame.
    events, outputs, _ = run_front_end([None, 40])
    errors = [e for e in events if isinstance(e, AudioProcessingError)]
    assert len(errors) == 1
    err = errors[0]
    assert err.event_type == "audio_processing_error"
    assert (err.speaker_id, err.component, err.provider) == ("u1", "apm", "webrtc")
    assert err.code == "AUDIO_APM_RUNTIME_ERROR" and err.recovered and err.generation == 2
    assert "internal error" in err.message
    failed, fresh = FlakyApm.created[1], FlakyApm.created[2]
    assert failed.closed and not fresh.closed and fresh.calls > 100
    # Every frame still came out, in order, in the internal format.
    ids = [o.frame.frame_id for o in outputs]
    assert ids == sorted(ids) and len(ids) >= 98
    assert all(o.frame.sample_rate == 16_000 and o.frame.channels == 1 for o in outputs)
    bad = [o for o in outputs if not o.apm_ok]
    assert len(bad) == 1
    # The failed chunk was replaced by silence, never by unprocessed (echo-laden) capture.
    pcm = np.frombuffer(bad[0].frame.pcm, dtype=np.int16)
    assert (pcm[:160] == 0).all() or (pcm[160:] == 0).all()
    # The fresh instance re-converges: frames after the failure are marked degraded for a while.
    after = outputs[outputs.index(bad[0]) + 1 :]
    assert after[0].degraded and not outputs[0].degraded


def test_when_no_fresh_instance_starts_output_is_silence_until_one_does() -> None:
    FlakyApm.created = []
    attempts = 0
    registry = apm_registry()

    def factory(cfg: ApmConfig) -> AudioProcessor:
        # 1: start-up probe, 2: serves u1 and fails on frame 20, 3: refused, 4: refused, 5: works.
        nonlocal attempts
        attempts += 1
        if attempts in (3, 4):
            raise OSError("out of native handles")
        return FlakyApm(cfg, 20 if attempts == 2 else None)

    registry.register(registry.spec("webrtc"), factory)
    clock, events, frontend = front_end(registry)
    speech = scenes.place(scenes.load_clip("bob"), at_s=0.0, total_s=3.0)
    outputs: list[ProcessedFrame] = []
    for frame in scenes.discord_frames(speech, speaker_id="u1", start_time=clock.monotonic()):
        frontend.push_capture(frame)
        outputs += frontend.process_pending()
        clock.advance(0.02)
    errors = [e for e in events if isinstance(e, AudioProcessingError)]
    assert len(errors) == 1 and not errors[0].recovered
    muted = [o for o in outputs if not o.apm_ok]
    assert len(muted) >= 40  # retried once per second of audio
    assert all(not np.frombuffer(o.frame.pcm, dtype=np.int16).any() for o in muted[1:])
    assert outputs[-1].apm_ok  # a later retry succeeded
    pipeline = frontend.pipeline("u1")
    assert pipeline is not None and pipeline.apm.generation == 2


def test_a_dead_native_handle_is_recovered_too() -> None:
    registry = apm_registry()
    instances: list[LivekitApm] = []

    def factory(cfg: ApmConfig) -> AudioProcessor:
        apm = LivekitApm(cfg)
        instances.append(apm)
        return apm

    registry.register(registry.spec("webrtc"), factory)
    clock, events, frontend = front_end(registry)
    frames = scenes.discord_frames(
        scenes.load_clip("greeting"), speaker_id="u1", start_time=clock.monotonic()
    )
    for frame in frames[:10]:
        frontend.push_capture(frame)
        frontend.process_pending()
    # Free the native APM under the provider: livekit rejects the next request.
    instances[1]._apm._ffi_handle.dispose()  # type: ignore[union-attr]
    outputs = []
    for frame in frames[10:30]:
        frontend.push_capture(frame)
        outputs += frontend.process_pending()
    errors = [e for e in events if isinstance(e, AudioProcessingError)]
    assert len(errors) == 1 and errors[0].recovered and "rejected" in errors[0].message
    assert len(instances) == 3 and outputs[-1].apm_ok
