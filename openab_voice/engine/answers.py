"""The answer to a user turn, as the conversation prepares it for its engine.

The same for a final and for the speculative final before it (preemptive generation): what the
model gets (the request without the name that addressed the bot, see
:func:`~openab_voice.engine.turns.without_address`), the names a reply may wrongly start with, and
until when it is still worth saying (the one who asked is still in the channel).
"""

from __future__ import annotations

from openab_voice.engine.context import UserUtterance
from openab_voice.engine.expiry import SpeechCause
from openab_voice.engine.supervisor import PreparedResponse
from openab_voice.engine.turns import Roster, wake_names, without_address

__all__ = ["answer_to", "still_here"]


def answer_to(
    roster: Roster,
    *,
    wake_name: str,
    turn_id: str,
    speaker_id: str,
    text: str,
    at: float,
    eou_at: float | None,
    audio_start: float | None = None,
) -> PreparedResponse:
    """The response to ``speaker_id`` saying ``text`` (a user turn), waiting for its start."""
    name = roster.display_name(speaker_id)
    own, *aliases = wake_names(wake_name) or (wake_name,)  # "Jarvis, 贾维斯": the first is its own
    user = UserUtterance(
        turn_id=turn_id,
        speaker_id=speaker_id,
        speaker_name=name,
        text=without_address(text, wake_name),
        at=at,
    )
    return PreparedResponse(
        user=user,
        eou_at=eou_at,
        audio_start=audio_start,
        speaker_id=speaker_id,
        labels=tuple(sorted({roster.display_name(h) for h in roster.humans()} | {name, *aliases})),
        own_name=own,
        cause=still_here(roster, speaker_id, name),
    )


def still_here(roster: Roster, speaker_id: str, name: str) -> SpeechCause:
    """An answer is for the one who asked: once they left the channel, the rest is not said."""

    def expired() -> str | None:
        return None if speaker_id in roster.humans() else f"{name} left the channel"

    return SpeechCause(name=f"answer to {name}", expired=expired)
