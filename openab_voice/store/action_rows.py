"""Action rows inside a caller's transaction: insert, compare-and-set, transitions, leases.

:class:`~openab_voice.store.jobs.JobStore` owns the transactions; these functions only read and write
rows in the one they are given, so a transition and its side rows (transition log, quarantine) commit
together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import BigInteger, ColumnElement, Integer, literal, or_, select, true, update
from sqlalchemy.orm import Session

from openab_voice.errors import ActionError, ErrorCode, StaleTransition
from openab_voice.jobs import EffectCeiling, JobEvent, JobStatus, transition
from openab_voice.shards import ShardRange
from openab_voice.store.convert import action_record
from openab_voice.store.models import Action, ActionTransition, IdempotencyKey
from openab_voice.store.notify import notify_settled
from openab_voice.store.records import CREATE_EVENT, ActionFields, ActionRecord, NewAction


def in_shards(shards: ShardRange | None) -> ColumnElement[bool]:
    """Actions of the guilds on ``shards`` (Discord's ``(guild_id >> 22) % count``); None: every one."""
    if shards is None:
        return true()
    # PostgreSQL shifts a bigint by an integer only (no bigint >> bigint operator).
    shifted = Action.guild_id.op(">>", return_type=BigInteger)(literal(22, Integer))
    shard = shifted.op("%", return_type=BigInteger)(shards.count)
    return shard.in_(shards.ids)


def insert(session: Session, new: NewAction, *, now: float) -> ActionRecord:
    """Add ``new`` in status ``proposed`` with its creation transition and idempotency key.

    Raises:
        sqlalchemy.exc.IntegrityError: the id or the idempotency key exists (the transaction is lost).
    """
    row = Action(
        id=new.id,
        idempotency_key=new.idempotency_key,
        status=JobStatus.PROPOSED.value,
        goal=new.goal,
        effect_hint=EffectCeiling(new.effect_hint).value,  # also refuses a stray string
        guild_id=new.guild_id,
        voice_channel_id=new.voice_channel_id,
        text_channel_id=new.text_channel_id,
        session_generation=new.session_generation,
        voice_session_id=new.voice_session_id,
        proposed_by=new.proposed_by,
        workspace_id=new.workspace_id,
        created_at=now,
        updated_at=now,
        expires_at=new.expires_at,
        version=1,
    )
    session.add(row)
    session.flush()  # the action row first: the rows below reference it
    session.add(
        ActionTransition(
            action_id=new.id,
            from_status=None,
            to_status=JobStatus.PROPOSED.value,
            event=CREATE_EVENT,
            actor=f"user:{new.proposed_by}",
            reason="",
            at=now,
        )
    )
    if new.idempotency_key is not None:
        session.add(IdempotencyKey(key=new.idempotency_key, action_id=new.id, created_at=now))
    session.flush()
    return action_record(row)


def find_by_key(session: Session, key: str) -> ActionRecord | None:
    """The action created with idempotency key ``key``, if any."""
    row = session.scalars(
        select(Action)
        .join(IdempotencyKey, IdempotencyKey.action_id == Action.id)
        .where(IdempotencyKey.key == key)
    ).one_or_none()
    return None if row is None else action_record(row)


def apply_event(
    session: Session,
    action_id: str,
    event: JobEvent,
    *,
    now: float,
    actor: str,
    reason: str,
    expected_version: int | None,
    values: Mapping[str, object],
    where: Sequence[ColumnElement[bool]] = (),
) -> ActionRecord:
    """Compare-and-set the action from its current status to the one ``event`` leads to, and log it.

    ``where`` adds conditions to the compare-and-set (the reaper's "the lease is still expired").

    Raises:
        ActionError: ``ACTION_UNKNOWN`` or ``ACTION_ILLEGAL_TRANSITION``.
        StaleTransition: not at ``expected_version``, or changed between the read and the update.
    """
    source, version = status_and_version(session, action_id)
    if expected_version is not None and version != expected_version:
        raise stale(action_id, expected_version, version)
    target = transition(source, event)
    row = compare_and_set(
        session,
        action_id,
        now=now,
        version=version,
        status=source,
        values={"status": target.value, **values},
        where=where,
    )
    if row is None:
        raise stale(action_id, version, None)
    session.add(
        ActionTransition(
            action_id=action_id,
            from_status=source.value,
            to_status=target.value,
            event=event.value,
            actor=actor,
            reason=reason,
            at=now,
        )
    )
    if target.terminal:
        notify_settled(session, action_id)  # at commit: the remote bot delivers it at once
    return action_record(row)


def compare_and_set(
    session: Session,
    action_id: str,
    *,
    now: float,
    version: int,
    status: JobStatus | None,
    values: Mapping[str, object],
    where: Sequence[ColumnElement[bool]] = (),
) -> Action | None:
    """UPDATE the row only if it is still at ``version`` (and ``status``, and ``where``); else None.

    The version in the WHERE clause is what makes racing writers safe without holding locks across
    calls: whoever commits first moves the version, and every other UPDATE then matches no row.
    """
    conditions = [Action.id == action_id, Action.version == version, *where]
    if status is not None:
        conditions.append(Action.status == status.value)
    return session.execute(
        update(Action)
        .where(*conditions)
        .values(version=version + 1, updated_at=now, **values)
        .returning(Action)
    ).scalar_one_or_none()


def claim(session: Session, *, now: float, worker_id: str, lease_s: float) -> ActionRecord | None:
    """Lease the oldest ``confirmed`` action whose lease is empty or expired; None if there is none."""
    candidate = session.execute(
        select(Action.id, Action.version)
        .where(
            Action.status == JobStatus.CONFIRMED.value,
            or_(Action.lease_until.is_(None), Action.lease_until <= now),
        )
        .order_by(Action.created_at, Action.id)
        .limit(1)
        # PostgreSQL: lock the row and let other workers skip to the next job instead of queueing
        # behind this one and then losing the compare-and-set. SQLite ignores FOR UPDATE; its
        # BEGIN IMMEDIATE already makes claims one at a time.
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if candidate is None:
        return None
    row = compare_and_set(
        session,
        candidate.id,
        now=now,
        version=candidate.version,
        status=JobStatus.CONFIRMED,
        values={"lease_owner": worker_id, "lease_until": now + lease_s},
    )
    return None if row is None else action_record(row)


def status_and_version(session: Session, action_id: str) -> tuple[JobStatus, int]:
    """The action's current status and version.

    Raises:
        ActionError: ``ACTION_UNKNOWN``.
    """
    found = session.execute(select(Action.status, Action.version).where(Action.id == action_id)).one_or_none()
    if found is None:
        raise unknown(action_id)
    return JobStatus(found.status), found.version


def column_values(fields: Mapping[str, object]) -> dict[str, object]:
    """``fields`` as column values (enums as their stored strings).

    Raises:
        TypeError: a name is not in :class:`ActionFields` (a guard for callers mypy does not check).
        ValueError: ``effect_ceiling`` is not an :class:`EffectCeiling` value.
    """
    refused = sorted(set(fields) - ActionFields.__optional_keys__)
    if refused:
        raise TypeError(f"not a settable action field: {', '.join(refused)}")
    values = dict(fields)
    if values.get("effect_ceiling") is not None:
        values["effect_ceiling"] = EffectCeiling(str(values["effect_ceiling"])).value
    return values


def unknown(action_id: str) -> ActionError:
    """The ``ACTION_UNKNOWN`` error for ``action_id``."""
    return ActionError(f"no action {action_id}", code=ErrorCode.ACTION_UNKNOWN, action_id=action_id)


def stale(action_id: str, expected: int, found: int | None) -> StaleTransition:
    """The error of a compare-and-set that found ``found`` (None: unknown) instead of ``expected``."""
    return StaleTransition(
        f"action {action_id} changed since version {expected}",
        action_id=action_id,
        expected_version=expected,
        found_version=found,
    )
