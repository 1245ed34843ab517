"""The cascade as a :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`: chat model -> sentence
segmenter -> TTS -> playback.

A thin adapter: the response subgraph (:mod:`~openab_voice.engine.response`) and its supervisor
(:mod:`~openab_voice.engine.supervisor`) do the work exactly as before the seam existed; this module
only binds them to a conversation and says what they can do. Its connection is local (no provider
session to lose), so it is always ``ready`` and never reports ``ProviderLost``.
"""

from __future__ import annotations

from openab_voice.engine.context import MemoryRecall
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineCapabilities, EngineFactory
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.response import ResponseDeps, ToolPath
from openab_voice.engine.settings import DialogueMode
from openab_voice.engine.state import DiscardResponse, InterruptResponse, StartResponse
from openab_voice.engine.supervisor import PreparedResponse, ResponseSupervisor
from openab_voice.providers.chat import ChatModel
from openab_voice.providers.tts import TextToSpeech

__all__ = ["CascadeEngine", "cascade_engine"]


class CascadeEngine:
    """STT -> LLM -> TTS; the transcriber upstream is shared with every engine.

    Args:
        binding: the conversation it serves.
        chat: the chat model.
        tts: the text-to-speech provider (48 kHz stereo s16le).
        output: the playback path.
        tools: the tool path.
        memory: long-term memory, recalled once per response to a user turn.
        capabilities: what :func:`~openab_voice.engine.settings.negotiate` reported; None derives a
            report from the chat and TTS providers and the dialogue mode (a test rig).
    """

    def __init__(
        self,
        binding: EngineBinding,
        *,
        chat: ChatModel,
        tts: TextToSpeech,
        output: SpeechOutput,
        tools: ToolPath,
        memory: MemoryRecall | None = None,
        capabilities: EngineCapabilities | None = None,
    ) -> None:
        deps = ResponseDeps(
            bus=binding.bus,
            clock=binding.clock,
            chat=chat,
            tts=tts,
            output=output,
            tools=tools,
            settings=binding.settings,
            session_id=binding.session_id,
            memory=memory,
        )
        self._supervisor = ResponseSupervisor(deps=deps, context=binding.context, report=binding.report)
        duplex = binding.settings.mode is DialogueMode.FULL_DUPLEX
        self._capabilities = capabilities or EngineCapabilities(
            mode=binding.settings.mode,
            streaming_input=duplex,
            partials=duplex,
            streaming_output=True,
            tts_streaming=tts.capabilities.streaming,
            interruption=duplex,
            semantic_tools=chat.capabilities.tools,
            full_duplex=duplex,
        )

    @property
    def capabilities(self) -> EngineCapabilities:
        return self._capabilities

    @property
    def output(self) -> SpeechOutput:
        return self._supervisor.output

    @property
    def ready(self) -> bool:
        return True

    @property
    def prepared_key(self) -> str | None:
        """What the held response answers (None: none is held)."""
        return self._supervisor.prepared_key

    async def open(self) -> None:
        """Nothing to connect: the providers are shared and already loaded."""

    def start(self, effect: StartResponse, prepared: PreparedResponse) -> None:
        self._supervisor.start(effect, prepared)

    def prepare(self, key: str, prepared: PreparedResponse) -> None:
        self._supervisor.prepare(key, prepared)

    def drop_prepared(self, key: str | None = None) -> None:
        self._supervisor.drop_prepared(key)

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        return await self._supervisor.interrupt(effect)

    def commit(self, response_id: str) -> None:
        self._supervisor.commit(response_id)

    async def discard(self, effect: DiscardResponse) -> None:
        await self._supervisor.discard(effect)

    async def aclose(self) -> None:
        await self._supervisor.aclose()


def cascade_engine(
    *,
    chat: ChatModel,
    tts: TextToSpeech,
    output: SpeechOutput,
    tools: ToolPath,
    memory: MemoryRecall | None = None,
    capabilities: EngineCapabilities | None = None,
) -> EngineFactory:
    """The factory a :class:`~openab_voice.engine.conversation.ConversationManager` builds it with."""

    def build(binding: EngineBinding) -> DuplexVoiceEngine:
        return CascadeEngine(
            binding,
            chat=chat,
            tts=tts,
            output=output,
            tools=tools,
            memory=memory,
            capabilities=capabilities,
        )

    return build
