"""Taking a realtime response back: what the provider generates is cancelled, and its items keep only
what was heard.

A barge-in (and a discard) stops the output first, then sends ``response.cancel`` while the response
is still generating and ``conversation.item.truncate`` for each of its audio items at what playback
reports as played, so the provider's context holds only heard audio.

Claims: each sentence of the model's audio transcript is checked against the action store
(:class:`~openab_voice.engine.claims.SpeechClaims`) as it arrives, before its audio plays. A sentence
claiming a status no action of the session is in (RFC decision 6: the model "cannot announce approval
or claim an action result") is cut: generation is cancelled at once, the output ends before the
claim (what came before it plays out when none of the claim's audio is out yet; otherwise it stops
now), the items are truncated there, the claim is published as ``SpeechClaimCut`` and never committed
as heard, and the canonical line for the true status is announced in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.events import ProviderTruncated, SpeechClaimCut
from openab_voice.engine.handle import FRAME_MS, SpeechOutput
from openab_voice.engine.realtime.provider import ProviderSession
from openab_voice.engine.realtime.response import RealtimeResponse
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.errors import OpenabError

__all__ = ["Cuts"]

log = logging.getLogger(__name__)


class Cuts:
    """Cancels and truncates the realtime engine's responses (see the module docstring).

    Args:
        binding: the conversation (its bus, clock and ``announce``).
        session: the provider session (late events of a cancelled response are forgotten there).
        output: playback (a claim cut lets what came before it play out).
    """

    def __init__(self, binding: EngineBinding, *, session: ProviderSession, output: SpeechOutput) -> None:
        self._b = binding
        self._session = session
        self._output = output

    async def cut(self, response: RealtimeResponse, played_ms: float, *, barge_in_at: float | None) -> None:
        """Cancel what the provider still generates and truncate its items at the played position."""
        await self.cancel(response)
        await self.truncate(response, played_ms, barge_in_at=barge_in_at)

    async def cancel(self, response: RealtimeResponse) -> None:
        """``response.cancel`` if it is still generating; its late events are dropped either way."""
        if response.in_flight:
            response.in_flight = False
            self._session.forget(response.provider_ids, created=bool(response.provider_ids))
            with contextlib.suppress(OpenabError):
                await response.link.send({"type": "response.cancel"})
        else:
            self._session.forget(response.provider_ids, created=True)

    async def truncate(
        self, response: RealtimeResponse, played_ms: float, *, barge_in_at: float | None
    ) -> None:
        """``conversation.item.truncate`` each item at what was heard of it."""
        link = response.link
        for item_id, audio_end_ms in response.truncations(played_ms):
            try:
                await link.send(
                    {
                        "type": "conversation.item.truncate",
                        "item_id": item_id,
                        "content_index": 0,
                        "audio_end_ms": audio_end_ms,
                    }
                )
            except OpenabError:
                return  # the session is gone: the fresh one is seeded from the heard history anyway
            turn_id = response.handle.turn_id
            if barge_in_at is not None:
                self._b.latency("truncate_sent_ms", barge_in_at, turn_id=turn_id, speaker_id=None)
            self._b.bus.publish(
                ProviderTruncated(
                    at=self._b.clock.monotonic(),
                    session_id=self._b.session_id,
                    turn_id=turn_id,
                    item_id=item_id,
                    audio_end_ms=audio_end_ms,
                    played_ms=played_ms,
                    utterance_id=response.handle.utterance_id,
                )
            )

    async def claim(self, response: RealtimeResponse, cut: ClaimCut) -> bool:
        """Stop the claim before it plays, take it out of the provider's context, report it, and
        queue the true status in its place; whether the output was cut (not just ended early).

        When none of the claim's audio is out yet, what came before it plays to its end; when its
        first words are (they arrived before the words that made it a claim), the output stops now.
        """
        found = cut.contradiction
        handle = response.handle
        await self.cancel(response)  # the model stops generating at once
        log.warning("cut the model's claim %r: the action is %s", found.claimed, found.actual)
        self._b.bus.publish(
            SpeechClaimCut(
                at=self._b.clock.monotonic(),
                session_id=self._b.session_id,
                turn_id=response.handle.turn_id,
                text=found.sentence,
                claimed=found.claimed,
                actual=found.actual,
                action_id=found.action_id,
                kept_ms=cut.kept_frames * FRAME_MS,
                correction=found.correction,
            )
        )
        if self._b.announce is not None:
            self._b.announce(found.correction, found.cause)
        uid = handle.utterance_id
        if cut.claim_frames or uid is None:
            played_ms, interrupted = handle.stop(), True  # inside the response's own task: not cancelled
        else:
            await response.release()
            position = await asyncio.shield(self._output.finish(uid))
            handle.mark_played(position)
            played_ms, interrupted = position.played_ms, position.interrupted
        await self.truncate(response, played_ms, barge_in_at=None)
        return interrupted
