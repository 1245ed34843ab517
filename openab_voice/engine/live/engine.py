"""The live engine: OpenAI GPT-Live behind :class:`~openab_voice.engine.duplex.DuplexVoiceEngine`,
with our core owning the turns as far as the API lets it (docs/adr/0022-gpt-live-engine.md).

One live session per voice channel (:mod:`~openab_voice.engine.live.provider`), its input muted:
our VAD, echo gate and turn policy decide, and only an accepted turn's audio is sent, attributed, and
ended by muting again (the silence the server's own turn-taking ends a turn on). The answer's speech
streams into playback (:mod:`~openab_voice.engine.live.response`). Barge-in stops the output first;
the API has no cancel or truncate, so the model is told in a note which words were heard, and
whatever it still says is never played (it is no answer of ours). Delegations are proposals
(:mod:`~openab_voice.engine.live.delegation`); status lines are said by our exact voice. A dropped
session reconnects to a fresh one seeded from the heard history.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from openab_voice.audio.frame import ProcessedFrame
from openab_voice.engine.claims import SpeechClaims
from openab_voice.engine.duplex import DuplexVoiceEngine, EngineBinding, EngineFactory
from openab_voice.engine.handle import SpeechHandle, SpeechOutput
from openab_voice.engine.live.cuts import LiveCuts, note
from openab_voice.engine.live.delegation import Delegations
from openab_voice.engine.live.provider import LiveSession
from openab_voice.engine.live.response import LiveResponse
from openab_voice.engine.live.session import LiveSettings, live_capabilities
from openab_voice.engine.realtime.provider_engine import Active, ProviderEngine
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.engine.response import ToolPath
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.errors import ErrorCode, OpenabError, ProviderRequestFailed, ResponseError
from openab_voice.providers.live import LIVE_RATE, LiveConnector, LiveLink
from openab_voice.providers.tts import TextToSpeech
from openab_voice.tools.registry import ToolContext

if TYPE_CHECKING:
    from openai.types.live import ServerEvent

__all__ = ["LiveEngine", "live_engine"]

log = logging.getLogger(__name__)

_APPEND_BYTES = LIVE_RATE * 2  # one second of 24 kHz s16le per session.input_audio.append


def _unavailable(message: str) -> OpenabError:
    return ProviderRequestFailed(message, code=ErrorCode.REALTIME_CONNECTION_LOST, provider="openai-live")


def speaker_label(name: str) -> str:
    """A display name fit to go into a note: printable, without quotes, at most 32 characters."""
    clean = "".join(ch for ch in name if ch.isprintable() and ch not in '"\n\r')[:32].strip()
    return clean or "Someone"


class LiveEngine(ProviderEngine[LiveResponse]):
    """See the module docstring. Arguments as :class:`~openab_voice.engine.realtime.RealtimeEngine`'s;
    ``capture`` is required in practice: the live model hears audio only (a turn without its audio
    fails with the reason)."""

    def __init__(
        self,
        binding: EngineBinding,
        *,
        connector: LiveConnector,
        output: SpeechOutput,
        tools: ToolPath,
        capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
        settings: LiveSettings | None = None,
        voice: TextToSpeech | None = None,
        claims: SpeechClaims | None = None,
    ) -> None:
        self._settings = settings or LiveSettings()
        super().__init__(
            binding,
            name="live",
            output=output,
            tools=tools,
            capture=capture,
            capture_window_s=self._settings.capture_window_s,
            voice=voice,
            capabilities=live_capabilities(binding.settings.mode),
        )
        self._claims = claims
        self._turn = ToolContext(session_id=binding.session_id)  # the last turn sent: its calls' facts
        self._provider = LiveSession(
            binding=binding, connector=connector, tools=tools, settings=self._settings, route=self
        )
        self._cuts = LiveCuts(binding, session=self._provider)
        self._delegations = Delegations(
            send=self._send,
            tools=tools,
            bus=binding.bus,
            clock=binding.clock,
            session_id=binding.session_id,
            context=lambda: self._turn,
        )

    @property
    def _session(self) -> LiveSession:
        return self._provider

    @property
    def unsolicited(self) -> int:
        """Speech events of the model that came with no answer of ours in flight (never played)."""
        return self._provider.unsolicited

    def _says_exactly(self, prepared: PreparedResponse) -> bool:
        # Status lines, and a resume: the live model speaks only to audio it hears, so the cut
        # sentences are said again, word for word, by our exact voice (then told to the model).
        return prepared.exact or prepared.user is None

    # --- one answer ------------------------------------------------------------------------------

    def _response(
        self, link: LiveLink | None, handle: SpeechHandle, prepared: PreparedResponse
    ) -> LiveResponse:
        return LiveResponse(
            link=link if link is not None else _NoLink(),
            delegations=self._delegations,
            settings=self._settings,
            model=self._provider.model,
            handle=handle,
            prepared=prepared,
            output=self._output,
            bus=self._b.bus,
            clock=self._b.clock,
            report=self._b.report,
            session_id=self._b.session_id,
            claims=self._claims,
        )

    def _unavailable(self) -> OpenabError:
        return _unavailable("no live session")

    async def _request(self, response: LiveResponse) -> None:
        """What the model hears of a turn: what our exact voice said since, who speaks, the speaker's
        audio (nobody else's), then the mute that ends it."""
        prepared, link = response.prepared, response.link
        for line in self._exact.untold_lines(link):
            await note(link, f"You (the assistant) just said, in the call: {line}")
        user = prepared.user
        assert user is not None  # a resume is the exact voice's (_says_exactly)
        audio = b""
        if prepared.audio_start is not None and prepared.eou_at is not None:
            start = prepared.audio_start - self._settings.lead_in_s
            audio = self._audio.span(user.speaker_id, start, prepared.eou_at, rate=LIVE_RATE)
        if not audio:
            raise ResponseError("the live model hears audio only, and this turn has none", stage="live")
        self._turn = ToolContext(
            session_id=self._b.session_id, turn_id=response.handle.turn_id, speaker_id=user.speaker_id
        )
        # The display name is the speaker's own text and the note is developer context: on one line,
        # without quotes, clipped, it names a speaker and says little else.
        await note(link, f"{speaker_label(user.speaker_name)} says:")
        await link.send({"type": "session.input_audio.unmute"})
        for at in range(0, len(audio), _APPEND_BYTES):
            chunk = base64.b64encode(audio[at : at + _APPEND_BYTES]).decode("ascii")
            await link.send({"type": "session.input_audio.append", "audio": chunk})
        response.in_flight = True
        await link.send({"type": "session.input_audio.mute"})

    async def _claim(self, response: LiveResponse, cut: ClaimCut) -> bool:
        await self._cuts.claim(response, cut)
        return True  # the API cannot take the rest back: the output stopped at once

    async def _cut(self, response: LiveResponse, played_ms: float, *, barge_in_at: float | None) -> None:
        # No cancel, no truncation: the model is told which of its words were heard.
        await self._cuts.tell_heard(response, played_ms)

    def _settle(self, active: Active[LiveResponse], *, discard: bool) -> None:
        active.response.in_flight = False  # what the model still says is no answer of ours
        super()._settle(active, discard=discard)

    async def _send(self, event: Any) -> None:
        link = self._provider.link
        if link is None:
            raise _unavailable("no live session")
        await link.send(event)

    # --- the session's events --------------------------------------------------------------------

    def deliver(self, event: ServerEvent, *, error: bool = False) -> bool:
        """Give speech, delegations and errors to the answer in flight. A delegation with none in
        flight is still answered (never dropped); speech with none is not ours to play."""
        active = self._active
        if active is not None and active.response.in_flight:
            active.response.events.put_nowait(event)
            return True
        if not error and event.type in ("session.delegation.created", "response.event"):
            self._spawn(self._delegate(event), "live-delegation")
            return True
        return False

    async def _delegate(self, event: ServerEvent) -> None:
        try:
            await self._delegations.handle(event)
        except OpenabError as exc:  # the session went: the fresh one has no such delegation
            log.warning("live delegation not answered: %s", exc)


class _NoLink:
    """Stands in for the session of an answer that could not start (it never sends)."""

    async def send(self, event: Any) -> None:
        raise _unavailable("no live session")

    async def events(self) -> AsyncIterator[Any]:
        return
        yield

    async def close(self) -> None:
        return


def live_engine(
    *,
    connector: LiveConnector,
    output: SpeechOutput,
    tools: ToolPath,
    capture: Callable[[], AsyncIterator[ProcessedFrame]] | None = None,
    settings: LiveSettings | None = None,
    voice: TextToSpeech | None = None,
    claims: SpeechClaims | None = None,
) -> EngineFactory:
    """The factory a :class:`~openab_voice.engine.conversation.ConversationManager` builds it with."""

    def build(binding: EngineBinding) -> DuplexVoiceEngine:
        return LiveEngine(
            binding,
            connector=connector,
            output=output,
            tools=tools,
            capture=capture,
            settings=settings,
            voice=voice,
            claims=claims,
        )

    return build
