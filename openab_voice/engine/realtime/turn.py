"""What the provider hears of a turn, in order: what the exact voice said since the last request, an
attributed text item, the speaker's audio, then ``response.create``.

One session hears everyone, so each user turn starts with a text item naming its speaker
(``"Alice says:"``); the speaker's processed capture for the turn (nobody else's) follows, appended
in one-second chunks and committed at our end of speech. With no audio (capture off) the turn goes as
its transcript, still attributed. A resume (no user turn) asks the model for the words again.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING

from openab_voice.engine.realtime.response import RealtimeResponse
from openab_voice.providers.scripts import join_sentences

if TYPE_CHECKING:  # the SDK is the optional ``openai`` extra
    from openai.types.realtime import ConversationItemCreateEventParam

__all__ = ["send_turn"]

_APPEND_BYTES = 24_000 * 2  # one second of 24 kHz s16le per input_audio_buffer.append


async def send_turn(
    response: RealtimeResponse, *, audio: bytes, told: Sequence[ConversationItemCreateEventParam]
) -> None:
    """Send ``response``'s turn (``audio``: the speaker's, 24 kHz s16le, may be empty) after ``told``."""
    prepared, link = response.prepared, response.link
    for item in told:
        await link.send(item)
    user = prepared.user
    if user is None:
        # A resume: ask the model for the words again (one cut before any words were known
        # answers again). Status lines never come here: the exact voice says them.
        response.in_flight = True
        if not prepared.replay:
            await link.send({"type": "response.create"})
            return
        said = join_sentences(prepared.replay)
        instructions = f"Say exactly this, and nothing else: {said}"
        await link.send({"type": "response.create", "response": {"instructions": instructions}})
        return
    said = f"{user.speaker_name} says:" if audio else f"{user.speaker_name} says: {user.text}"
    await link.send(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": said}]},
        }
    )
    if audio:
        for at in range(0, len(audio), _APPEND_BYTES):
            chunk = base64.b64encode(audio[at : at + _APPEND_BYTES]).decode("ascii")
            await link.send({"type": "input_audio_buffer.append", "audio": chunk})
        await link.send({"type": "input_audio_buffer.commit"})
    response.in_flight = True
    await link.send({"type": "response.create"})
