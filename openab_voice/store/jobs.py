"""The job repository: actions, their transitions, workspaces, leases and the audit log.

Every status change is a compare-and-set UPDATE (``WHERE id = ? AND status = ? AND version = ?``)
committed together with its transition row *before* the caller performs the effect (write-ahead). A
running job holds a lease its executor renews; if the executor dies, the lease expires and the reaper
(or restart reconciliation of the same process) marks the job ``outcome_unknown`` instead of running
it twice. Of two racing writers only one UPDATE matches; the
other raises :class:`~openab_voice.errors.StaleTransition` with nothing written.

:class:`JobStore` is synchronous and thread-safe (one engine, one short transaction per call); async
callers use ``asyncio.to_thread``. Its reads are :mod:`~openab_voice.store.job_queries`', its writes
:mod:`~openab_voice.store.job_transitions`', its leases :mod:`~openab_voice.store.job_leases`'; each
builds on the one before.
"""

from __future__ import annotations

from openab_voice.store.job_leases import JobLeases


class JobStore(JobLeases):
    """Durable actions with compare-and-set transitions, on SQLite or PostgreSQL.

    Args:
        engine: From :func:`openab_voice.store.database.open_engine`, migrated to head.
        clock: Source of every timestamp (``wall``) the store writes.
    """
