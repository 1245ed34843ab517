"""The job store's tables as SQLAlchemy 2 typed declarative models.

The Alembic migrations in ``migrations/versions`` must produce exactly this schema; a test compares
Alembic's autogenerate diff against these models on SQLite and PostgreSQL. Times are float seconds
since the Unix epoch from the injected clock (``Clock.wall``). Discord ids are ``BigInteger``: snowflakes
exceed 2**31. Enumerated columns hold the ``StrEnum`` values of :mod:`openab_voice.jobs` and
:class:`~openab_voice.store.records.WorkspaceState` as plain strings, so adding a value needs no DDL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Double, ForeignKey, Index, Integer, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so migrations can name what they alter or drop on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID_LENGTH = 64
CODE_LENGTH = 64
NAME_LENGTH = 200


class Base(DeclarativeBase):
    """Declarative base holding the store's metadata."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Action(Base):
    """One proposed action (job) and everything the store knows about it."""

    __tablename__ = "actions"
    __table_args__ = (
        # in_status() and claim_next() scan by status, oldest first.
        Index(None, "status", "created_at"),
        # recent() lists a guild's newest actions.
        Index(None, "guild_id", "created_at"),
        # The lease reaper and restart reconciliation scan running jobs by lease expiry.
        Index(None, "status", "lease_until"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(NAME_LENGTH), unique=True)
    status: Mapped[str] = mapped_column(String(CODE_LENGTH))
    goal: Mapped[str] = mapped_column(Text)
    effect_hint: Mapped[str] = mapped_column(String(CODE_LENGTH))
    effect_ceiling: Mapped[str | None] = mapped_column(String(CODE_LENGTH))
    guild_id: Mapped[int] = mapped_column(BigInteger)
    voice_channel_id: Mapped[int | None] = mapped_column(BigInteger)
    text_channel_id: Mapped[int] = mapped_column(BigInteger)
    session_generation: Mapped[int] = mapped_column(Integer)
    # The random id of the voice session that heard the request: durable across restarts, where the
    # generation counter starts again at 1.
    voice_session_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    proposed_by: Mapped[int] = mapped_column(BigInteger)
    proposal_message_id: Mapped[int | None] = mapped_column(BigInteger)
    confirmed_by: Mapped[int | None] = mapped_column(BigInteger)
    workspace_id: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    created_at: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)
    result_text: Mapped[str | None] = mapped_column(Text)
    stop_reason: Mapped[str | None] = mapped_column(String(CODE_LENGTH))
    error_code: Mapped[str | None] = mapped_column(String(CODE_LENGTH))
    detail: Mapped[str | None] = mapped_column(Text)
    delivery_outcome: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    # Who runs it (``<role>:<node>/<incarnation>``) and until when, renewed by its heartbeat. A job is
    # ``running`` on behalf of a live lease only; the reaper loses it once the lease has expired.
    lease_owner: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    lease_until: Mapped[float | None] = mapped_column(Double)


class ActionTransition(Base):
    """One status change of an action, written in the same transaction as the change itself."""

    __tablename__ = "action_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    action_id: Mapped[str] = mapped_column(ForeignKey("actions.id"), index=True)
    from_status: Mapped[str | None] = mapped_column(String(CODE_LENGTH))
    to_status: Mapped[str] = mapped_column(String(CODE_LENGTH))
    event: Mapped[str] = mapped_column(String(CODE_LENGTH))
    actor: Mapped[str] = mapped_column(String(NAME_LENGTH))
    reason: Mapped[str] = mapped_column(Text)
    at: Mapped[float] = mapped_column(Double)


