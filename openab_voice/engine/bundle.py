"""The conversation providers every voice session shares, and the settings they run with."""

from __future__ import annotations

from dataclasses import dataclass, field

from openab_voice.engine.settings import DialogueSettings, EngineCapabilities
from openab_voice.engine.utterances import TranscriberSettings
from openab_voice.providers.speech import ChatModel, SpeechToText, TextToSpeech


@dataclass(slots=True, kw_only=True)
class ConversationProviders:
    """What each voice session shares: None where the feature is off."""

    stt: SpeechToText | None = None
    tts: TextToSpeech | None = None
    chat: ChatModel | None = None
    transcriber: TranscriberSettings = field(default_factory=TranscriberSettings)
    dialogue: DialogueSettings | None = None
    capabilities: EngineCapabilities | None = None

    async def aclose(self) -> None:
        if self.chat is not None:
            await self.chat.aclose()
        if self.tts is not None:
            await self.tts.aclose()
        if self.stt is not None:
            self.stt.close()
