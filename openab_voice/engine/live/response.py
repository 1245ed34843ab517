"""One answer of the live engine: from the accepted turn sent to the end of the model's speech.

GPT-Live marks no response: its audio and transcript deltas carry no response or item id and no
event says a spoken answer is done. A :class:`LiveResponse` is therefore the speech that follows the
turn the engine sent (the engine routes every speech event to the answer in flight): its first audio
must come within ``first_audio_s``, and it ends once ``end_gap_ms`` passed without a delta (while a
delegated call is answered, the backend's follow-up may take ``tool_wait_s``). Audio and transcript
become frames and sentences exactly as in the realtime engine
(:class:`~openab_voice.engine.realtime.speech.ProviderSpeech`); a delegation met on the way goes to
:class:`~openab_voice.engine.live.delegation.Delegations`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openab_voice.bus import EventBus
from openab_voice.clock import Clock, bounded
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.live.delegation import Delegations
from openab_voice.engine.live.session import LiveSettings
from openab_voice.engine.realtime.speech import ProviderSpeech
from openab_voice.engine.state import DialogueInput
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import ErrorCode, OpenabError, ProviderRequestFailed
from openab_voice.providers.live import LIVE_RATE, LiveLink
from openab_voice.providers.live_openai import live_error

if TYPE_CHECKING:
    from openai.types.live import ServerEvent

__all__ = ["LiveResponse"]

_ITEM = "live"  # the answer's one audio stream (the API has no item ids)


class LiveResponse(ProviderSpeech):
    """Runs one answer; the engine owns its task and routes the session's speech into :attr:`events`.

    Args:
        link: the session the turn was sent on.
        delegations: answers the delegations met during the answer.
        settings: the gap and wait bounds.
        model: for error messages.
        (the rest: :class:`~openab_voice.engine.realtime.speech.ProviderSpeech`)
    """

    def __init__(
        self,
        *,
        link: LiveLink,
        delegations: Delegations,
        settings: LiveSettings,
        model: str,
        handle: SpeechHandle,
        prepared: PreparedResponse,
        output: SpeechOutput,
        bus: EventBus,
        clock: Clock,
        report: Callable[[DialogueInput], None],
        session_id: str | None,
        claims: SpeechClaims | None = None,
    ) -> None:
        super().__init__(
            handle=handle,
            prepared=prepared,
            output=output,
            bus=bus,
            clock=clock,
            report=report,
            session_id=session_id,
            in_rate=LIVE_RATE,
            preroll_ms=settings.preroll_ms,
            claims=claims,
        )
        self.link = link
        self.events: asyncio.Queue[ServerEvent | None] = asyncio.Queue()
        self.in_flight = False  # the turn was sent and its speech has not ended
        self.spoken_words: list[tuple[str, int, int]] = []  # transcript deltas on the session timeline
        self._delegations = delegations
        self._settings = settings
        self._model = model

    async def stream(self) -> None:
        """Consume the answer's speech until the gap that ends it.

        Raises:
            OpenabError: no speech came in time, the server sent an ``error``, or the session ended.
        """
        wait_s = self._settings.first_audio_s
        spoke = False
        while True:
            finished, event = await bounded(self._clock, wait_s, self.events.get())
            if not finished:
                if not spoke:
                    raise ProviderRequestFailed(
                        f"the live model did not answer within {wait_s:g} s",
                        code=ErrorCode.REALTIME_SERVER_ERROR,
                        provider="openai-live",
                    )
                break
            if event is None:  # the engine's reader saw the session end
                raise ProviderRequestFailed(
                    "the live session ended", code=ErrorCode.REALTIME_CONNECTION_LOST, provider="openai-live"
                )
            wait_s = await self._take(event, wait_s)
            spoke = spoke or event.type == "session.output_audio.delta"
        self.in_flight = False
        await self._audio_done(_ITEM)
        self._end_sentences()

    async def _take(self, event: ServerEvent, wait_s: float) -> float:
        """Handle one event; how long to wait for the next."""
        gap_s = self._settings.end_gap_ms / 1000.0
        event_any: Any = event
        match event.type:
            case "session.output_audio.delta":
                await self._audio(_ITEM, event_any.delta)
                return gap_s
            case "session.output_transcript.delta":
                self.spoken_words.append((event_any.delta, event_any.start_ms, event_any.end_ms))
                self._transcript(event_any.delta)
                return gap_s
            case "error":
                error: OpenabError = live_error(event_any.error, model=self._model)
                raise error
            case "session.delegation.created" | "response.event":
                await self._delegations.handle(event)
                return max(wait_s, self._settings.tool_wait_s)
            case _:
                return wait_s
