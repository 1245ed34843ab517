"""Fixtures shared by every test directory: the job store's databases.

``db_url`` runs a test on SQLite (a file in ``tmp_path``) and on PostgreSQL, each time in a fresh,
empty database (on PostgreSQL: a fresh schema). PostgreSQL is ``TEST_POSTGRES_URL`` (a
SQLAlchemy URL of a role that may create schemas; ``.ci/run`` sets it), or else one throwaway cluster
per test session started with ``scripts/pg-test-cluster.sh``. Without PostgreSQL installed the
postgresql tests fail, never skip.

``tests/ast_race.py`` (loaded as a plugin below) keeps CPython 3.11's shared AST depth from breaking
pytest's own parses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from openab_voice.clock import FakeClock

if TYPE_CHECKING:
    from openab_voice.store.jobs import JobStore
    from openab_voice.store.records import NewAction

pytest_plugins = ["tests.ast_race", "tests.exit_watchdog"]

POSTGRES_URL_ENV = "TEST_POSTGRES_URL"
CLUSTER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pg-test-cluster.sh"
_NO_SERVER_STATUS = 3  # pg-test-cluster.sh: no PostgreSQL binaries


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """URL of a PostgreSQL database on the test server, as a role that may create schemas in it."""
    configured = os.environ.get(POSTGRES_URL_ENV)
    if configured:
        yield configured
        return
    # Not under tmp_path: as root the cluster runs as `postgres`, which cannot enter pytest's 0700 dirs.
    directory = tempfile.mkdtemp(prefix="openab-test-pg-")
    started = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), "start", directory], capture_output=True, text=True, timeout=180
    )
    if started.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        if started.returncode == _NO_SERVER_STATUS:
            pytest.fail(
                f"PostgreSQL is not installed: run scripts/setup.sh (it installs the `postgresql` package) "
                f"or set {POSTGRES_URL_ENV}",
                pytrace=False,
            )
        pytest.fail(f"cannot start the PostgreSQL test cluster:\n{started.stderr}", pytrace=False)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop", directory], check=False, timeout=60)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database: a SQLite file, then a new PostgreSQL schema.

    On PostgreSQL each test gets its own schema, made the connection's ``search_path`` through the
    URL: CREATE SCHEMA takes milliseconds where CREATE DATABASE takes a quarter of a second.
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    server = make_url(request.getfixturevalue("postgres_server_url"))
    if server.drivername in ("postgres", "postgresql"):
        server = server.set(drivername="postgresql+psycopg")  # the driver we ship, not psycopg2
    schema = f"openab_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield server.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False
        )
        with admin.connect() as connection:
            # Fail the teardown rather than hang if a test left a transaction holding locks in it.
            connection.execute(text("SET lock_timeout = '10s'"))
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@pytest.fixture
def store_clock() -> FakeClock:
    """The clock of ``job_store``: advance it to move time for the store."""
    return FakeClock()


@pytest.fixture
def job_store(db_url: str, store_clock: FakeClock) -> Iterator[JobStore]:
    """A :class:`JobStore` on a fresh database migrated to head (each backend of ``db_url``)."""
    # Imported here so test sessions that never touch the store do not import Alembic.
    from openab_voice.store.database import open_engine, upgrade
    from openab_voice.store.jobs import JobStore

    upgrade(db_url)
    engine = open_engine(db_url)
    try:
        yield JobStore(engine, store_clock)
    finally:
        engine.dispose()


@pytest.fixture
def make_proposal(store_clock: FakeClock) -> Callable[..., NewAction]:
    """A factory of :class:`NewAction` with a fresh id and valid defaults; keywords override fields."""
    from openab_voice.jobs import EffectCeiling
    from openab_voice.store.records import NewAction

    def make(**overrides: Any) -> NewAction:
        fields: dict[str, Any] = {
            "id": f"a-{uuid.uuid4().hex[:8]}",
            "goal": "run the unit tests and report failures",
            "effect_hint": EffectCeiling.READ_ONLY,
            "guild_id": 1_234_567_890_123_456_789,  # Discord snowflakes exceed 2**31
            "text_channel_id": 1_234_567_890_123_456_790,
            "voice_channel_id": 1_234_567_890_123_456_791,
            "session_generation": 1,
            "proposed_by": 987_654_321_098_765_432,
            "expires_at": store_clock.wall() + 300.0,
        }
        fields.update(overrides)
        return NewAction(**fields)

    return make
