"""The echo path moves between two bot utterances: a shorter one is a new path, never a user.

Through Discord the delay from the bot's render to its echo in a listener's capture changes from one
utterance to the next (the listener's jitter buffer and playout, both network legs). AEC3 follows a
longer delay at once; a shorter one leaves its filter aligned behind the echo, and it cancels next to
nothing for seconds. The scenes here replay that: the bot speaks twice with no render between the
utterances (the player stopped, as playback does), and the echo in the speaker's capture comes back
sooner the second time.
"""

from __future__ import annotations

import numpy as np

from openab_voice.audio import EchoCouplingDetected, FrontEnd, FrontEndSettings, SpeechStarted, scenes
from openab_voice.audio.coupling import EchoCoupling
from openab_voice.audio.resample import Chunk
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event
from openab_voice.clock import FakeClock

RATE = 16_000
CHUNK = 160  # 10 ms
GAP_S = 1.0  # no render between the two utterances


def _far() -> np.ndarray:
    return scenes.load_clip("far_end")


def _second_at(gap_s: float = GAP_S) -> float:
    return _far().size / RATE + gap_s


def _near(
    first_ms: float,
    second_ms: float,
    *,
    user_at: float | None = None,
    gain_db: float = -6.0,
    gap_s: float = GAP_S,
) -> np.ndarray:
    far = _far()
    total = 2 * far.size / RATE + gap_s
    first = scenes.echo_path(far, delay_ms=first_ms, gain_db=gain_db)
    second = scenes.echo_path(far, delay_ms=second_ms, gain_db=gain_db)
    parts = [
        scenes.place(first, at_s=0.0, total_s=total),
        scenes.place(second, at_s=_second_at(gap_s), total_s=total),
        scenes.noise(total, -70.0),
    ]
    if user_at is not None:
        parts.append(scenes.place(scenes.load_clip("bob"), at_s=user_at, total_s=total))
    return scenes.mix(*parts)


def _two_utterances(
    near: np.ndarray, *, gap_s: float = GAP_S, lead_frames: int = 0
) -> tuple[list[Event], float]:
    """The bot's two utterances as render frames (none in between), ``near`` as the capture; each
    render frame pushed ``lead_frames`` capture frames ahead of its time (the player sends it as it
    reads it, the capture of that moment arrives over the network later)."""
    clock = FakeClock()
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe(Event, events.append)
    frontend = FrontEnd(FrontEndSettings(), bus=bus, clock=clock)
    t0 = clock.monotonic()
    far = _far()
    first = scenes.discord_frames(far, speaker_id=None, start_time=t0)
    second = scenes.discord_frames(
        far, speaker_id=None, start_time=t0 + _second_at(gap_s), first_frame_id=len(first)
    )
    render = {round((frame.timestamp - t0) / 0.02): frame for frame in first + second}
    for k, capture in enumerate(scenes.discord_frames(near, speaker_id="u1", start_time=t0)):
        if k + lead_frames in render:
            frontend.push_render(render[k + lead_frames])
        frontend.push_capture(capture)
        frontend.process_pending()
        clock.advance(0.02)
    return events, t0


def _of(events: list[Event], kind: type[Event]) -> list[Event]:
    return [e for e in events if isinstance(e, kind)]


def test_a_shorter_echo_path_in_the_next_utterance_never_starts_user_speech() -> None:
    events, t0 = _two_utterances(_near(120.0, 60.0))
    assert not _of(events, SpeechStarted), _of(events, SpeechStarted)
    couplings = [e.at - t0 for e in _of(events, EchoCouplingDetected)]
    # Coupled in the first utterance; the second one's shorter path found early in it.
    assert len(couplings) == 2 and couplings[0] < 1.0, couplings
    assert 0.0 < couplings[1] - _second_at() < 0.5, couplings


def test_a_short_pause_leaves_the_last_echo_in_the_window_and_still_a_shorter_path_is_found() -> None:
    # 80 ms between the utterances, the render 60 ms ahead of the capture: the first checks of the
    # second utterance see the first one's echo tail against the new render (low correlation at any
    # lag). Those are no evidence that the echo is gone.
    gap_s = 0.08
    events, t0 = _two_utterances(_near(120.0, 60.0, gap_s=gap_s), gap_s=gap_s, lead_frames=3)
    assert not _of(events, SpeechStarted), _of(events, SpeechStarted)
    couplings = [e.at - t0 for e in _of(events, EchoCouplingDetected)]
    assert len(couplings) == 2 and 0.0 < couplings[1] - _second_at(gap_s) < 0.6, couplings


