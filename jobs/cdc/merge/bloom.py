"""Spark's runtime bloom filter for a large target's MERGE: the target's scan keeps only the batch's keys.

Iceberg runs a merge-on-read MERGE as an outer join of the target with the changes and never broadcasts the target,
so every target row (key, positions, ``_file``, ``_pos``) is shuffled: at 50M rows that join is the whole merge
(issue 16, target 4). Spark's ``InjectRuntimeFilter`` can put a bloom filter of the changes' keys on the target's
scan, below that shuffle, but with its defaults it never does here: it wants a target scan of 10 GB, a batch side
it estimates at 10 MB or less, and it skips a join it expects to broadcast, which it expects for any batch under
``spark.sql.autoBroadcastJoinThreshold``, though the MERGE's outer join could only broadcast the target.
``bloom_filtered`` plans the statements inside it with those gates open (``MERGE_CONF``); the size gate is ours
(``batch.bloom_filter_min_target_rows``, measured on the target's current snapshot,
``cdc.iceberg.tables.current_snapshot``). The rows are the same with or without it: the filter only drops target rows
whose key is not in the batch, which the join drops anyway.

The settings belong to the session, and they are this table's alone: tables that run at once each have their own
session (``cdc.run.group.table_session``).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["MERGE_CONF", "bloom_filtered"]

MERGE_CONF = {
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
    "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "1b",  # our gate decides
    # The batch's side is its checkpointed classification, whose size Spark estimates from the joins that made it
    # (petabytes at 10M target rows); its real size is the batch's, and the filter costs one pass over it.
    "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold": f"{2**63 - 1}b",
    "spark.sql.autoBroadcastJoinThreshold": "-1",  # the MERGE's join is a shuffle join: say so
}


@contextmanager
def bloom_filtered(spark: Any, on: bool) -> Iterator[None]:
    """Statements run inside (with ``on``) are planned with ``MERGE_CONF``; the session's settings come back after."""
    if not on:
        yield
        return
    before = {k: spark.conf.get(k, None) for k in MERGE_CONF}
    for k, v in MERGE_CONF.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
