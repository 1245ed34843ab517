"""The conversation providers every voice session shares, and the settings they run with."""

from __future__ import annotations

from dataclasses import dataclass, field

from openab_voice.engine.settings import DialogueSettings, EngineCapabilities
from openab_voice.providers.chat import ChatModel
from openab_voice.providers.live import LiveConnector
from openab_voice.providers.realtime import RealtimeConnector
from openab_voice.providers.tts import TextToSpeech
from openab_voice.providers.turn import TurnDetector
from openab_voice.stt.base import SpeechToText
from openab_voice.stt.endpointing import EndOfTurnSettings
from openab_voice.stt.utterances import TranscriberSettings


@dataclass(slots=True, kw_only=True)
class ConversationProviders:
    """What each voice session shares: None where the feature is off."""

    stt: SpeechToText | None = None
    tts: TextToSpeech | None = None
    chat: ChatModel | None = None
    transcriber: TranscriberSettings = field(default_factory=TranscriberSettings)
    turn_detector: TurnDetector | None = None
    """Judges the pauses in a turn (``OPENAB_END_OF_TURN=semantic``); None: silence alone ends one."""
    turns: EndOfTurnSettings = field(default_factory=EndOfTurnSettings)
    dialogue: DialogueSettings | None = None
    capabilities: EngineCapabilities | None = None
    realtime: RealtimeConnector | None = None
    """The realtime engine's provider (``OPENAB_ENGINE=realtime``); chat stays None then, and ``tts``
    is the engine's exact voice (it says the status lines the model's own voice may not)."""
    realtime_voice: str | None = None
    live: LiveConnector | None = None
    """The live engine's provider (``OPENAB_ENGINE=live``, GPT-Live); as ``realtime``: chat stays None,
    ``tts`` is the exact voice."""
    live_voice: str | None = None
    live_backend_model: str | None = None
    """The Responses model GPT-Live delegates the action tools to."""

    async def aclose(self) -> None:
        for connector in (self.realtime, self.live):
            aclose = getattr(connector, "aclose", None)
            if aclose is not None:
                await aclose()
        if self.chat is not None:
            await self.chat.aclose()
        if self.tts is not None:
            await self.tts.aclose()
        if self.stt is not None:
            self.stt.close()
        if self.turn_detector is not None:
            self.turn_detector.close()
