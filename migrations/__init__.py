"""Alembic migrations of the job store, applied by :func:`openab_voice.store.database.upgrade`
(``openab-voice db upgrade``). There is no alembic.ini: ``env.py`` migrates the connection it is given
(see :func:`openab_voice.store.database.alembic_config`).

A change to ``openab_voice/store/models.py`` needs a new revision here: autogenerate it against a
database at head, then review it. ``tests/unit/test_store_schema.py`` fails while the migrations and
the models differ, on SQLite and on PostgreSQL.
"""
