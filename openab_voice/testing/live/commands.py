"""The commands of a started loopback Live session, answered as the SDK describes them.

* ``session.update``: delegation (same type) and triggers only -> ``session.updated``.
* ``session.input_audio.append``: base64 PCM16 in the session's format, no ack; heard by the
  :class:`~.floor.Floor` (silence while muted). ``mute`` / ``unmute`` -> ``muted`` / ``unmuted``.
* ``session.output_audio.fixture.play``: PCM16 24 kHz, at most 30 s, one at a time; stops the voice,
  mutes input while it plays (what arrives is heard as silence), ``fixture.playing`` at once and
  ``fixture.played`` once its duration has passed on the injected clock. The fixture's audio is not
  sent back as output deltas (the SDK does not say it is).
* ``session.{instructions,thinking,commentary}.append``: at most 500 tokens (four characters a
  token), refused while a fixture plays, ``delegation_id`` checked by the
  :class:`~.delegation.Delegations`; acked with ``*.appended{start_ms, end_ms}`` (both the
  timeline now) and kept as context for the next turn.
* ``decision.*``: the :class:`~.decisions.DecisionDesk`. ``response.item.create`` /
  ``response.create``: the :class:`~.backend.Backend`, with Responses delegation only
  (``responses_delegation_required`` otherwise).
* ``session.close`` -> ``session.closed{reason: "close_requested"}``, then a 1000 close.
* A second ``session.start`` is refused (``session_already_started``).

Error codes the SDK does not name are the loopback's assumptions, listed in the package docstring.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, assert_never

from openai.types.live import (
    CommentaryAppendedEvent,
    CommentaryAppendEvent,
    DecisionCreateEvent,
    DecisionItemCreateEvent,
    DecisionItemDeleteEvent,
    InputAudioAppendEvent,
    InputAudioMutedEvent,
    InputAudioMuteEvent,
    InputAudioUnmutedEvent,
    InputAudioUnmuteEvent,
    InstructionsAppendedEvent,
    InstructionsAppendEvent,
    OutputAudioFixturePlayedEvent,
    OutputAudioFixturePlayEvent,
    OutputAudioFixturePlayingEvent,
    ResponseCreateEvent,
    ResponseItemCreateEvent,
    SessionCloseEvent,
    SessionResource,
    SessionStartEvent,
    SessionUpdatedEvent,
    SessionUpdateEvent,
    ThinkingAppendedEvent,
    ThinkingAppendEvent,
)

from openab_voice.testing.live.responder import Appended, AppendKind
from openab_voice.testing.live.session_config import (
    MAX_APPEND_TOKENS,
    apply_update,
    delegation_target,
    session_rate,
    tokens,
)
from openab_voice.testing.live.speaking import to_pcm24
from openab_voice.testing.live.wire import ClientEvent, Refusal, ServerEvent, echo, new_id
from openab_voice.testing.realtime.conversation import audio_ms

if TYPE_CHECKING:
    from openab_voice.testing.live.session import LoopbackLiveSession

__all__ = ["Commands"]

MAX_FIXTURE_MS = 30_000
AppendEvent = InstructionsAppendEvent | ThinkingAppendEvent | CommentaryAppendEvent


def decode_pcm(audio: str) -> bytes | Refusal:
    """Base64 PCM16 from a command, or why it is refused."""
    try:
        pcm = base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        return Refusal(code="invalid_value", message="Invalid 'audio': not base64.", param="audio")
    if len(pcm) % 2:
        message = "Invalid 'audio': PCM16 needs an even number of bytes."
        return Refusal(code="invalid_value", message=message, param="audio")
    return pcm


class Commands:
    """Answers the commands of one started session."""

    def __init__(self, session: LoopbackLiveSession) -> None:
        self._session = session
        self.fixture_playing = False

    async def handle(self, event: ClientEvent) -> None:
        session = self._session
        match event:
            case SessionStartEvent():
                message = "The session has already started."
                await self._refuse(
                    Refusal(code="session_already_started", message=message, param="type"), event
                )
            case SessionUpdateEvent():
                await self._update(event)
            case InputAudioAppendEvent():
                await self._append_audio(event)
            case InputAudioMuteEvent():
                session.floor.mute("client")
                await session.send(
                    InputAudioMutedEvent(
                        type="session.input_audio.muted", event_id=new_id("event"), **echo(event.event_id)
                    )
                )
            case InputAudioUnmuteEvent():
                session.floor.unmute("client")
                await session.send(
                    InputAudioUnmutedEvent(
                        type="session.input_audio.unmuted", event_id=new_id("event"), **echo(event.event_id)
                    )
                )
            case OutputAudioFixturePlayEvent():
                await self._play_fixture(event)
            case InstructionsAppendEvent() | ThinkingAppendEvent() | CommentaryAppendEvent():
                await self._append_context(event)
            case DecisionItemCreateEvent():
                await session.send(session.decisions.create_item(event))
            case DecisionItemDeleteEvent():
                await self._answer(session.decisions.delete_item(event), event)
            case DecisionCreateEvent():
                await self._answer(session.decisions.create(event, self._resource()), event)
            case ResponseItemCreateEvent() | ResponseCreateEvent():
                await self._backend(event)
            case SessionCloseEvent():
                await session.end("close_requested", event.event_id)
            case _:
                assert_never(event)

    def _resource(self) -> SessionResource:
        resource = self._session.resource
        assert resource is not None
        return resource

    async def _refuse(self, refusal: Refusal, event: ClientEvent) -> None:
        await self._session.refuse(refusal, event.event_id)

    async def _answer(self, answer: ServerEvent | Refusal, event: ClientEvent) -> None:
        await (self._refuse(answer, event) if isinstance(answer, Refusal) else self._session.send(answer))

    async def _update(self, event: SessionUpdateEvent) -> None:
        updated = apply_update(self._resource(), event.session)
        if isinstance(updated, Refusal):
            return await self._refuse(updated, event)
        self._session.resource = updated
        await self._session.send(
            SessionUpdatedEvent(
                type="session.updated", event_id=new_id("event"), session=updated, **echo(event.event_id)
            )
        )

    async def _append_audio(self, event: InputAudioAppendEvent) -> None:
        pcm = decode_pcm(event.audio)
        if isinstance(pcm, Refusal):
            return await self._refuse(pcm, event)
        self._session.floor.append(to_pcm24(pcm, session_rate(self._resource())))

    async def _play_fixture(self, event: OutputAudioFixturePlayEvent) -> None:
        session = self._session
        pcm = decode_pcm(event.audio)
        if not isinstance(pcm, Refusal) and audio_ms(pcm) > MAX_FIXTURE_MS:
            pcm = Refusal(code="invalid_value", message="A fixture is at most 30 seconds.", param="audio")
        elif not isinstance(pcm, Refusal) and self.fixture_playing:
            pcm = Refusal(code="fixture_active", message="Only one fixture can be active.", param=None)
        if isinstance(pcm, Refusal):
            return await self._refuse(pcm, event)
        self.fixture_playing = True
        session.dialogue.stop_all("fixture")  # it interrupts model speech
        session.floor.mute("fixture")
        clock = session.clock
        deadline = clock.monotonic() + audio_ms(pcm) / 1000
        await session.send(
            OutputAudioFixturePlayingEvent(
                type="session.output_audio.fixture.playing", event_id=new_id("event"), **echo(event.event_id)
            )
        )

        async def played() -> None:
            await clock.sleep(deadline - clock.monotonic())
            self.fixture_playing = False
            session.floor.unmute("fixture")
            await session.send(
                OutputAudioFixturePlayedEvent(
                    type="session.output_audio.fixture.played",
                    event_id=new_id("event"),
                    **echo(event.event_id),
                )
            )

        session.spawn(played(), "live-fixture")

    async def _append_context(self, event: AppendEvent) -> None:
        session = self._session
        refusal = session.delegations.check(event.delegation_id)
        if self.fixture_playing:
            refusal = Refusal(code="fixture_active", message="Rejected while an audio fixture is active.")
        elif tokens(event.content) > MAX_APPEND_TOKENS:
            message = f"'content' is limited to {MAX_APPEND_TOKENS} tokens."
            refusal = Refusal(code="string_above_max_length", message=message, param="content")
        if refusal is not None:
            return await self._refuse(refusal, event)
        at = round(session.timeline_ms())
        acknowledgement, kind = _appended(event, at)
        appended = Appended(kind=kind, content=event.content, delegation_id=event.delegation_id, at_ms=at)
        session.appended.append(appended)
        session.conversation.pending.append(appended)
        await session.send(acknowledgement)
        session.delegations.appended(appended)
        await session.notify()

    async def _backend(self, event: ResponseItemCreateEvent | ResponseCreateEvent) -> None:
        session = self._session
        if delegation_target(self._resource()) != "responses":
            message = f"{event.type} requires Responses delegation."
            return await self._refuse(
                Refusal(code="responses_delegation_required", message=message, param="type"), event
            )
        if isinstance(event, ResponseItemCreateEvent):
            refusal = session.backend.item(event)
            return await self._refuse(refusal, event) if refusal is not None else None
        run = session.backend.create()
        if isinstance(run, Refusal):
            return await self._refuse(run, event)
        session.spawn(session.backend.resume(run), "live-backend")


def _appended(event: AppendEvent, at: int) -> tuple[ServerEvent, AppendKind]:
    """The ``*.appended`` acknowledgement of an append, and which kind of context it adds."""
    event_id = new_id("event")
    echoed = echo(event.event_id)
    match event:
        case InstructionsAppendEvent():
            return InstructionsAppendedEvent(
                type="session.instructions.appended", event_id=event_id, start_ms=at, end_ms=at, **echoed
            ), "instructions"
        case ThinkingAppendEvent():
            return ThinkingAppendedEvent(
                type="session.thinking.appended", event_id=event_id, start_ms=at, end_ms=at, **echoed
            ), "thinking"
        case CommentaryAppendEvent():
            return CommentaryAppendedEvent(
                type="session.commentary.appended", event_id=event_id, start_ms=at, end_ms=at, **echoed
            ), "commentary"