def test_the_same_or_a_longer_path_keeps_the_aec_it_has() -> None:
    for first_ms, second_ms in ((120.0, 120.0), (60.0, 120.0)):
        events, _ = _two_utterances(_near(first_ms, second_ms))
        assert not _of(events, SpeechStarted)
        assert len(_of(events, EchoCouplingDetected)) == 1, (first_ms, second_ms)


def test_a_user_talking_over_the_bot_after_the_path_changed_still_interrupts() -> None:
    # Once the fresh AEC has converged (``converge_ms`` after the new path was found), as in
    # test_audio_echo_gate's double talk: the onset within a second.
    user_at = _second_at() + 1.5
    onset = user_at + scenes.active_span(scenes.load_clip("bob"))[0]
    events, t0 = _two_utterances(_near(120.0, 60.0, user_at=user_at, gain_db=-10.0))
    assert len(_of(events, EchoCouplingDetected)) == 2
    starts = [e for e in events if isinstance(e, SpeechStarted)]
    assert starts and starts[0].during_playback
    assert onset <= starts[0].audio_time - t0 <= onset + 1.0, (onset, starts[0].audio_time - t0)


def _chunks(samples: np.ndarray) -> list[np.ndarray]:
    return [samples[i * CHUNK : (i + 1) * CHUNK] for i in range(samples.size // CHUNK)]


def _observe(coupling: EchoCoupling, far: np.ndarray | None, near: np.ndarray) -> list[tuple[bool, bool]]:
    """Feed chunks (``far`` None: no render); per chunk, (what observe returned, suspected after)."""
    out = []
    renders = _chunks(far) if far is not None else None
    for i, capture in enumerate(_chunks(near)):
        render = Chunk(samples=renders[i], timestamp=i * 0.01) if renders is not None else None
        out.append((coupling.observe(capture, render), coupling.suspected))
    return out


def test_each_utterance_is_verified_before_its_onsets_are_trusted() -> None:
    far = _far()
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=RATE)
    _observe(coupling, far, scenes.echo_path(far, delay_ms=100.0, gain_db=-6.0))
    assert coupling.coupled and not coupling.suspected  # converged over the first utterance
    _observe(coupling, None, scenes.silence(GAP_S))
    assert not coupling.suspected  # the bot is silent: nothing to suspect
    same = _observe(coupling, far, scenes.echo_path(far, delay_ms=100.0, gain_db=-6.0))
    verified = [i for i, (_, suspected) in enumerate(same) if not suspected]
    assert same[0][1] and verified and verified[0] * 0.01 < 0.5  # suspected until the path is known
    assert not any(restart for restart, _ in same) and coupling.new_paths == 0
    _observe(coupling, None, scenes.silence(GAP_S))
    shorter = _observe(coupling, far, scenes.echo_path(far, delay_ms=50.0, gain_db=-6.0))
    assert [i for i, (restart, _) in enumerate(shorter) if restart][:1] and coupling.new_paths == 1
    restart = next(i for i, (r, _) in enumerate(shorter) if r)
    assert all(suspected for _, suspected in shorter[: restart + 100])  # the fresh AEC converges


def test_a_voice_at_the_start_of_an_utterance_ends_the_verification() -> None:
    far = _far()
    coupling = EchoCoupling(chunk_samples=CHUNK, rate=RATE)
    _observe(coupling, far, scenes.echo_path(far, delay_ms=100.0, gain_db=-6.0))
    _observe(coupling, None, scenes.silence(GAP_S))
    voice = scenes.place(scenes.load_clip("bob"), at_s=0.0, total_s=far.size / RATE)
    start = round(scenes.active_span(voice)[0] * 100)
    seen = _observe(coupling, far, voice)
    released = [i for i, (_, suspected) in enumerate(seen) if not suspected and i > start]
    # Misses count once the 200 ms check window holds only this utterance; two of them release it.
    assert released and released[0] * 0.01 <= 0.2 + 2 * 0.05, released[:3]
    assert coupling.new_paths == 0
