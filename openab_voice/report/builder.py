"""The demo report, built from bus events only (plus what the emulator observed of the bot's audio).

Times in the report are seconds since the bot's voice connection came up (``VoiceConnected``).
``text_channel`` and ``emulator`` are read from the emulator: the messages the channel holds, and
what reached its voice UDP port from the bot by kind (``udp_from_bot``: ``keepalive``, ``media``,
``other``) with the datagrams to the bot its NAT dropped (``nat_dropped``), and each voice channel
status the bot set (``voice_status``: ``at``, ``channel_id``, ``status``; None when cleared).

Besides the summary, the report keeps the timeline that :mod:`openab_voice.report.page` draws: each speaker's speech
segments (the front end's speech start/end), partial and final transcripts, turn decisions, echo-gate
verdicts, the bot's playback (matched to the turn that spoke it), speech dropped as stale, barge-ins,
transcription backlog and each action's transitions. Speech and transcript spans are in audio time; everything else is when it was published.
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
    SpeechClaimCut,
    SpeechDropped,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.stt.events import (
    TranscriptDiscarded,
    TranscriptFinal,
    TranscriptionBacklog,
    TranscriptPartial,
)

SPEAKER_KEYS = ("packets", "decoded_ms", "lost", "concealed")
METRICS = ("barge_in_ms", "first_stable_partial_ms", "eou_to_first_audio_ms", "tts_first_chunk_ms")
# Dialogue states in which a response owns the output: playback that starts then is that turn's speech.
_RESPONDING = frozenset({"thinking", "speaking", "tool_running"})


class ReportBuilder:
    """Subscribes to the bus; :meth:`build` returns the stable report shape."""

    def __init__(self, bus: EventBus) -> None:
        self._origin: float | None = None
        self._speakers: dict[str, dict[str, Any]] = {}
        self._dave: dict[str, Any] = {"enabled": False, "privacy_code": None}
        self._transcripts: list[dict[str, Any]] = []
        self._utterances: list[dict[str, Any]] = []
        self._states: list[dict[str, Any]] = []
        self._metrics: dict[str, list[float]] = {m: [] for m in METRICS}
        self._actions: dict[str, dict[str, Any]] = {}
        self._speech: list[dict[str, Any]] = []
        self._speaking: dict[str, dict[str, Any]] = {}  # speaker -> its open speech segment
        self._partials: list[dict[str, Any]] = []
        self._discarded: list[dict[str, Any]] = []
        self._turns: list[dict[str, Any]] = []
        self._gate: list[dict[str, Any]] = []
        self._interruptions: list[dict[str, Any]] = []
        self._playback: dict[str, dict[str, Any]] = {}  # utterance id -> entry, in start order
        self._dropped: list[dict[str, Any]] = []
        self._claims_cut: list[dict[str, Any]] = []
        self._backlog: list[dict[str, Any]] = []
        self._dialogue: tuple[str, str | None] = ("idle", None)  # (state, turn id) now
        self._last = 0.0  # latest time seen, seconds since connect: the timeline's extent
        self._sub = bus.subscribe(Event, self._on_event)

    def _since(self, t: float) -> float:
        since = round(t - (self._origin if self._origin is not None else t), 3)
        self._last = max(self._last, since)
        return since

    def _on_event(self, event: Event) -> None:
        if isinstance(event, VoiceConnected) and self._origin is None:
            self._origin = event.at
        self._since(event.at)  # every event extends the timeline
        self._on_timeline(event)
        match event:
            case ReceiveStatsUpdated():
                self._speakers = event.speakers
            case VoiceConnected():
                self._dave = {"enabled": event.dave_enabled, "privacy_code": event.privacy_code}
            case DaveStateChanged():
                self._dave = {"enabled": event.enabled, "privacy_code": event.privacy_code}
            case TranscriptFinal():
                self._transcripts.append(
                    {
                        "speaker": event.speaker_id,
                        "text": event.text,
                        "start": self._since(event.audio_start),
                        "end": self._since(event.audio_end),
                        "partials": event.partials,
                        "utterance_id": event.utterance_id,
                        "at": self._since(event.at),
                    }
                )
            case BotUtteranceFinished():
                self._utterances.append(self._utterance(event))
            case DialogueStateChanged():
                self._dialogue = (event.state, event.turn_id)
                self._states.append(
                    {"at": self._since(event.at), "state": event.state, "turn_id": event.turn_id}
                )
            case LatencyMeasured() if event.metric in self._metrics:
                self._metrics[event.metric].append(round(event.value_ms, 1))
            case ActionChanged():
                entry = self._action(event.action_id)
                entry["transitions"].append(
                    {
                        "at": self._since(event.at),
                        "status": event.status,
                        "previous": event.previous,
                        "actor": event.actor,
                        "reason": event.reason,
                    }
                )
                entry["status"] = event.status
                entry["goal"] = event.goal or entry["goal"]
                entry["proposed_by"] = event.proposed_by or entry["proposed_by"]
                entry["effect_ceiling"] = event.effect_ceiling or entry["effect_ceiling"]
            case PermissionDecided():
                self._action(event.action_id)["permission_decisions"].append(dict(event.decision))
            case _:
                pass

    def _on_timeline(self, event: Event) -> None:
        """The events only the timeline needs (the summary's are in :meth:`_on_event`)."""
        match event:
            case SpeechStarted():
                self._speaking[event.speaker_id] = {
                    "speaker": event.speaker_id,
                    "start": self._since(event.audio_time),
                    "end": None,
                    "during_playback": event.during_playback,
                }
                self._speech.append(self._speaking[event.speaker_id])
            case SpeechEnded():
                segment = self._speaking.pop(event.speaker_id, None)
                if segment is None:  # its start came before the report subscribed
                    segment = {"speaker": event.speaker_id, "during_playback": False}
                    self._speech.append(segment)
                segment["start"] = self._since(event.started_audio_time)
                segment["end"] = self._since(event.audio_time)
            case TranscriptPartial():
                self._partials.append(
                    {
                        "speaker": event.speaker_id,
                        "utterance_id": event.utterance_id,
                        "at": self._since(event.at),
                        "stable": event.stable,
                        "text": event.text,
                    }
                )
            case TranscriptDiscarded():
                self._discarded.append(
                    {"speaker": event.speaker_id, "at": self._since(event.at), "reason": event.reason}
                )
            case TurnAccepted() | TurnIgnored():
                accepted = isinstance(event, TurnAccepted)
                self._turns.append(
                    {
                        "speaker": event.speaker_id,
                        "at": self._since(event.at),
                        "accepted": accepted,
                        "turn_id": event.turn_id if isinstance(event, TurnAccepted) else None,
                        "reason": event.reason if isinstance(event, TurnIgnored) else "",
                        "text": event.text,
                    }
                )
            case EchoGateDecision():
                self._gate.append(
                    {
                        "speaker": event.speaker_id,
                        "at": self._since(event.audio_time),
                        "accepted": event.accepted,
                        "reason": event.reason,
                        "bot_speaking": event.bot_speaking,
                        "confidence": round(event.confidence, 3),
                        "suppression_db": round(event.suppression_db, 1),
                        "render_correlation": round(event.render_correlation, 3),
                    }
                )
            case InterruptionDetected():
                self._interruptions.append(
                    {
                        "speaker": event.speaker_id,
                        "at": self._since(event.at),
                        "turn_id": event.turn_id,
                        "state": event.state,
                        "confidence": round(event.confidence, 3),
                    }
                )
            case SpeechDropped():
                self._dropped.append(
                    {
                        "at": self._since(event.at),
                        "turn_id": event.turn_id,
                        "text": event.text,
                        "cause": event.cause,
                        "reason": event.reason,
                        "point": event.point,
                    }
                )
            case SpeechClaimCut():
                self._claims_cut.append(
                    {
                        "at": self._since(event.at),
                        "turn_id": event.turn_id,
                        "text": event.text,
                        "claimed": event.claimed,
                        "actual": event.actual,
                        "action_id": event.action_id,
                        "correction": event.correction,
                    }
                )
            case TranscriptionBacklog():
                self._backlog.append(
                    {
                        "at": self._since(event.at),
                        "waiting": event.waiting,
                        "talking": event.talking,
                        "partials_shed": event.partials_shed,
                        "oldest_wait_ms": round(event.oldest_wait_ms, 1),
                    }
                )
            case PlaybackStarted():
                state, turn_id = self._dialogue
                self._playback[event.utterance_id] = {
                    "utterance_id": event.utterance_id,
                    "turn_id": turn_id if state in _RESPONDING else None,
                    "start": self._since(event.at),
                    "end": None,
                    "played_ms": None,
                    "interrupted": False,
                }
            case PlaybackFinished():
                entry = self._playback.get(event.utterance_id)
                if entry is None:  # nothing of it reached Discord: no PlaybackStarted
                    return
                entry["end"] = self._since(event.at)
                entry["played_ms"] = round(event.played_ms, 1)
                entry["interrupted"] = event.interrupted
            case _:
                pass

    def _utterance(self, event: BotUtteranceFinished) -> dict[str, Any]:
        # A resumed response (after a false interruption) speaks again under the same turn id: each
        # playback belongs to one utterance, the first one of that turn to settle after it started.
        claimed = {u["utterance_id"] for u in self._utterances}
        played = [
            p
            for p in self._playback.values()
            if p["turn_id"] == event.turn_id and p["utterance_id"] not in claimed
        ]
        return {
            "text": event.text,
            "spoken_text": event.spoken_text,
            "interrupted": event.interrupted,
            "turn_id": event.turn_id,
            "at": self._since(event.at),
            # None when not one frame of it was played (cut while thinking, or a provider failed).
            "utterance_id": played[-1]["utterance_id"] if played else None,
        }

    def _action(self, action_id: str) -> dict[str, Any]:
        if action_id not in self._actions:
            self._actions[action_id] = {
                "id": action_id,
                "goal": "",
                "proposed_by": "",
                "status": "",
                "effect_ceiling": None,
                "permission_decisions": [],
                "transitions": [],
            }
        return self._actions[action_id]

    def build(
        self,
        *,
        names: dict[str, str],
        bot_audio_ms: float,
        text_channel: list[dict[str, Any]] | None = None,
        emulator: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The report. ``text_channel`` is what the emulator holds (messages are not bus events),
        ``emulator`` its voice UDP counters (``DiscordEmulator.udp_stats``)."""
        speakers: dict[str, Any] = {}
        for uid in sorted(set(names) | set(self._speakers)):
            stats = self._speakers.get(uid, {})
            entry: dict[str, Any] = {"name": names.get(uid, uid)}
            for key in SPEAKER_KEYS:
                entry[key] = stats.get(key, 0.0 if key == "decoded_ms" else 0)
            entry["dropped"] = dict(stats.get("dropped", {}))
            speakers[uid] = entry
        return {
            "speakers": speakers,
            "dave": dict(self._dave),
            "bot_audio_ms": round(bot_audio_ms, 1),
            "transcripts": list(self._transcripts),
            "bot_utterances": list(self._utterances),
            "states": list(self._states),
            "metrics": {k: list(v) for k, v in self._metrics.items()},
            "actions": [dict(a, transitions=list(a["transitions"])) for a in self._actions.values()],
            "text_channel": list(text_channel or []),
            "emulator": dict(emulator or {}),
            "duration_s": self._last,
            "speech": [dict(s) for s in self._speech],
            "partials": list(self._partials),
            "discarded": list(self._discarded),
            "turns": list(self._turns),
            "echo_gate": list(self._gate),
            "interruptions": list(self._interruptions),
            "playback": [dict(p) for p in self._playback.values()],
            "speech_dropped": list(self._dropped),
            "claims_cut": list(self._claims_cut),
            "transcription_backlog": list(self._backlog),
        }

    def close(self) -> None:
        self._sub.close()
