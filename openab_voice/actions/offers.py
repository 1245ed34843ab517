"""What a proposal offers the operator: its buttons, and the message that carries them.

Pure functions of the stored action, the request and the broker's settings. The buttons are derived,
never stored, so that the broker posting a proposal and the one judging a click on it
(:mod:`~openab_voice.actions.decisions`) agree by construction.
"""

from __future__ import annotations

from openab_voice.actions.phrases import asks_to_run
from openab_voice.actions.ports import CONFIRM_EXEC, CONFIRM_EXTERNAL, ProposalView
from openab_voice.actions.requests import ActionRequest, BrokerSettings, plain_ceiling
from openab_voice.errors import ErrorCode
from openab_voice.store.records import ActionRecord


def offered(settings: BrokerSettings, record: ActionRecord) -> tuple[str, ...]:
    """The buttons ``record``'s proposal was posted with.

    Derived, not stored: they are a pure function of the stored goal and (already capped) hint
    and of the broker's settings, which are fixed for the process's life; and a click is only
    honoured in the voice session that heard the request (``Decisions.stale``: its random id is new
    on every join and every start), so the settings that judge a click are those that posted it.
    """
    return settings.offered_decisions(record.goal, record.effect_hint)


def not_offered(settings: BrokerSettings, decision: str) -> tuple[str, str]:
    """(code, why) refusing a click on a button the proposal did not offer."""
    refusal = settings.exec_refusal()
    if decision == CONFIRM_EXEC and refusal is not None:
        return ErrorCode.ACTION_EXEC_UNAVAILABLE, refusal  # the proposal said why (ADR 0007)
    return ErrorCode.ACTION_DECISION_NOT_OFFERED, f"this proposal did not offer the {decision} button"


def proposal_view(
    settings: BrokerSettings, record: ActionRecord, request: ActionRequest, buttons: tuple[str, ...]
) -> ProposalView:
    """The proposal message for ``record`` as stored, offering ``buttons``."""
    return ProposalView(
        action_id=record.id,
        channel_id=record.text_channel_id,
        goal=record.goal,
        proposed_by=record.proposed_by,
        effect_ceiling=plain_ceiling(record.effect_hint).value,
        expires_at=record.expires_at,
        source=request.source,
        offers_exec=CONFIRM_EXEC in buttons,
        exec_note=settings.exec_refusal() if asks_to_run(record.goal) else None,
        offers_external=CONFIRM_EXTERNAL in buttons,
        containment_note=settings.containment_notice,
    )
