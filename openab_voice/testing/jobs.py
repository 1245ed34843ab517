"""A confirmed job written straight into a store, as the bot writes one, for benches and tests."""

from __future__ import annotations

import uuid

from openab_voice.jobs import EffectCeiling, JobEvent
from openab_voice.store.jobs import JobStore
from openab_voice.store.records import NewAction

# The ids of the scripted guild, its text channel and its operator (Discord snowflakes).
GUILD_ID = 1_234_567_890_123_456_789
TEXT_CHANNEL_ID = 1_234_567_890_123_456_790
OPERATOR_ID = 111_222_333_444_555_666


def confirm_job(
    store: JobStore,
    *,
    goal: str,
    expires_at: float,
    guild_id: int = GUILD_ID,
    text_channel_id: int = TEXT_CHANNEL_ID,
    user_id: int = OPERATOR_ID,
    deliverer: str = "system",
) -> str:
    """A workspace-write job proposed by ``user_id``, delivered by ``deliverer``, confirmed by
    ``user_id``; its id."""
    record, _ = store.create(
        NewAction(
            id=f"a-{uuid.uuid4().hex[:10]}",
            goal=goal,
            effect_hint=EffectCeiling.WORKSPACE_WRITE,
            guild_id=guild_id,
            text_channel_id=text_channel_id,
            session_generation=1,
            proposed_by=user_id,
            expires_at=expires_at,
        )
    )
    store.apply(record.id, JobEvent.DELIVER, actor=deliverer)
    store.apply(
        record.id,
        JobEvent.CONFIRM,
        actor=str(user_id),
        confirmed_by=user_id,
        effect_ceiling=EffectCeiling.WORKSPACE_WRITE,
    )
    return record.id
