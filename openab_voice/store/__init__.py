"""The durable job store: SQLAlchemy models (:mod:`.models`), the engine and its Alembic migrations
(:mod:`.database`), and the repository :class:`~openab_voice.store.jobs.JobStore`, which applies job
transitions as compare-and-set updates written before their effects. Callers get the frozen records of
:mod:`.records`, never ORM objects; the ``*_rows`` modules work inside the repository's transactions.
"""
