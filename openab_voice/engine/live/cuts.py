"""Taking a live answer back, as far as GPT-Live allows (docs/adr/0022-gpt-live-engine.md, decision 3).

The API has no cancel and no truncation. After a barge-in (or a discard) the output has already
stopped; :meth:`LiveCuts.tell_heard` tells the model, in a ``session.instructions.append`` note (the
API's stated means for "content already delivered"), which words the listeners heard, and publishes
``ProviderToldHeard``. A sentence of the model's transcript claiming an action status the store does
not bear out (:class:`~openab_voice.engine.realtime.speech.ClaimCut`) stops the output at once
(:meth:`LiveCuts.claim`): the claim is reported as ``SpeechClaimCut``, never committed, the model is
told, and the true status is announced by our exact voice.
"""

from __future__ import annotations

import contextlib
import logging

from openab_voice.engine.duplex import EngineBinding
from openab_voice.engine.events import ProviderToldHeard, SpeechClaimCut
from openab_voice.engine.handle import FRAME_MS
from openab_voice.engine.live.provider import LiveSession
from openab_voice.engine.live.response import LiveResponse
from openab_voice.engine.realtime.speech import ClaimCut
from openab_voice.errors import OpenabError
from openab_voice.providers.live import LiveLink

__all__ = ["LiveCuts", "note"]

log = logging.getLogger(__name__)

NOTE_CHARS = 1500
"""A note is at most 500 tokens: the end of a longer one is kept."""


async def note(link: LiveLink, text: str) -> None:
    """A ``session.instructions.append`` of ``text``: developer context the model keeps."""
    await link.send(
        {"type": "session.instructions.append", "content": text[-NOTE_CHARS:], "delegation_id": None}
    )


class LiveCuts:
    """Tells the live model what became of its cut answers (see the module docstring).

    Args:
        binding: the conversation (its bus, clock and ``announce``).
        session: the live session (a note goes only to the session the answer was heard on).
    """

    def __init__(self, binding: EngineBinding, *, session: LiveSession) -> None:
        self._b = binding
        self._session = session

    async def tell_heard(self, response: LiveResponse, played_ms: float) -> None:
        """The answer was cut: tell the model which of its words the listeners heard."""
        link = self._session.link
        if link is None or link is not response.link or not response.handle.text:
            return  # a fresh session is seeded from the heard history instead
        heard = response.handle.heard_text()
        told = (
            f'Your last answer was cut off. The listeners heard only: "{heard}". They did not hear the rest.'
        )
        try:
            await note(link, told)
        except OpenabError:
            return
        self._b.bus.publish(
            ProviderToldHeard(
                at=self._b.clock.monotonic(),
                session_id=self._b.session_id,
                turn_id=response.handle.turn_id,
                heard=heard,
                played_ms=played_ms,
            )
        )

    async def claim(self, response: LiveResponse, cut: ClaimCut) -> None:
        """The model began to claim what the store does not bear out: its output stops now (the API
        cannot take the rest back), the claim is reported and never committed, the model is told the
        truth, and the true status is said by our exact voice."""
        found = cut.contradiction
        handle = response.handle
        handle.stop()  # inside the answer's own task: not cancelled
        response.in_flight = False
        log.warning("cut the live model's claim %r: the action is %s", found.claimed, found.actual)
        self._b.bus.publish(
            SpeechClaimCut(
                at=self._b.clock.monotonic(),
                session_id=self._b.session_id,
                turn_id=handle.turn_id,
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
        with contextlib.suppress(OpenabError):
            await note(response.link, f"That was wrong and was not heard: {found.correction}")
