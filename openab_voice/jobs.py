"""The job vocabulary: statuses, events, effect ceilings and the pure transition. No I/O.

It sits at the bottom of the package beside ``clock`` and ``errors`` (it imports nothing else of ours),
so ``store/``, ``actions/`` and ``acp/`` all speak it without importing one another.

::

    proposed ──deliver──▶ delivered ──confirm──▶ confirmed ──start──▶ running ──succeed──▶ succeeded
       │                     │                      │                    ├──fail──────▶ failed
       │ deliver_fail        │ reject / expire      │ cancel / fail      ├──cancel────▶ cancelled
       ▼                     ▼                      ▼                    └──lose──────▶ outcome_unknown
    delivery_failed       rejected / expired     cancelled / failed

``proposed`` can also be rejected, expired or cancelled. Terminal states accept nothing. ``lose`` is
the only way out of ``running`` when nobody knows what the agent did (crash after the prompt was
sent, timeout, unconfirmed cancel, restart): such a job is never re-run.

The store applies a transition as a compare-and-set on the current status (write-ahead, before the
effect), so two racing events cannot both win.
"""

from __future__ import annotations

from enum import StrEnum
from typing import assert_never

from openab_voice.errors import ActionError, ErrorCode


class JobStatus(StrEnum):
    """Where an action is. Values are stored in the database and shown to users: keep them stable."""

    PROPOSED = "proposed"
    DELIVERED = "delivered"
    DELIVERY_FAILED = "delivery_failed"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def terminal(self) -> bool:
        """Whether no event can move the job any more."""
        return self in TERMINAL


TERMINAL = frozenset(
    {
        JobStatus.DELIVERY_FAILED,
        JobStatus.REJECTED,
        JobStatus.EXPIRED,
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.OUTCOME_UNKNOWN,
    }
)
# Statuses in which a proposal still waits for the operator.
AWAITING_CONFIRMATION = frozenset({JobStatus.PROPOSED, JobStatus.DELIVERED})


class JobEvent(StrEnum):
    """What can happen to an action."""

    DELIVER = "deliver"
    DELIVER_FAIL = "deliver_fail"
    CONFIRM = "confirm"
    REJECT = "reject"
    EXPIRE = "expire"
    START = "start"
    SUCCEED = "succeed"
    FAIL = "fail"
    CANCEL = "cancel"
    LOSE = "lose"


class EffectCeiling(StrEnum):
    """The most an action may do, fixed when the operator confirms it. Ordered: each includes the last."""

    READ_ONLY = "read_only"
    WORKSPACE_WRITE = "workspace_write"
    # Run commands, but only inside the agent's sandbox (docs/adr/0007-agent-sandbox.md): granted only
    # by the operator's own button at confirmation, and only while the sandbox is active.
    WORKSPACE_EXEC = "workspace_exec"
    EXTERNAL = "external"

    @property
    def rank(self) -> int:
        """0 for read_only, 1 for workspace_write, 2 for workspace_exec, 3 for external."""
        return _CEILING_ORDER.index(self)

    def allows(self, needed: EffectCeiling) -> bool:
        """Whether an effect of level ``needed`` is within this ceiling."""
        return needed.rank <= self.rank


_CEILING_ORDER = (
    EffectCeiling.READ_ONLY,
    EffectCeiling.WORKSPACE_WRITE,
    EffectCeiling.WORKSPACE_EXEC,
    EffectCeiling.EXTERNAL,
)


def transition(status: JobStatus, event: JobEvent) -> JobStatus:
    """The status after ``event``.

    Raises:
        ActionError: ``ACTION_ILLEGAL_TRANSITION`` when ``event`` cannot happen in ``status``.
    """
    target = _target(status, event)
    if target is None:
        raise ActionError(
            f"{event.value} is not allowed in status {status.value}",
            code=ErrorCode.ACTION_ILLEGAL_TRANSITION,
            status=status.value,
            event=event.value,
        )
    return target


def can(status: JobStatus, event: JobEvent) -> bool:
    """Whether ``event`` is allowed in ``status``."""
    return _target(status, event) is not None


def _target(status: JobStatus, event: JobEvent) -> JobStatus | None:
    match event:
        case JobEvent.DELIVER:
            return JobStatus.DELIVERED if status is JobStatus.PROPOSED else None
        case JobEvent.DELIVER_FAIL:
            return JobStatus.DELIVERY_FAILED if status is JobStatus.PROPOSED else None
        case JobEvent.CONFIRM:
            return JobStatus.CONFIRMED if status is JobStatus.DELIVERED else None
        case JobEvent.REJECT:
            return JobStatus.REJECTED if status in AWAITING_CONFIRMATION else None
        case JobEvent.EXPIRE:
            return JobStatus.EXPIRED if status in AWAITING_CONFIRMATION else None
        case JobEvent.START:
            return JobStatus.RUNNING if status is JobStatus.CONFIRMED else None
        case JobEvent.SUCCEED:
            return JobStatus.SUCCEEDED if status is JobStatus.RUNNING else None
        case JobEvent.FAIL:
            # confirmed -> failed: it could not start (workspace busy, agent not spawnable), nothing ran.
            return JobStatus.FAILED if status in (JobStatus.CONFIRMED, JobStatus.RUNNING) else None
        case JobEvent.CANCEL:
            cancellable = AWAITING_CONFIRMATION | {JobStatus.CONFIRMED, JobStatus.RUNNING}
            return JobStatus.CANCELLED if status in cancellable else None
        case JobEvent.LOSE:
            return JobStatus.OUTCOME_UNKNOWN if status is JobStatus.RUNNING else None
        case _:
            assert_never(event)
