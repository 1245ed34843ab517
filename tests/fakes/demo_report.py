"""A short, deterministic demo told as real bus events: what the HTML report's tests render.

alice asks, the bot answers in full; bob says something not addressed to the bot; alice barges in on
the second answer (cut after its first sentence); an echo onset is rejected; alice's task is proposed,
confirmed and succeeds, and its stale "waiting for confirmation" announcement is dropped. Times are seconds after ``VoiceConnected`` (at monotonic 100.0).
"""

from __future__ import annotations

from typing import Any

from openab_voice.actions.events import ActionChanged, PermissionDecided
from openab_voice.audio.events import EchoGateDecision, SpeechEnded, SpeechStarted
from openab_voice.bus import EventBus
from openab_voice.bus.events import Event, LatencyMeasured
from openab_voice.discord.wire.events import (
    DaveStateChanged,
    PlaybackFinished,
    PlaybackStarted,
    ReceiveStatsUpdated,
    VoiceConnected,
)
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    SpeechDropped,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.report.builder import ReportBuilder
from openab_voice.stt.events import (
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
)

T0 = 100.0
NAMES = {"1001": "alice", "1002": "bob"}
ANSWER = "Paris is the capital of France."
STORY = "Once there was a friendly robot. It helped everyone in town."
STALE = "The task is in the text channel, waiting for confirmation."
TASK_GOAL = "Add a short readme file to the workspace."


def _gate(speaker: str, t: float, *, accepted: bool, bot_speaking: bool) -> EchoGateDecision:
    return EchoGateDecision(
        at=T0 + t,
        speaker_id=speaker,
        audio_time=T0 + t,
        accepted=accepted,
        reason="render_idle" if not bot_speaking else ("double_talk" if accepted else "echo_suppressed"),
        bot_speaking=bot_speaking,
        confidence=0.9,
        raw_dbfs=-30.0,
        residual_dbfs=-50.0 if not accepted else -32.0,
        render_dbfs=-20.0 if bot_speaking else -90.0,
        suppression_db=20.0 if not accepted else 2.0,
        render_correlation=0.8 if not accepted else 0.1,
        reference_aligned=True,
        apm_degraded=False,
    )


