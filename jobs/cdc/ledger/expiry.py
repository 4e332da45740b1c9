"""Keep the ledger's snapshot history short: the ingest job expires ledger snapshots older than the ledger's
``history.expire.max-snapshot-age-ms`` (24 hours unless changed with ``ALTER TABLE ... SET TBLPROPERTIES``).

Every ledger write is an Iceberg commit, and every commit rewrites the table's metadata file, which lists every
snapshot the table keeps (about 0.85 KB each). A pipeline of 20 tables on the hourly schedule commits to its ledger
60-70 times an hour (a claim, a staged and a committed mark per table, and the leases' renewals), so with the daily
maintenance's 168-hour retention its ledger kept about 12,000 snapshots: an 11 MB metadata file that every ledger
write writes again and every ledger read parses. Measured on this project's 2-core machine, a ledger read took
2.1–3.2× and a write 2.0–3.0× as long with a week's history as with a day's (``bench/ledger_history.py``), and a run
of 20 tables × 1,000 events 75–89 s instead of 39–41 s (``bench/ingest_bench.py --ledger-history 11760``).

The ledger's rows are the audit trail (they are never deleted); its snapshots serve only the validation of writes in
flight (``cdc.ledger.write``: a write validated from a snapshot that has been expired falls back to the row-level
statement, which is correct, only slower). So the job, after its tables, expires the ledger's snapshots older than
that age, together with the files only they reference, once at least ``EXPIRE_AT_LEAST`` of them would go: most runs
only look (a few Py4J calls, no Spark job). It never fails a run: an error is logged and the next run tries again.
"""

from __future__ import annotations

import bisect
import logging
import time
from typing import Any, Callable

from cdc.ledger.ledger import ledger_lock
from cdc.ledger.model import MAX_AGE_MS, MAX_AGE_PROPERTY

log = logging.getLogger("cdc.ledger")
MIN_KEEP_PROPERTY = "history.expire.min-snapshots-to-keep"  # Iceberg's; it keeps that many newest snapshots
# snapshots that would go before a run expires them (about 1.5 hours of a 20-table hourly pipeline)
EXPIRE_AT_LEAST = 100


def older_than(count: int, timestamp_at: Callable[[int], int], cutoff_ms: int) -> int:
    """How many of ``count`` entries, in ascending time order (``timestamp_at(i)``), are older than ``cutoff_ms``: a
    binary search, so a long history costs a few lookups; pure. The snapshot log is only roughly in time order: each
    entry carries its writer's clock, so with clock skew between hosts the count may be off by the few entries near
    the cutoff. It only decides whether to expire; which snapshots go is Iceberg's ``expireOlderThan``."""
    return bisect.bisect_left(range(count), True, key=lambda i: timestamp_at(i) >= cutoff_ms)


def expirable(count: int, due: int, min_keep: int) -> int:
    """How many of ``count`` snapshots, ``due`` of them older than the cutoff, Iceberg's expiry removes at most: it
    keeps the newest ``min_keep`` (``history.expire.min-snapshots-to-keep``) and always the current one; pure. The
    main branch only: other branches and tags may keep more (``expire_history`` asks Iceberg before it commits)."""
    return max(0, min(due, count - max(min_keep, 1)))


def expire_history(spark: Any, ledger: str, now_ms: int | None = None) -> int:
    """Expire the ledger's snapshots older than its maximum age once ``EXPIRE_AT_LEAST`` of them would go; how many
    snapshots went (0: nothing was done)."""
    from cdc.iceberg.tables import iceberg_table

    table = iceberg_table(spark, ledger)
    table.refresh()  # the catalog's table may predate other processes' ledger commits
    props = table.properties()
    max_age = int(props.getOrDefault(MAX_AGE_PROPERTY, str(MAX_AGE_MS)))
    min_keep = int(props.getOrDefault(MIN_KEEP_PROPERTY, "1"))
    cutoff = (time.time_ns() // 1_000_000 if now_ms is None else now_ms) - max_age
    history = table.history()  # the snapshot log, oldest first by each writer's clock (see older_than)
    count = history.size()
    due = older_than(count, lambda i: int(history.get(i).timestampMillis()), cutoff)
    if expirable(count, due, min_keep) < EXPIRE_AT_LEAST:
        return 0
    started = time.monotonic()
    with ledger_lock(ledger):  # one of the process's ledger commits (cdc.ledger.ledger.ledger_lock)
        expiry = table.expireSnapshots().expireOlderThan(cutoff)
        # What Iceberg removes (from the table's metadata, no file is read): fewer than ``expirable`` when branches
        # or tags keep some (their own retention), or when other processes committed meanwhile
        gone = expiry.apply().size()
        if gone < EXPIRE_AT_LEAST:
            return 0
        expiry.commit()
    log.info("ledger %s: expired %d snapshots older than %g hours (%s) in %.1f s", ledger, gone, max_age / 3.6e6,
             MAX_AGE_PROPERTY, time.monotonic() - started)
    return gone


def keep_history_short(spark: Any, ledger: str) -> None:
    """``expire_history``, whose failure (e.g. an unreachable file store) is logged, never raised: the run's batches
    are committed already, and the next run tries again."""
    try:
        expire_history(spark, ledger)
    except Exception as exc:  # noqa: BLE001 - housekeeping after the run's work
        log.warning("ledger %s: could not expire old snapshots (%s); the next run tries again", ledger,
                    str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
