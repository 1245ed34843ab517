"""Terminal reporter: one line per notable bus event, derived from events only."""

from __future__ import annotations

import sys
from typing import TextIO

from openab_voice.actions.events import (
    ActionChanged,
    ActionRequestRefused,
    ActionResultPosted,
    AgentProcessStarted,
    ConfirmationRefused,
    PermissionDecided,
)
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, Event
from openab_voice.discord.wire.events import (
    CommandInvoked,
    DaveStateChanged,
    PlaybackFinished,
    ReceiveStatsUpdated,
    SpeakerLeft,
    SpeakerMapped,
    VoiceConnected,
    VoiceDisconnected,
)
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    SpeechClaimCut,
    SpeechDropped,
    TurnIgnored,
)
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal

_CUT_SHOWN = 60  # characters of a cut utterance's unheard part shown


def describe(event: Event) -> str | None:
    """One human line for an event, or None for events not worth a line."""
    match event:
        case VoiceConnected():
            code = event.privacy_code or "privacy code pending"
            dave = f"DAVE on ({code})" if event.dave_enabled else "DAVE off"
            return f"joined {event.channel_name} · {dave} · {event.transport_mode}"
        case VoiceDisconnected():
            return f"left voice ({event.reason})"
        case DaveStateChanged():
            return f"DAVE {'on' if event.enabled else 'off'} · privacy code {event.privacy_code} · epoch {event.epoch}"
        case SpeakerMapped():
            extra = f", {event.buffered} early packets attributed" if event.buffered else ""
            return f"speaker {event.speaker_id} is SSRC {event.ssrc}{extra}"
        case SpeakerLeft():
            return f"speaker {event.speaker_id} left"
        case PlaybackFinished():
            how = "interrupted" if event.interrupted else "done"
            return f"playback {event.utterance_id} {how} after {event.played_ms:.0f} ms"
        case CommandInvoked():
            return f"/{event.command} by {event.user_id}: {'ok' if event.ok else 'failed'} {event.detail}".rstrip()
        case ErrorRaised():
            return f"error {event.code}: {event.message}"
        case TranscriptFinal():
            return f"{event.speaker_id} said: {event.text!r}"
        case TranscriptDiscarded():
            return f"{event.speaker_id}: utterance discarded ({event.reason})"
        case TurnIgnored():
            return f"{event.speaker_id}: not a turn ({event.reason})"
        case DialogueStateChanged():
            return f"dialogue {event.previous} -> {event.state} ({event.cause})"
        case BotUtteranceFinished():
            return _bot_said(event)
        case SpeechClaimCut():
            return (
                f"bot's claim cut before it played: {event.text!r} (claimed {event.claimed}; "
                f"the task is {event.actual}); said instead: {event.correction!r}"
            )
        case SpeechDropped():
            return f"bot did not say {event.text!r}: {event.reason} ({event.cause}, {event.point})"
        case InterruptionDetected():
            return f"{event.speaker_id} interrupted the bot while {event.state}"
        case ActionChanged():
            was = f"{event.previous} -> " if event.previous else ""
            return f"action {event.action_id}: {was}{event.status} ({event.actor}: {event.reason})"
        case ActionRequestRefused():
            return f"task request from {event.speaker_id or 'unattributed audio'} refused ({event.code})"
        case ConfirmationRefused():
            return f"action {event.action_id}: click by {event.user_id} refused ({event.code})"
        case AgentProcessStarted():
            after = (
                f", {event.confirm_to_spawn_ms:.0f} ms after the click" if event.confirm_to_spawn_ms else ""
            )
            return f"action {event.action_id}: agent process {event.pid} started{after}"
        case PermissionDecided():
            d = event.decision
            choice = d.get("option_kind") or d.get("outcome")
            return f"action {event.action_id}: permission {d.get('kind')} ({d.get('title')}) -> {choice}"
        case ActionResultPosted():
            where = f"posted in {event.messages} message(s)" if event.delivered else "NOT delivered"
            return f"action {event.action_id}: {event.execution}, result {where}"
        case ReceiveStatsUpdated():
            parts = [
                f"{uid}: {s.get('packets', 0)} pkts {s.get('decoded_ms', 0.0) / 1000:.1f}s"
                f" conceal {s.get('concealed', 0)} drop {sum(s.get('dropped', {}).values())}"
                for uid, s in sorted(event.speakers.items())
            ]
            return "receive · " + " | ".join(parts) if parts else None
        case _:
            return None


class TerminalReporter:
    """Prints :func:`describe` lines for every event; ``close()`` unsubscribes."""

    def __init__(
        self, bus: EventBus, out: TextIO | None = None, *, clock_origin: float | None = None
    ) -> None:
        self._out = out or sys.stderr
        self._origin = clock_origin
        self._sub = bus.subscribe(Event, self._on_event)
        self._last_stats: str | None = None

    def _on_event(self, event: Event) -> None:
        line = describe(event)
        if line is None:
            return
        if isinstance(event, ReceiveStatsUpdated):
            if line == self._last_stats:  # unchanged counters: don't scroll the terminal
                return
            self._last_stats = line
        if self._origin is None:
            self._origin = event.at
        print(f"[{event.at - self._origin:7.2f}s] {line}", file=self._out, flush=True)

    def close(self) -> None:
        self._sub.close()


def _bot_said(event: BotUtteranceFinished) -> str:
    """What was heard; for a cut utterance also where it was cut (only whole sentences count as heard)."""
    said = f"bot said: {event.spoken_text!r}"
    if not event.interrupted:
        return said
    rest = event.text[len(event.spoken_text) :].strip() if event.text.startswith(event.spoken_text) else ""
    if not rest:
        return f"{said} [interrupted]"
    if len(rest) > _CUT_SHOWN:
        rest = rest[:_CUT_SHOWN].rsplit(" ", 1)[0] + " ..."
    return f"{said} [interrupted; not heard to the end: {rest!r}]"
