"""The job store's schema: Alembic migrations, URL handling and connection failures, on both databases."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from pydantic import SecretStr
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from openab_voice.clock import FakeClock
from openab_voice.config import load_settings
from openab_voice.errors import StoreError
from openab_voice.store.database import (
    alembic_config,
    current_revision,
    default_url,
    ensure_schema,
    head_revision,
    open_engine,
    resolve_url,
    upgrade,
)
from openab_voice.store.jobs import JobStore
from openab_voice.store.models import Base

TABLES = {
    "actions",
    "action_transitions",
    "audit_log",
    "workspaces",
    "idempotency_keys",
    "executor_workers",
    "tool_calls",
    "voice_sessions",
    "transcript_lines",
    "memory_records",
}


def test_upgrade_reaches_head_and_is_idempotent(db_url: str) -> None:
    engine = open_engine(db_url)
    try:
        assert current_revision(engine) is None
        with pytest.raises(StoreError) as outdated:
            ensure_schema(engine)
        assert outdated.value.code == "STORE_SCHEMA_OUTDATED"

        assert upgrade(db_url) == head_revision() == "0006"
        assert upgrade(db_url) == "0006"  # a second run is a no-op
        assert current_revision(engine) == "0006"
        ensure_schema(engine)
        assert set(inspect(engine).get_table_names()) == TABLES | {"alembic_version"}
    finally:
        engine.dispose()


def test_migrations_produce_exactly_the_models(db_url: str) -> None:
    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": True}
            )
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_and_back(db_url: str) -> None:
    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        assert not TABLES & set(inspect(engine).get_table_names())
        assert upgrade(db_url) == "0006"
        ensure_schema(engine)
    finally:
        engine.dispose()


def test_sqlite_engine_settings(tmp_path: Path) -> None:
    url = default_url(tmp_path / "nested" / "data")
    assert url == f"sqlite:///{tmp_path}/nested/data/openab-voice.db"
    engine = open_engine(url)  # creates the missing parent directories
    try:
        with engine.connect() as connection:
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
        assert (tmp_path / "nested" / "data").is_dir()
    finally:
        engine.dispose()


def test_resolve_url_prefers_the_configured_database(tmp_path: Path) -> None:
    settings = load_settings({}, data_dir=tmp_path)
    assert resolve_url(settings) == default_url(tmp_path)
    configured = "postgresql+psycopg://bot:pw@db.example:5432/openab"
    assert resolve_url(settings.model_copy(update={"database_url": SecretStr(configured)})) == configured


def test_plain_postgresql_urls_use_psycopg() -> None:
    for scheme in ("postgresql", "postgres"):
        engine = open_engine(f"{scheme}://bot:pw@127.0.0.1:1/openab")
        assert engine.url.drivername == "postgresql+psycopg"
        engine.dispose()


def test_invalid_or_unsupported_urls_are_refused_without_echoing_them() -> None:
    for url in ("not a url with s3cret", "mysql://bot:s3cret@localhost/openab"):
        with pytest.raises(StoreError) as refused:
            open_engine(url)
        assert refused.value.code == "STORE_URL_INVALID"
        assert "s3cret" not in str(refused.value)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_postgresql_is_store_unavailable_without_the_password() -> None:
    url = f"postgresql+psycopg://openab:hunter2-very-secret@127.0.0.1:{_closed_port()}/openab"
    with pytest.raises(StoreError) as down:
        upgrade(url)
    _assert_unavailable_without(down.value, "hunter2-very-secret")

    engine = open_engine(url)
    try:
        with pytest.raises(StoreError) as down_later:
            JobStore(engine, FakeClock()).get("a-00000000")
        _assert_unavailable_without(down_later.value, "hunter2-very-secret")
    finally:
        engine.dispose()


def test_wrong_postgresql_password_is_store_unavailable_without_it(postgres_server_url: str) -> None:
    url = make_url(postgres_server_url).set(password="wrong-pw-do-not-log")
    with pytest.raises(StoreError) as refused:
        upgrade(url.render_as_string(hide_password=False))
    _assert_unavailable_without(refused.value, "wrong-pw-do-not-log")


def test_sqlite_directory_that_cannot_exist_is_store_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError) as down:
        upgrade(f"sqlite:///{blocker}/openab-voice.db")
    assert down.value.code == "STORE_UNAVAILABLE"


def _assert_unavailable_without(error: StoreError, secret: str) -> None:
    assert error.code == "STORE_UNAVAILABLE"
    assert error.retryable
    assert secret not in str(error)
    assert secret not in repr(error.to_dict())
    assert error.__cause__ is None
