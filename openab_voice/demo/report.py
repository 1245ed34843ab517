"""The demo report, built from bus events (plus what the emulator observed of the bot's audio)."""

from __future__ import annotations

from typing import Any

from openab_voice.bus import EventBus
from openab_voice.bus.events import DaveStateChanged, Event, ReceiveStatsUpdated, VoiceConnected

SPEAKER_KEYS = ("packets", "decoded_ms", "lost", "concealed")


class ReportBuilder:
    """Subscribes to the bus; :meth:`build` returns the stable report shape."""

    def __init__(self, bus: EventBus) -> None:
        self._speakers: dict[str, dict[str, Any]] = {}
        self._dave: dict[str, Any] = {"enabled": False, "privacy_code": None}
        self._subs = [bus.subscribe(Event, self._on_event)]

    def _on_event(self, event: Event) -> None:
        match event:
            case ReceiveStatsUpdated():
                self._speakers = event.speakers
            case VoiceConnected():
                self._dave = {"enabled": event.dave_enabled, "privacy_code": event.privacy_code}
            case DaveStateChanged():
                self._dave = {"enabled": event.enabled, "privacy_code": event.privacy_code}
            case _:
                pass

    def build(self, *, names: dict[str, str], bot_audio_ms: float) -> dict[str, Any]:
        speakers: dict[str, Any] = {}
        for uid in sorted(set(names) | set(self._speakers)):
            stats = self._speakers.get(uid, {})
            entry: dict[str, Any] = {"name": names.get(uid, uid)}
            for key in SPEAKER_KEYS:
                entry[key] = stats.get(key, 0.0 if key == "decoded_ms" else 0)
            entry["dropped"] = dict(stats.get("dropped", {}))
            speakers[uid] = entry
        return {"speakers": speakers, "dave": dict(self._dave), "bot_audio_ms": round(bot_audio_ms, 1)}

    def close(self) -> None:
        for sub in self._subs:
            sub.close()
