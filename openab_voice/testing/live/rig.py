"""The conversation rig with the live engine on the loopback GPT-Live server.

As :class:`~openab_voice.testing.realtime.rig.RealtimeRig`: the conversation runs in virtual time
(VirtualClock, FakeSpeechOutput) exactly as the cascade's :class:`~openab_voice.testing.rig.Rig`; the
provider is the loopback server on 127.0.0.1 reached through the real ``openai`` client, with a
scripted responder, a scripted listener and a tone voice, on the rig's own clock (the server's
end of speech after a mute is a wait on it). The live model hears audio only, so every
:meth:`LiveRig.say` first pushes a second of the speaker's processed capture (a loud tone the
server's VAD calls speech) into the engine's capture subscription.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from openab_voice.actions.claims import ActionClaims
from openab_voice.audio.frame import AudioFrame, ProcessedFrame
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.live import LiveEngine, LiveSettings, live_engine
from openab_voice.engine.response import ToolPath
from openab_voice.engine.settings import DialogueSettings
from openab_voice.providers.live import LiveConfig
from openab_voice.providers.live_openai import OpenAILive
from openab_voice.testing.live.responder import ScriptedLiveReply, ScriptedLiveResponder
from openab_voice.testing.live.server import LoopbackLiveServer
from openab_voice.testing.live.session import LoopbackLiveSession
from openab_voice.testing.realtime import Faults, Pacing, ScriptedListener, ToneVoice
from openab_voice.testing.rig import Rig

__all__ = ["KEY", "LiveRig", "SpeakerCapture"]

KEY = "sk-rig"
_RATE = 16_000
_FRAME = 320  # 20 ms at 16 kHz


class SpeakerCapture:
    """Processed capture as the front end's subscription yields it (frames pushed by the rig)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ProcessedFrame] = asyncio.Queue()

    def speak(self, speaker: str, start: float, seconds: float, *, amplitude: int = 8000) -> None:
        """``seconds`` of a 220 Hz tone from ``speaker`` from capture time ``start``."""
        t = np.arange(_FRAME) / _RATE
        for i in range(round(seconds / 0.02)):
            pcm = (amplitude * np.sin(2 * np.pi * 220 * (t + i * 0.02))).astype("<i2").tobytes()
            frame = AudioFrame(
                pcm=pcm,
                sample_rate=_RATE,
                channels=1,
                timestamp=start + i * 0.02,
                frame_id=i,
                speaker_id=speaker,
            )
            self.queue.put_nowait(
                ProcessedFrame(
                    frame=frame,
                    speech=True,
                    user_speech=True,
                    speech_probability=0.9,
                    bot_speaking=False,
                    apm_ok=True,
                    degraded=False,
                )
            )

    async def frames(self) -> AsyncIterator[ProcessedFrame]:
        while True:
            yield await self.queue.get()


class LiveRig(Rig):
    """``async with LiveRig(replies=[...]) as rig:`` starts the server and the manager."""

    def __init__(
        self,
        *,
        replies: Sequence[ScriptedLiveReply],
        settings: DialogueSettings | None = None,
        names: dict[str, str] | None = None,
        tools: Callable[[Any], ToolPath] | None = None,
        claimed: Callable[[str], bool] | None = None,
        faults: Faults | None = None,
        key: str = KEY,
        model: str = "gpt-live-1",
        ms_per_word: int = 200,
        paced: bool = False,
        check_claims: bool = False,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if tools is not None:
            kwargs["tools"] = tools
        super().__init__(replies=[], settings=settings, names=names, claimed=claimed, **kwargs)
        self.responder = ScriptedLiveResponder(list(replies))
        self.voice = ToneVoice(ms_per_word=ms_per_word)
        self.capture = SpeakerCapture()
        self.server = LoopbackLiveServer(
            api_key=KEY,
            responder=self.responder,
            listener=ScriptedListener("(audio)"),
            voice=self.voice,
            pacing=Pacing(realtime_factor=1, chunk_ms=100) if paced else Pacing(realtime_factor=0),
            clock=self.clock,
            faults=faults,
        )
        self._key = key
        self._model = model
        self.claims = ActionClaims(self.bus) if check_claims else None
        self._settings = settings or DialogueSettings(bot_user_id="bot")

    async def __aenter__(self) -> LiveRig:
        await self.server.start()
        connector = OpenAILive(
            LiveConfig(model=self._model, base_url=self.server.base_url, api_key=self._key)
        )
        self.connector = connector
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            roster=self.roster,
            settings=self._settings,
            session_id=self.session_id,
            engine=live_engine(
                connector=connector,
                output=self.output,
                tools=self.tools,
                capture=self.capture.frames,
                settings=LiveSettings(reconnect_initial_s=0.05, reconnect_max_s=0.2),
                voice=self.tts,  # says status lines, as in production
                claims=self.claims,
            ),
        )
        self.desk = TranscriptDesk([self.intake] if self.intake is not None else [], self.manager)
        await super().__aenter__()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await super().__aexit__(et, e, tb)
        await self.connector.aclose()
        await self.server.aclose()
        if self.claims is not None:
            self.claims.close()

    def say(
        self,
        text: str,
        *,
        speaker: str = "alice",
        began: float | None = None,
        utterance_id: str | None = None,
    ) -> None:
        """The speaker's second of audio into the capture, then the final transcript of it."""
        start = self.now() - 1.0 if began is None else began
        self.capture.speak(speaker, start, self.now() - start)
        super().say(text, speaker=speaker, began=start, utterance_id=utterance_id)

    @property
    def engine(self) -> LiveEngine:
        engine = self.manager.engine
        assert isinstance(engine, LiveEngine)
        return engine

    def session(self, index: int = 0) -> LoopbackLiveSession:
        return self.server.sessions[index]

    async def until_ready(self) -> None:
        await self.until(lambda: self.engine.ready)

    def client_events(self, kind: str, index: int = 0) -> list[Any]:
        return [e for e in self.session(index).client_events if e.type == kind]

    def played_ms(self) -> float:
        return 20.0 * len(self.output.played)
