"""Opening the job store's database and migrating it with Alembic, driven from code (no alembic.ini).

SQLite (the embedded default) gets WAL, foreign keys, a busy timeout and ``BEGIN IMMEDIATE``
transactions; PostgreSQL (the scale-out store) goes through psycopg 3. Connection failures become
``StoreError(code="STORE_UNAVAILABLE")`` whose message shows the URL with its password hidden.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError

import migrations
from openab_voice.errors import ErrorCode, StoreError

if TYPE_CHECKING:
    from openab_voice.config import Settings

DB_FILENAME = "openab-voice.db"
MIGRATIONS_DIR = Path(migrations.__path__[0])
# How long a SQLite writer waits for another one before giving up with "database is locked".
SQLITE_BUSY_TIMEOUT_S = 30.0
POSTGRES_CONNECT_TIMEOUT_S = 10
# Key of the PostgreSQL advisory lock held while migrating: "openab" in ASCII, unlikely to collide.
_MIGRATION_LOCK_KEY = 0x6F70656E6162
_POSTGRES_ALIASES = frozenset({"postgres", "postgresql"})


def default_url(data_dir: Path) -> str:
    """The embedded store: SQLite file ``<data_dir>/openab-voice.db``."""
    path = (data_dir.expanduser() / DB_FILENAME).absolute()
    return URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def resolve_url(settings: Settings) -> str:
    """``OPENAB_DATABASE_URL`` if set, else the SQLite default in ``OPENAB_DATA_DIR``."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return default_url(settings.data_dir)


def open_engine(url: str) -> Engine:
    """An engine for ``url`` (``sqlite:///...`` or ``postgresql[+psycopg]://...``); does not connect yet.

    Raises:
        StoreError: ``STORE_URL_INVALID`` for an unparsable or unsupported URL, ``STORE_DRIVER_MISSING``
            when psycopg is not installed, ``STORE_UNAVAILABLE`` when the SQLite directory cannot be made.
    """
    parsed = _parse(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    try:
        return create_engine(
            parsed,
            # A pooled connection may have been cut (server restart, idle timeout): test it on checkout.
            pool_pre_ping=True,
            connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S},
        )
    except ImportError:
        raise StoreError(
            "PostgreSQL needs psycopg: pip install 'openab-voice[postgres]'",
            code=ErrorCode.STORE_DRIVER_MISSING,
        ) from None


def upgrade(url: str) -> str:
    """Migrate the database at ``url`` to the newest schema and return that (head) revision.

    Raises:
        StoreError: ``STORE_UNAVAILABLE`` when the database cannot be reached, or as :func:`open_engine`.
    """
    engine = open_engine(url)
    try:
        with translate_errors(engine.url), engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Replicas starting together would both create the tables; the second waits here, then
                # finds the schema at head. Released when this transaction ends.
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
            # Inside this transaction: DDL is transactional on both backends, so a failed migration
            # leaves nothing behind.
            command.upgrade(alembic_config(connection), "head")
    finally:
        engine.dispose()
    return head_revision()


def alembic_config(connection: Connection) -> Config:
    """Alembic configuration whose ``migrations/env.py`` runs on ``connection`` (no alembic.ini, no URL).

    For Alembic commands beyond :func:`upgrade`, e.g. ``command.revision(alembic_config(connection),
    message=..., autogenerate=True)`` against a database at head after a change to the models.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration revision shipped with this version."""
    (head,) = ScriptDirectory(str(MIGRATIONS_DIR)).get_heads()
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None before the first migration.

    Raises:
        StoreError: ``STORE_UNAVAILABLE`` when the database cannot be reached.
    """
    with translate_errors(engine.url), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def ensure_schema(engine: Engine) -> None:
    """Check that the database is at the head revision.

    Raises:
        StoreError: ``STORE_SCHEMA_OUTDATED`` when it is not (run ``openab-voice db upgrade``),
            ``STORE_UNAVAILABLE`` when it cannot be reached.
    """
    current, head = current_revision(engine), head_revision()
    if current != head:
        raise StoreError(
            f"the job store schema is at {current or 'no revision'}, this version needs {head}: "
            "run `openab-voice db upgrade`",
            code=ErrorCode.STORE_SCHEMA_OUTDATED,
            current=current,
            head=head,
        )


@contextmanager
def translate_errors(url: URL) -> Iterator[None]:
    """Turn a refused, lost or locked connection into ``StoreError(code="STORE_UNAVAILABLE")``.

    The driver's exception is not chained: the message is rebuilt from the password-less URL and the
    first line of the driver's text, so no secret reaches logs or users.
    """
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        raise _unavailable(url, exc) from None


def _unavailable(url: URL, exc: DBAPIError) -> StoreError:
    safe_url = url.render_as_string(hide_password=True)
    reason = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
    if url.password:
        reason = reason.replace(str(url.password), "***")
    return StoreError(f"cannot use the job store at {safe_url}: {reason}", code=ErrorCode.STORE_UNAVAILABLE)


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        # The URL itself is not shown: it may hold a password.
        raise StoreError(
            "the database URL is not a valid SQLAlchemy URL", code=ErrorCode.STORE_URL_INVALID
        ) from None
    if parsed.drivername in _POSTGRES_ALIASES:
        # psycopg 3 is the driver we ship (the `postgres` extra); SQLAlchemy would pick psycopg2.
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database {parsed.get_backend_name()!r}: use sqlite or postgresql",
            code=ErrorCode.STORE_URL_INVALID,
        )
    return parsed


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        try:
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the directory of {database}: {exc.strerror}", code=ErrorCode.STORE_UNAVAILABLE
            ) from None
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S})
    event.listen(engine, "connect", _sqlite_connected)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def _sqlite_connected(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control away from the sqlite3 module: its legacy mode emits no BEGIN before
    # SELECT or DDL. _sqlite_begin emits our own (SQLAlchemy's documented recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        # WAL: readers do not block the writer, nor it them.
        cursor.execute("PRAGMA journal_mode=WAL")
        # Off by default in SQLite; transitions and idempotency keys reference their action.
        cursor.execute("PRAGMA foreign_keys=ON")
        # A transition must be on disk before its effect happens (write-ahead), even on power loss.
        cursor.execute("PRAGMA synchronous=FULL")
    finally:
        cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    # IMMEDIATE takes the write lock up front. A deferred transaction that reads and then writes must
    # upgrade its lock, and in WAL mode that fails at once with SQLITE_BUSY (the busy timeout does not
    # apply) when another writer got in between; an immediate one just queues on the busy timeout.
    connection.exec_driver_sql("BEGIN IMMEDIATE")
