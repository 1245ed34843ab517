"""The realtime engine's exact voice: status lines said word for word, by our TTS, into the same playback.

A realtime model is the engine's own voice, but not an exact one: asked to "say exactly: the task is
waiting for confirmation", a model may say anything (a small one said "The answer to that question
is 4."). RFC decision 6 makes action speech status-only, so a status line (an announcement,
``PreparedResponse.exact``) never goes to the model. :class:`ExactLines` says it with the cascade's
own response path (TTS → playback, no chat model), so it is cut, resumed and cause-checked exactly
like a cascade response, and commits only what was heard. What was heard is then told to the
provider as an assistant message before the next request, so the model knows what "it" said.

Without a TTS voice the line is not said (``SpeechDropped``, reason given): the text channel has it;
a guess in the model's words is never spoken instead.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.engine.expiry import publish_dropped
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.response import ResponseDeps, ToolPath
from openab_voice.engine.state import DiscardResponse, InterruptResponse, ResponseFinished, StartResponse
from openab_voice.engine.supervisor import PreparedResponse, ResponseSupervisor
from openab_voice.providers.realtime import RealtimeLink
from openab_voice.providers.scripts import join_sentences
from openab_voice.providers.tts import TextToSpeech

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra
    from openai.types.realtime import ConversationItemCreateEventParam

__all__ = ["NO_EXACT_VOICE", "ExactLines"]

NO_EXACT_VOICE = "no exact voice: the realtime model's speech is not exact, and no TTS is configured"

_SAID_KEPT = 16  # lines heard but not yet told to the provider (one per announcement, normally one)


class ExactLines:
    """Says the realtime engine's exact lines (see the module docstring).

    Args:
        binding: the conversation (its context and inbox are the engine's).
        voice: the TTS that says them (None: they are dropped, never handed to the model).
        output: playback, shared with the model's audio.
        tools: the tool path (a status line calls none; the response path needs one).
    """

    def __init__(
        self, binding: EngineBinding, *, voice: TextToSpeech | None, output: SpeechOutput, tools: ToolPath
    ) -> None:
        self._b = binding
        self._supervisor = (
            None
            if voice is None
            else ResponseSupervisor(
                deps=ResponseDeps(
                    bus=binding.bus,
                    clock=binding.clock,
                    chat=None,
                    tts=voice,
                    output=output,
                    tools=tools,
                    settings=binding.settings,
                    session_id=binding.session_id,
                ),
                context=binding.context,
                report=binding.report,
            )
        )
        self._said: collections.deque[tuple[object | None, str]] = collections.deque(maxlen=_SAID_KEPT)
        self._link: object | None = None  # the session the line being said will be told to
        self._unsaid: StartResponse | None = None  # a line dropped for want of a voice, not settled yet

    def owns(self, response_id: str) -> bool:
        """Whether ``response_id`` is the exact line now being said (or dropped, not yet settled)."""
        if self._unsaid is not None and self._unsaid.response_id == response_id:
            return True
        return self._supervisor is not None and self._supervisor.active_id == response_id

    def start(self, effect: StartResponse, prepared: PreparedResponse, link: object | None) -> None:
        """Say ``prepared``'s lines; ``link`` is the provider session to tell once they are heard."""
        if self._supervisor is None:
            publish_dropped(
                self._b.bus,
                self._b.clock,
                session_id=self._b.session_id,
                turn_id=effect.response_id,
                text=join_sentences(prepared.replay),
                cause=prepared.cause,
                reason=NO_EXACT_VOICE,
                point="before_synthesis",
            )
            self._unsaid = effect
            self._b.report(ResponseFinished(response_id=effect.response_id))
            return
        self._link = link
        self._supervisor.start(effect, prepared)

    async def interrupt(self, effect: InterruptResponse) -> SpeechHandle | None:
        if self._settle_unsaid(effect.response_id):
            return None
        assert self._supervisor is not None  # only called when it owns the response
        handle = await self._supervisor.interrupt(effect)
        self._heard(handle)
        return handle

    def commit(self, response_id: str) -> None:
        if self._settle_unsaid(response_id):
            return
        assert self._supervisor is not None
        self._heard(self._supervisor.commit(response_id))

    async def discard(self, effect: DiscardResponse) -> None:
        if self._settle_unsaid(effect.response_id):
            return
        assert self._supervisor is not None
        await self._supervisor.discard(effect)

    def untold_lines(self, link: object) -> list[str]:
        """The lines heard on ``link`` since it was last told. Lines heard on an earlier session are
        not told to a fresh one: it is seeded from the conversation's exchanges, which (as the
        cascade's model sees them) hold no status lines."""
        lines = [text for said_on, text in self._said if said_on is link]
        self._said.clear()
        return lines

    def untold(self, link: RealtimeLink) -> list[ConversationItemCreateEventParam]:
        """The ``conversation.item.create`` events telling ``link`` what was said since it last asked."""
        return [
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                },
            }
            for text in self.untold_lines(link)
        ]

    async def aclose(self) -> None:
        if self._supervisor is not None:
            await self._supervisor.aclose()

    def _settle_unsaid(self, response_id: str) -> bool:
        """Settle a dropped line like any response (once, nothing heard); False: not that one."""
        unsaid = self._unsaid
        if unsaid is None or unsaid.response_id != response_id:
            return False
        self._unsaid = None
        self._b.bus.publish(
            BotUtteranceFinished(
                at=self._b.clock.monotonic(),
                session_id=self._b.session_id,
                turn_id=unsaid.turn_id,
                text="",
                spoken_text="",
                interrupted=False,
            )
        )
        return True

    def _heard(self, handle: SpeechHandle | None) -> None:
        heard = "" if handle is None else handle.heard_text()
        if heard:
            self._said.append((self._link, heard))
