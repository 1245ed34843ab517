"""What the action plane needs from the rest of the bot, as Protocols (Discord text, the voice side).

The broker never holds a Discord client: :mod:`openab_voice.discord.host.control` implements
:class:`ControlChannel` and :class:`~openab_voice.discord.host.service.VoiceSessions` implements
:class:`VoiceSide`; unit tests pass fakes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from openab_voice.acp.types import TurnCompletion
from openab_voice.engine.expiry import SpeechCause
from openab_voice.store.records import ActionRecord

CONFIRM = "confirm"
CONFIRM_EXEC = "confirm_exec"  # confirm with the workspace_exec ceiling: commands inside the sandbox
CONFIRM_EXTERNAL = "confirm_external"  # confirm with the external ceiling: network and anything else
REJECT = "reject"
CUSTOM_ID_PREFIX = "openab:action"


DECISIONS = (CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL, REJECT)


def button_id(decision: str, action_id: str) -> str:
    """The component custom id of a proposal's Confirm / Reject button."""
    return f"{CUSTOM_ID_PREFIX}:{decision}:{action_id}"


def parse_button_id(custom_id: str) -> tuple[str, str] | None:
    """(decision, action id) of one of our buttons, else None."""
    parts = custom_id.split(":")
    if len(parts) != 4 or ":".join(parts[:2]) != CUSTOM_ID_PREFIX or parts[2] not in DECISIONS:
        return None
    return parts[2], parts[3]


class CancelReply(StrEnum):
    """The executor's answer to a cancel of an action (``ActionExecutor.cancel``)."""

    ACCEPTED = "accepted"  # it will end cancelled before the spawn, or through the ACP cancel path
    FINISHING = "finishing"  # the agent's turn already ended here; its outcome is being recorded
    NOT_HERE = "not_here"  # this process does not hold the action


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalView:
    """What the operator sees before confirming: exactly what will be asked of the agent.

    ``offers_exec``: the goal asks to run something and the sandbox is active, so the proposal gets a
    button that confirms with ``workspace_exec``; ``exec_note`` says why it is not offered.
    ``offers_external``: the hint is ``external`` and ``OPENAB_ACTION_MAX_EFFECT`` allows it, so the
    proposal gets a button that confirms with ``external``. The plain Confirm grants at most
    ``workspace_write`` (``effect_ceiling``); a click is honoured only for a button offered here.
    """

    action_id: str
    channel_id: int
    goal: str
    proposed_by: int
    effect_ceiling: str
    expires_at: float
    source: str
    offers_exec: bool = False
    exec_note: str | None = None
    offers_external: bool = False
    containment_note: str | None = None  # shown on every proposal when containment is off


class ControlChannel(Protocol):
    """The pinned text channel where proposals are confirmed and results are posted."""

    async def post_proposal(self, proposal: ProposalView) -> int:
        """Post and pin the proposal with Confirm / Reject buttons; return the message id.

        Raises:
            DeliveryFailed: it was not posted, or not pinned.
        """
        ...

    async def close_proposal(self, *, channel_id: int, message_id: int, note: str) -> None:
        """Replace the buttons with the decision (best effort: the store already holds it)."""
        ...

    async def post_result(self, *, channel_id: int, parts: Sequence[str], attachment: str | None) -> int:
        """Post the result messages (and the full text as a file when given); return how many.

        Raises:
            DeliveryFailed: any part could not be posted.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Audience:
    """Who listens in the bot's voice channel, and who of them can view the control channel
    (:mod:`openab_voice.actions.audience` decides what may be read to them).

    Attributes:
        listeners: everyone in the voice channel but the bot, other bots included.
        viewers: those listeners who can view the control channel (a subset of ``listeners``).
    """

    listeners: frozenset[int]
    viewers: frozenset[int]


class VoiceSide(Protocol):
    """The voice facts the broker trusts (server-side state) and the one way it speaks."""

    def generation(self, guild_id: int) -> int | None:
        """The current voice-session generation of ``guild_id`` (None when not connected)."""
        ...

    def session_id(self, guild_id: int) -> str | None:
        """The random id of the guild's current voice session (None when not connected)."""
        ...

    def listeners(self, guild_id: int) -> frozenset[int] | None:
        """Everyone in the bot's voice channel but the bot, other bots included (None: not connected)."""
        ...

    def audience(self, guild_id: int, control_channel_id: int) -> Audience | None:
        """The listeners and which of them can view ``control_channel_id`` (None: not connected)."""
        ...

    async def say(self, guild_id: int, text: str, *, cause: SpeechCause | None = None) -> bool:
        """Speak ``text`` in the guild's voice channel when the dialogue is on; False when it cannot.

        ``cause``: while the line is true (:mod:`openab_voice.engine.expiry`); dropped once expired.
        """
        ...


class ResultSink(Protocol):
    """Where a settled action's result goes: the control channel and the voice (the bot), or nowhere
    but the store (an executor worker: the outcome and result text are already written there)."""

    async def deliver(self, record: ActionRecord, completion: TurnCompletion) -> None:
        """Hand on the result of ``record`` (in its final status) and its ``completion``."""
