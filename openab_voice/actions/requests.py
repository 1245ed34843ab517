"""What goes into the broker and what comes out: policy, requests, outcomes.

Plain data shared by the broker and its callers (the semantic tools, the task phrase, the bench).
"""

from __future__ import annotations

from dataclasses import dataclass

from openab_voice.actions.phrases import asks_to_run
from openab_voice.actions.ports import CONFIRM, CONFIRM_EXEC, CONFIRM_EXTERNAL, REJECT
from openab_voice.errors import ErrorCode
from openab_voice.jobs import EffectCeiling, JobStatus
from openab_voice.settings.actions import ActionSettings
from openab_voice.settings.defaults import default_of
from openab_voice.shards import ShardRange
from openab_voice.store.records import ActionRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSettings:
    """Policy fixed at start-up."""

    operator_user_id: int
    expiry_s: float = default_of(ActionSettings, "action_expiry_s")
    max_effect: EffectCeiling = EffectCeiling(default_of(ActionSettings, "action_max_effect"))
    sweep_interval_s: float = 5.0
    # Why the workspace_exec ceiling cannot be granted here (None: the agent sandbox is active).
    exec_unavailable: str | None = "no agent sandbox is configured"
    # Why every proposal is refused: no containment for agents here (None: they can run).
    refusal: str | None = None
    # What every proposal must say about containment (containment turned off explicitly).
    containment_notice: str | None = None
    # What contains the agents, in one line for /voice status (Containment.describe()).
    containment: str = "not reported"
    # A bot pod's shards: it expires, reconciles and delivers only its own guilds' actions (None: all).
    shards: ShardRange | None = None

    def exec_refusal(self) -> str | None:
        """Why a confirmation with ``workspace_exec`` would be refused, or None when it can be granted."""
        if self.exec_unavailable is not None:
            return f"running commands needs the agent sandbox: {self.exec_unavailable}"
        if not self.max_effect.allows(EffectCeiling.WORKSPACE_EXEC):
            return f"OPENAB_ACTION_MAX_EFFECT is {self.max_effect.value}, below workspace_exec"
        return None

    def offered_decisions(self, goal: str, hint: EffectCeiling) -> tuple[str, ...]:
        """The buttons a proposal of ``goal`` with the effect ``hint`` is posted with, in order.

        Confirm and Reject always; **Confirm + run commands** when the goal asks to run something
        and ``workspace_exec`` can be granted here; **Confirm + network/external effects** when the
        hint is ``external`` and ``OPENAB_ACTION_MAX_EFFECT`` allows it. The broker refuses a click
        on any other button.
        """
        decisions = [CONFIRM]
        if asks_to_run(goal) and self.exec_refusal() is None:
            decisions.append(CONFIRM_EXEC)
        if hint is EffectCeiling.EXTERNAL and self.max_effect.allows(EffectCeiling.EXTERNAL):
            decisions.append(CONFIRM_EXTERNAL)
        decisions.append(REJECT)
        return tuple(decisions)


def plain_ceiling(hint: EffectCeiling) -> EffectCeiling:
    """The ceiling the plain Confirm grants: the hint, but never above ``workspace_write``.
    ``workspace_exec`` and ``external`` each come only from their own button."""
    return min(hint, EffectCeiling.WORKSPACE_WRITE, key=lambda c: c.rank)


def granted_ceiling(decision: str, hint: EffectCeiling) -> EffectCeiling:
    """The ceiling a confirming ``decision`` grants an action proposed with ``hint``."""
    if decision == CONFIRM_EXEC:
        return EffectCeiling.WORKSPACE_EXEC
    if decision == CONFIRM_EXTERNAL:
        return EffectCeiling.EXTERNAL
    return plain_ceiling(hint)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionRequest:
    """A proposal as it reaches the broker.

    ``goal`` and ``effect_hint`` come from the model or the transcript (untrusted); everything else
    from the bot's own state. The idempotency key is ``voice_session_id`` plus ``call_id`` (the
    provider's id for the call, or the utterance id for the task phrase): the voice session id is
    random per join, so the key stays unique across restarts, where the generation and utterance
    counters start again at 1.
    """

    goal: str
    effect_hint: EffectCeiling
    call_id: str
    source: str  # "tool" or "phrase"
    guild_id: int
    voice_channel_id: int | None
    text_channel_id: int
    session_generation: int
    voice_session_id: str
    speaker_id: int | None

    @property
    def idempotency_key(self) -> str:
        """Durable identity of this request: the same call heard twice is the same action."""
        return f"{self.source}:{self.guild_id}:{self.voice_session_id}:{self.call_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a request, click or cancel led to. ``code`` is set when it was refused."""

    ok: bool
    message: str
    action: ActionRecord | None = None
    code: str | None = None
    created: bool = False


def repeat_outcome(record: ActionRecord) -> Outcome:
    """The answer to a request whose idempotency key already has an action: its real state."""
    if record.status is JobStatus.DELIVERY_FAILED:
        return Outcome(
            ok=False,
            message="the proposal could not be posted",
            action=record,
            code=ErrorCode.ACTION_DELIVERY_FAILED,
        )
    if record.status.terminal:
        return Outcome(
            ok=False,
            message=f"that request already ended: {record.status}",
            action=record,
            code=ErrorCode.ACTION_ALREADY_DECIDED,
        )
    return Outcome(ok=True, message=f"already proposed ({record.status})", action=record)