def _utterance(speaker: str, uid: str, text: str, start: float, end: float) -> list[Event]:
    """Speech start/end, two partials (raw, then stable) and the final of one utterance."""
    words = text.split()
    half = " ".join(words[: max(1, len(words) // 2)])
    return [
        SpeechStarted(
            at=T0 + start + 0.1,
            speaker_id=speaker,
            audio_time=T0 + start,
            probability=0.9,
            during_playback=False,
            confidence=1.0,
        ),
        *(
            TranscriptPartial(
                at=T0 + start + after,
                speaker_id=speaker,
                utterance_id=uid,
                text=half,
                stable=stable,
                audio_start=T0 + start,
                audio_end=T0 + start + heard,
            )
            for after, heard, stable in ((0.6, 0.5, False), (0.9, 0.8, True))
        ),
        SpeechEnded(
            at=T0 + end + 0.3,
            speaker_id=speaker,
            audio_time=T0 + end,
            started_audio_time=T0 + start,
            duration_s=end - start,
        ),
        TranscriptFinal(
            at=T0 + end + 0.4,
            speaker_id=speaker,
            utterance_id=uid,
            text=text,
            audio_start=T0 + start,
            audio_end=T0 + end,
            partials=2,
        ),
    ]


def _state(t: float, previous: str, state: str, turn: str | None) -> DialogueStateChanged:
    return DialogueStateChanged(at=T0 + t, previous=previous, state=state, cause="test", turn_id=turn)


def _action(t: float, status: str, previous: str | None, actor: str) -> ActionChanged:
    return ActionChanged(
        at=T0 + t,
        action_id="a-1f2e3d4c",
        status=status,
        previous=previous,
        actor=actor,
        goal=TASK_GOAL,
        proposed_by="1001",
        effect_ceiling="workspace_write",
    )


def demo_events(*, alice_question: str = "Jarvis, what is the capital of France?") -> list[Event]:
    """The whole script, in publish order. ``alice_question`` lets a test put hostile text in a transcript."""
    events: list[Event] = [
        VoiceConnected(
            at=T0,
            guild_id="1",
            channel_id="2",
            channel_name="General",
            dave_enabled=True,
            privacy_code=None,
            transport_mode="aead_xchacha20_poly1305_rtpsize",
        ),
        DaveStateChanged(at=T0 + 0.2, enabled=True, privacy_code="12345 67890 13579", epoch=1),
        _state(0.2, "idle", "listening", None),
        PlaybackStarted(at=T0 + 0.3, utterance_id="utt-1"),  # the greeting: no turn
        PlaybackFinished(at=T0 + 2.1, utterance_id="utt-1", played_ms=1800.0, interrupted=False),
        _gate("1001", 2.5, accepted=True, bot_speaking=False),
        *_utterance("1001", "1001:1", alice_question, 2.5, 4.6),
        TurnAccepted(at=T0 + 5.0, speaker_id="1001", turn_id="turn-1", text=alice_question),
        _state(5.0, "listening", "thinking", "turn-1"),
        _state(5.6, "thinking", "speaking", "turn-1"),
        PlaybackStarted(at=T0 + 5.7, utterance_id="utt-2"),
        LatencyMeasured(at=T0 + 5.7, metric="eou_to_first_audio_ms", value_ms=1100.0, speaker_id="1001"),
        LatencyMeasured(at=T0 + 5.5, metric="tts_first_chunk_ms", value_ms=180.0),
        _gate("1001", 6.2, accepted=False, bot_speaking=True),  # the bot's own voice in alice's capture
        PlaybackFinished(at=T0 + 7.9, utterance_id="utt-2", played_ms=2200.0, interrupted=False),
        BotUtteranceFinished(
            at=T0 + 8.0, turn_id="turn-1", text=ANSWER, spoken_text=ANSWER, interrupted=False
        ),
        _state(8.0, "speaking", "listening", "turn-1"),
        _gate("1002", 9.0, accepted=True, bot_speaking=False),
        *_utterance("1002", "1002:1", "I think the robot story was nice.", 9.0, 11.0),
        TurnIgnored(
            at=T0 + 11.4, speaker_id="1002", text="I think the robot story was nice.", reason="not_addressed"
        ),
        TranscriptionBacklog(at=T0 + 11.2, waiting=1, talking=0, partials_shed=3, oldest_wait_ms=200.0),
        TranscriptionBacklog(at=T0 + 11.4, waiting=0, talking=0, partials_shed=3, oldest_wait_ms=0.0),
        TranscriptDiscarded(at=T0 + 11.6, speaker_id="1002", utterance_id="1002:2", reason="no_speech"),
        _gate("1001", 12.0, accepted=True, bot_speaking=False),
        *_utterance("1001", "1001:2", "Jarvis, tell me a short story.", 12.0, 13.8),
        TurnAccepted(
            at=T0 + 14.2, speaker_id="1001", turn_id="turn-2", text="Jarvis, tell me a short story."
        ),
        _state(14.2, "listening", "thinking", "turn-2"),
        _state(14.7, "thinking", "speaking", "turn-2"),
        PlaybackStarted(at=T0 + 14.8, utterance_id="utt-3"),
        LatencyMeasured(at=T0 + 14.8, metric="eou_to_first_audio_ms", value_ms=1000.0, speaker_id="1001"),
        LatencyMeasured(at=T0 + 14.6, metric="tts_first_chunk_ms", value_ms=210.0),
        _gate("1001", 17.0, accepted=True, bot_speaking=True),
        SpeechStarted(
            at=T0 + 17.05,
            speaker_id="1001",
            audio_time=T0 + 17.0,
            probability=0.95,
            during_playback=True,
            confidence=0.9,
        ),
        InterruptionDetected(
            at=T0 + 17.06, speaker_id="1001", turn_id="turn-2", state="speaking", confidence=0.9
        ),
        _state(17.06, "speaking", "interrupted", "turn-2"),
        LatencyMeasured(at=T0 + 17.1, metric="barge_in_ms", value_ms=100.0, speaker_id="1001"),
        PlaybackFinished(at=T0 + 17.1, utterance_id="utt-3", played_ms=2300.0, interrupted=True),
        BotUtteranceFinished(
            at=T0 + 17.2,
            turn_id="turn-2",
            text=STORY,
            spoken_text="Once there was a friendly robot.",
            interrupted=True,
        ),
        _state(17.2, "interrupted", "listening", "turn-2"),
        # The story resumes under the same turn and is cut again while thinking: nothing of it played.
        _state(17.3, "listening", "thinking", "turn-2"),
        _state(17.5, "thinking", "interrupted", "turn-2"),
        BotUtteranceFinished(at=T0 + 17.5, turn_id="turn-2", text=STORY, spoken_text="", interrupted=True),
        _state(17.5, "interrupted", "listening", "turn-2"),
        SpeechEnded(
            at=T0 + 18.3,
            speaker_id="1001",
            audio_time=T0 + 18.0,
            started_audio_time=T0 + 17.0,
            duration_s=1.0,
        ),
        TranscriptFinal(
            at=T0 + 18.4,
            speaker_id="1001",
            utterance_id="1001:3",
            text="Jarvis, stop.",
            audio_start=T0 + 17.0,
            audio_end=T0 + 18.0,
            partials=1,
        ),
        LatencyMeasured(at=T0 + 3.3, metric="first_stable_partial_ms", value_ms=800.0, speaker_id="1001"),
        LatencyMeasured(at=T0 + 12.8, metric="first_stable_partial_ms", value_ms=780.0, speaker_id="1001"),
        _action(19.0, "proposed", None, "broker"),
        _action(19.2, "delivered", "proposed", "broker"),
        _action(21.0, "confirmed", "delivered", "operator"),
        _action(21.1, "running", "confirmed", "executor"),
        PermissionDecided(
            at=T0 + 21.5,
            action_id="a-1f2e3d4c",
            decision={"kind": "edit", "title": "Write README.md", "option_kind": "allow_once"},
        ),
        _action(22.0, "succeeded", "running", "executor"),
        SpeechDropped(
            at=T0 + 22.1,
            turn_id="announce-1",
            text=STALE,
            cause="action a-1f2e3d4c delivered",
            reason="the action is succeeded now",
            point="queued",
        ),
        ReceiveStatsUpdated(
            at=T0 + 22.5,
            speakers={
                "1001": {
                    "packets": 900,
                    "decoded_ms": 18000.0,
                    "lost": 9,
                    "concealed": 9,
                    "dropped": {"late": 1},
                },
                "1002": {"packets": 400, "decoded_ms": 8000.0, "lost": 2, "concealed": 2, "dropped": {}},
            },
        ),
    ]
    return events


def demo_report(**script: Any) -> dict[str, Any]:
    """The report a :class:`ReportBuilder` on a real :class:`EventBus` builds from :func:`demo_events`."""
    bus = EventBus()
    builder = ReportBuilder(bus)
    try:
        for event in demo_events(**script):
            bus.publish(event)
        return builder.build(
            names=NAMES,
            bot_audio_ms=6300.0,
            text_channel=[
                {
                    "id": "11",
                    "author": "Jarvis",
                    "content": f"Action `a-1f2e3d4c` proposal: {TASK_GOAL}\nConfirmed by alice.",
                    "pinned": True,
                    "components": [],
                },
                {
                    "id": "12",
                    "author": "Jarvis",
                    "content": "Action `a-1f2e3d4c` succeeded.",
                    "pinned": False,
                    "components": [],
                },
            ],
        )
    finally:
        builder.close()
