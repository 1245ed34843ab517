"""The conversation rig with the realtime engine on the loopback realtime server.

The conversation runs in virtual time (VirtualClock, FakeSpeechOutput) exactly as in the cascade's
:class:`~openab_voice.testing.rig.Rig`;
the provider is the loopback server on 127.0.0.1 reached through the real ``openai`` client, with a
scripted responder, a scripted listener and a tone voice, sending audio as fast as it can (its own
clock is the system's: its pacing is not what these tests measure). The engine's exact voice (status
lines) is the rig's fake TTS, as the cascade's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

from openab_voice.actions.claims import ActionClaims
from openab_voice.audio.frame import ProcessedFrame
from openab_voice.engine.conversation import ConversationManager
from openab_voice.engine.desk import TranscriptDesk
from openab_voice.engine.realtime import RealtimeEngine, RealtimeSettings, realtime_engine
from openab_voice.engine.response import ToolPath
from openab_voice.engine.settings import DialogueSettings
from openab_voice.providers.realtime import RealtimeConfig
from openab_voice.providers.realtime_openai import OpenAIRealtime
from openab_voice.testing.realtime import (
    Faults,
    LoopbackRealtimeServer,
    LoopbackSession,
    Pacing,
    ScriptedListener,
    ScriptedResponder,
    ToneVoice,
)
from openab_voice.testing.realtime.responder import ScriptedReply
from openab_voice.testing.rig import Rig

KEY = "sk-rig"


class RealtimeRig(Rig):
    """``async with RealtimeRig(replies=[...]) as rig:`` starts the server and the manager."""

    def __init__(
        self,
        *,
        replies: Sequence[ScriptedReply],
        settings: DialogueSettings | None = None,
        names: dict[str, str] | None = None,
        tools: Callable[[Any], ToolPath] | None = None,
        claimed: Callable[[str], bool] | None = None,
        capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
        faults: Faults | None = None,
        key: str = KEY,
        model: str = "gpt-realtime",
        ms_per_word: int = 200,
        paced: bool = False,
        check_claims: bool = False,
        exact_voice: bool = True,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if tools is not None:
            kwargs["tools"] = tools
        super().__init__(replies=[], settings=settings, names=names, claimed=claimed, **kwargs)
        self.responder = ScriptedResponder(list(replies))
        self.voice = ToneVoice(ms_per_word=ms_per_word)
        self.server = LoopbackRealtimeServer(
            api_key=KEY,
            responder=self.responder,
            listener=ScriptedListener("(audio)"),
            voice=self.voice,
            # Paced: audio leaves as it plays, on the rig's own virtual clock (a response is still
            # streaming when it is cut); otherwise as fast as the server can.
            pacing=Pacing(realtime_factor=1, chunk_ms=100) if paced else Pacing(realtime_factor=0),
            clock=self.clock if paced else None,
            faults=faults,
        )
        self._key = key
        self._model = model
        self._capture = capture
        # The model's claims about actions, held against ActionChanged on the rig's bus.
        self.claims = ActionClaims(self.bus) if check_claims else None
        self._exact_voice = exact_voice
        self._settings = settings or DialogueSettings(bot_user_id="bot")

    async def __aenter__(self) -> RealtimeRig:
        await self.server.start()
        connector = OpenAIRealtime(
            RealtimeConfig(model=self._model, base_url=self.server.base_url, api_key=self._key)
        )
        self.connector = connector
        self.manager = ConversationManager(
            bus=self.bus,
            clock=self.clock,
            roster=self.roster,
            settings=self._settings,
            session_id=self.session_id,
            engine=realtime_engine(
                connector=connector,
                output=self.output,
                tools=self.tools,
                capture=self._capture,
                settings=RealtimeSettings(reconnect_initial_s=0.05, reconnect_max_s=0.2),
                voice=self.tts if self._exact_voice else None,  # says status lines, as in production
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

    @property
    def engine(self) -> RealtimeEngine:
        engine = self.manager.engine
        assert isinstance(engine, RealtimeEngine)
        return engine

    def session(self, index: int = 0) -> LoopbackSession:
        return self.server.sessions[index]

    async def until_ready(self) -> None:
        await self.until(lambda: self.engine.ready)

    def client_events(self, kind: str, index: int = 0) -> list[Any]:
        return [e for e in self.session(index).client_events if e.type == kind]

    def played_ms(self) -> float:
        return 20.0 * len(self.output.played)


def words(n: int, start: int = 0) -> Iterable[str]:
    return (f"w{i}" for i in range(start, start + n))
