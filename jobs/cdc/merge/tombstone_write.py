"""A small batch's tombstones (hard deletes) written through Iceberg's API: one row delta, no MERGE.

``cdc.merge.sql.merge_tombstones_sql`` remembers each delete of a batch as its key's tombstone: a MERGE (a query plan,
four Spark jobs, about 0.3 s per table and batch on a warm 2-core driver, a quarter of a small batch's merge phase).
For a batch the driver could read (``batch.driver_read_max_records``) the classification already joined every
changed key with its tombstone; with ``MergeSpec.locate_tombstones`` it also names where that tombstone is
(Iceberg's ``_file`` and ``_pos``). The new tombstones are then the classified ``delete``/``tombstone`` rows (each
newer than the tombstone it replaces, else the classification would have said ``skip``), and the old ones are
those locations: ``cdc.iceberg.row_commit.replace_rows`` writes the rows and a position delete file and commits both as
one row delta, validated from the tombstones snapshot the classification read. Any commit to the tombstones since
then (another run, maintenance) fails the validation, and the batch's tombstones go through the MERGE after all,
which re-checks every position against the table as it is (the fencing of ``cdc.merge``): the table ends the same
either way, as after an interrupted and repeated write.

Only where the result is exactly the MERGE's: hard deletes, no primary-key moves (their tombstones carry the old
row, ``__moved``), key columns of integer or string type (Iceberg's JSON values), a tombstones table with no other
columns than those written here.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

import pyarrow as pa

from cdc.iceberg.failures import is_commit_conflict
from cdc.iceberg.row_commit import now_us, replace_rows
from cdc.iceberg.tables import iceberg_table
from cdc.merge.sql import MergeSpec
from cdc.schema.columns import (
    DELETED_AT,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    OFFSET,
    PARTITION,
    TOMBSTONE_FILE,
    TOMBSTONE_POS,
    Column,
)
from cdc.spark.py4j_classes import iceberg_class

log = logging.getLogger("cdc.tombstones")
GONE = ("delete", "tombstone")  # the classified actions that leave a tombstone


def simple_key(key_columns: Sequence[Column]) -> bool:
    """Key columns whose values go to Iceberg as JSON as they come from Spark: signed integers, strings (pure)."""
    return bool(key_columns) and all(
        pa.types.is_signed_integer(c.arrow_type) or pa.types.is_string(c.arrow_type)
        or pa.types.is_large_string(c.arrow_type)
        for c in key_columns)


def tombstone_rows(spec: MergeSpec, classified: Sequence[Mapping[str, Any]], deleted_at_us: int
                   ) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    """The tombstone rows of the classified ``delete``/``tombstone`` rows and the locations (file, position) of the
    tombstones they replace; pure."""
    rows, replaced = [], []
    for c in classified:
        row = {k: c[k] for k in spec.key}
        row.update({o: c[o] for o in spec.ordering})
        row.update({KAFKA_PARTITION: c[PARTITION], KAFKA_OFFSET: c[OFFSET], DELETED_AT: deleted_at_us})
        rows.append(row)
        if c[TOMBSTONE_FILE] is not None:
            replaced.append((c[TOMBSTONE_FILE], int(c[TOMBSTONE_POS])))
    return rows, replaced


def located_columns(spec: MergeSpec) -> tuple[str, ...]:
    """The classified columns ``write_tombstones`` takes of each ``delete``/``tombstone`` row (``tombstone_rows``)."""
    return (*spec.key, *spec.ordering, PARTITION, OFFSET, TOMBSTONE_FILE, TOMBSTONE_POS)


def write_tombstones(spark: Any, spec: MergeSpec, gone: Sequence[Mapping[str, Any]], since: int | None) -> bool:
    """Commit the batch's tombstones as one row delta validated from snapshot ``since`` of the tombstones (the one
    the classification read); ``gone``: the classified ``delete``/``tombstone`` rows (``located_columns``, collected
    by the caller with the action counts). False when Iceberg refuses it (a commit since) or the tombstones table has
    other columns than this writes, and nothing was written: the caller runs ``merge_tombstones_sql`` instead."""

    assert spec.tombstones and spec.locate_tombstones, "only for hard deletes with located tombstones"
    wanted = (*spec.key, *spec.ordering, KAFKA_PARTITION, KAFKA_OFFSET, DELETED_AT)
    schema = iceberg_table(spark, spec.tombstones).schema()
    parser = iceberg_class(spark, "SchemaParser")
    has = [f["name"] for f in json.loads(parser.toJson(schema))["fields"]]
    if set(has) - set(wanted):
        return False
    if not gone:
        return True
    rows, replaced = tombstone_rows(spec, gone, now_us())
    try:
        replace_rows(spark, spec.tombstones, rows, replaced, since)
    except Exception as exc:  # noqa: BLE001 - a refused commit is answered by the MERGE; anything else is raised
        if not is_commit_conflict(exc):
            raise
        log.info("table %s: tombstones changed since the classification; writing this batch's by MERGE",
                 spec.target)
        return False
    return True
