"""VAD: hysteresis on scripted scores, and real detectors on the shipped speech vs silence and noise."""

from __future__ import annotations

import numpy as np
import pytest

from openab_voice.audio import FrontEnd, FrontEndSettings, SpeechEnded, SpeechStarted, scenes
from openab_voice.audio.vad import VadEdge, VadStage
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock
from openab_voice.providers.vad import VadCapabilities


class ScriptedVad:
    """Returns scripted scores, one per 512-sample window; raises where the script says ``None``."""

    def __init__(self, scores: list[float | None]) -> None:
        self.scores = list(scores)
        self.resets = 0

    @property
    def capabilities(self) -> VadCapabilities:
        return VadCapabilities(name="scripted", frame_samples=512, sample_rate=16_000)

    def speech_probability(self, samples: np.ndarray) -> float:
        assert samples.shape == (512,)
        score = self.scores.pop(0)
        if score is None:
            raise RuntimeError("onnxruntime: invalid state")
        return score

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        return None


WINDOW_S = 512 / 16_000


def run_scores(
    scores: list[float | None], **overrides: int
) -> tuple[list[tuple[VadEdge, float]], list[Exception]]:
    settings = FrontEndSettings(**overrides)  # type: ignore[arg-type]
    errors: list[Exception] = []
    detectors = [ScriptedVad(scores), ScriptedVad([0.0] * len(scores))]
    stage = VadStage(lambda: detectors.pop(0), settings, 16_000, on_error=errors.append)
    transitions = []
    audio = np.zeros(512 * len(scores), dtype=np.int16)
    for i in range(0, audio.size, 160):  # fed in 10 ms chunks, like the pipeline
        _, found = stage.push(audio[i : i + 160], 100.0 + i / 16_000)
        transitions += [(t.edge, round(t.audio_time - 100.0, 4)) for t in found]
    return transitions, errors


def test_hysteresis_start_hold_and_end() -> None:
    scores = [0.1, 0.2, 0.6, 0.9, 0.4, 0.45, 0.3, 0.2] + [0.1] * 12 + [0.8] + [0.1] * 14
    transitions, _ = run_scores(scores, vad_min_speech_ms=32, vad_min_silence_ms=320)
    # Start at the first window >= 0.5; 0.4/0.45 are between the thresholds and hold speech; the end
    # is the first window below 0.35 once 320 ms (10 windows) of them have followed.
    assert transitions[0] == (VadEdge.START, round(2 * WINDOW_S, 4))
    assert transitions[1] == (VadEdge.END, round(6 * WINDOW_S, 4))
    assert transitions[2] == (VadEdge.START, round(20 * WINDOW_S, 4))
    assert transitions[3] == (VadEdge.END, round(21 * WINDOW_S, 4))
    assert len(transitions) == 4


def test_short_pause_does_not_split_and_short_blip_does_not_start() -> None:
    scores = [0.9] * 5 + [0.1] * 6 + [0.9] * 5 + [0.1] * 14
    transitions, _ = run_scores(scores, vad_min_speech_ms=32, vad_min_silence_ms=400)
    assert [t[0] for t in transitions] == [VadEdge.START, VadEdge.END]
    blip, _ = run_scores([0.1, 0.9, 0.1, 0.1, 0.1], vad_min_speech_ms=64, vad_min_silence_ms=400)
    assert blip == []


def test_a_failing_detector_is_replaced_and_reported() -> None:
    transitions, errors = run_scores([0.1, None, 0.1, 0.1])
    assert transitions == []
    assert len(errors) == 1 and "invalid state" in str(errors[0])


def speech_events(speaker_audio: np.ndarray, provider: str) -> tuple[list[Event], float]:
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    frontend = FrontEnd(FrontEndSettings(vad_provider=provider), bus=bus, clock=clock)  # type: ignore[arg-type]
    t0 = clock.monotonic()
    for frame in scenes.discord_frames(speaker_audio, speaker_id="u1", start_time=t0):
        frontend.push_capture(frame)
        frontend.process_pending()
        clock.advance(0.02)
    return events, t0


@pytest.mark.parametrize("provider", ["silero", "webrtcvad"])
def test_speech_clip_starts_and_ends_one_segment(provider: str) -> None:
    alice = scenes.load_clip("alice")
    audio = scenes.place(alice, at_s=0.5, total_s=0.5 + alice.size / 16_000 + 0.8)
    events, t0 = speech_events(audio, provider)
    start, end = scenes.active_span(alice)
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    ends = [e for e in events if isinstance(e, SpeechEnded)]
    assert len(starts) == 1 and len(ends) == 1, [type(e).__name__ for e in events]
    assert starts[0].event_type == "speech_start" and ends[0].event_type == "speech_end"
    assert starts[0].speaker_id == "u1" and not starts[0].during_playback
    assert abs(starts[0].audio_time - t0 - (0.5 + start)) <= 0.15
    assert -0.1 <= ends[0].audio_time - t0 - (0.5 + end) <= 0.6
    assert ends[0].started_audio_time == starts[0].audio_time
    assert ends[0].at >= ends[0].audio_time + 0.39  # declared only after the minimum silence


@pytest.mark.parametrize("provider", ["silero", "webrtcvad"])
def test_silence_starts_nothing(provider: str) -> None:
    events, _ = speech_events(scenes.silence(2.0), provider)
    assert not [e for e in events if isinstance(e, SpeechStarted)]


def test_silero_ignores_steady_noise() -> None:
    events, _ = speech_events(scenes.noise(2.0, -35.0, seed=5), "silero")
    assert not [e for e in events if isinstance(e, SpeechStarted)]


def test_an_onset_after_a_capture_gap_carries_its_own_time() -> None:
    # Discord sends nothing in silence: after 1.5 s without packets the next samples do not continue
    # the less-than-a-window left over from before, and must not be stamped with its time.
    stage = VadStage(lambda: ScriptedVad([0.1] + [0.9] * 8), FrontEndSettings(), 16_000, on_error=print)
    chunk = np.zeros(160, dtype=np.int16)
    t = 100.0
    for _ in range(4):  # 640 samples: one window scored, 128 left over
        stage.push(chunk, t)
        t += 0.01
    resumed = t + 1.5
    onsets = []
    for i in range(10):
        _, found = stage.push(chunk, resumed + i * 0.01)
        onsets += [x.audio_time for x in found if x.edge is VadEdge.START]
    assert onsets and onsets[0] == pytest.approx(resumed, abs=0.001)
    # Contiguous samples still join the leftovers: the windows are those of one stream.
    stage2 = VadStage(lambda: ScriptedVad([0.1] * 10), FrontEndSettings(), 16_000, on_error=print)
    times = [w.audio_time for i in range(8) for w in stage2.push(chunk, 100.0 + i * 0.01)[0]]
    assert times == pytest.approx([100.0, 100.0 + 512 / 16_000])