class AuditEntry(Base):
    """An audited event; ``action_id`` is not a foreign key so refusals of unknown ids can be logged."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    action_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)
    kind: Mapped[str] = mapped_column(String(NAME_LENGTH), index=True)
    actor: Mapped[str] = mapped_column(String(NAME_LENGTH))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)
    at: Mapped[float] = mapped_column(Double)


class Workspace(Base):
    """A working directory that at most one running action may hold."""

    __tablename__ = "workspaces"

    id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(CODE_LENGTH))
    action_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    reason: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)


class IdempotencyKey(Base):
    """A client-supplied idempotency key and the action it created."""

    __tablename__ = "idempotency_keys"

    key: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    action_id: Mapped[str] = mapped_column(ForeignKey("actions.id"), index=True)
    created_at: Mapped[float] = mapped_column(Double)


class ExecutorWorker(Base):
    """A process that runs actions (the bot's in-process executor or an ``openab-voice executor``).

    Written at its start and by each heartbeat: ``openab-voice executor --health`` reads it, and
    operators see who holds which lease. The leases on ``actions`` decide; this row only reports.
    """

    __tablename__ = "executor_workers"

    id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    node: Mapped[str] = mapped_column(String(NAME_LENGTH), index=True)
    state: Mapped[str] = mapped_column(String(CODE_LENGTH))
    started_at: Mapped[float] = mapped_column(Double)
    heartbeat_at: Mapped[float] = mapped_column(Double)
    running: Mapped[int] = mapped_column(Integer)


class ToolCallRow(Base):
    """One tool call of the voice model, as the ToolRouter audited it (refused calls included).

    ``summary`` holds the sanitized arguments and result or reason, never a secret.
    """

    __tablename__ = "tool_calls"
    __table_args__ = (Index(None, "session_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Double)
    session_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    turn_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    call_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    tool: Mapped[str] = mapped_column(String(ID_LENGTH), index=True)
    risk: Mapped[str | None] = mapped_column(String(CODE_LENGTH))
    speaker_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    confirmation: Mapped[str] = mapped_column(String(CODE_LENGTH))
    outcome: Mapped[str] = mapped_column(String(CODE_LENGTH))
    duration_ms: Mapped[float] = mapped_column(Double)
    truncated: Mapped[bool] = mapped_column(Boolean)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)


class VoiceSessionRow(Base):
    """A recorded voice session (``OPENAB_TRANSCRIPT_STORE``): where and when, and who was there.

    ``audience`` lists the Discord user ids (strings) seen in the channel while it was recorded: only
    they may read its transcript.
    """

    __tablename__ = "voice_sessions"
    __table_args__ = (Index(None, "guild_id", "started_at"), Index(None, "started_at"))

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    guild_id: Mapped[int] = mapped_column(BigInteger)
    channel_id: Mapped[int] = mapped_column(BigInteger)
    channel_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    started_at: Mapped[float] = mapped_column(Double)
    ended_at: Mapped[float | None] = mapped_column(Double)
    audience: Mapped[list[str]] = mapped_column(JSON)


class TranscriptLine(Base):
    """One final of a speaker, or what the bot was heard saying, in a recorded voice session."""

    __tablename__ = "transcript_lines"
    __table_args__ = (Index(None, "session_id", "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("voice_sessions.id"))
    kind: Mapped[str] = mapped_column(String(CODE_LENGTH))
    speaker_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    speaker_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    text: Mapped[str] = mapped_column(Text)
    started_at: Mapped[float] = mapped_column(Double)
    ended_at: Mapped[float] = mapped_column(Double)


class MemoryRecordRow(Base):
    """A long-term memory record (``OPENAB_MEMORY_ENABLED``). Its vector lives in the memory's vector
    file under the same id; ``checksum`` covers the row's content, ``vector_sha`` its vector, so the
    consistency check at start finds a row or a vector changed behind the memory's back."""

    __tablename__ = "memory_records"
    __table_args__ = (Index(None, "guild_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    guild_id: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(CODE_LENGTH))
    text: Mapped[str] = mapped_column(Text)
    speaker_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    source: Mapped[str] = mapped_column(String(CODE_LENGTH))
    sensitivity: Mapped[str] = mapped_column(String(CODE_LENGTH))
    created_at: Mapped[float] = mapped_column(Double)
    checksum: Mapped[str] = mapped_column(String(ID_LENGTH))
    vector_sha: Mapped[str] = mapped_column(String(ID_LENGTH))
