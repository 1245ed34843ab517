"""The demo report, built from bus events only (plus what the emulator observed of the bot's audio).

Times in the report are seconds since the bot's voice connection came up (``VoiceConnected``).
``text_channel`` is the one part read from the emulator: the messages the channel holds.
"""

from __future__ import annotations

from typing import Any

from openab_voice.actions.events import ActionChanged, PermissionDecided
from openab_voice.bus import EventBus
from openab_voice.bus.events import DaveStateChanged, Event, ReceiveStatsUpdated, VoiceConnected
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    LatencyMeasured,
    TranscriptFinal,
)

SPEAKER_KEYS = ("packets", "decoded_ms", "lost", "concealed")
METRICS = ("barge_in_ms", "first_stable_partial_ms", "eou_to_first_audio_ms", "tts_first_chunk_ms")


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
        self._sub = bus.subscribe(Event, self._on_event)

    def _since(self, t: float) -> float:
        return round(t - (self._origin if self._origin is not None else t), 3)

    def _on_event(self, event: Event) -> None:
        match event:
            case ReceiveStatsUpdated():
                self._speakers = event.speakers
            case VoiceConnected():
                self._origin = event.at if self._origin is None else self._origin
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
                    }
                )
            case BotUtteranceFinished():
                self._utterances.append(
                    {"text": event.text, "spoken_text": event.spoken_text, "interrupted": event.interrupted}
                )
            case DialogueStateChanged():
                self._states.append({"at": self._since(event.at), "state": event.state})
            case LatencyMeasured() if event.metric in self._metrics:
                self._metrics[event.metric].append(round(event.value_ms, 1))
            case ActionChanged():
                entry = self._action(event.action_id)
                entry["status"] = event.status
                entry["goal"] = event.goal or entry["goal"]
                entry["proposed_by"] = event.proposed_by or entry["proposed_by"]
                entry["effect_ceiling"] = event.effect_ceiling or entry["effect_ceiling"]
            case PermissionDecided():
                self._action(event.action_id)["permission_decisions"].append(dict(event.decision))
            case _:
                pass

    def _action(self, action_id: str) -> dict[str, Any]:
        if action_id not in self._actions:
            self._actions[action_id] = {
                "id": action_id,
                "goal": "",
                "proposed_by": "",
                "status": "",
                "effect_ceiling": None,
                "permission_decisions": [],
            }
        return self._actions[action_id]

    def build(
        self,
        *,
        names: dict[str, str],
        bot_audio_ms: float,
        text_channel: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The report. ``text_channel`` is what the emulator holds (messages are not bus events)."""
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
            "actions": [dict(a) for a in self._actions.values()],
            "text_channel": list(text_channel or []),
        }

    def close(self) -> None:
        self._sub.close()
