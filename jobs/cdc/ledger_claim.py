"""How ``Ledger.claim`` writes a claim: the batch's rows, refused by Iceberg if another claim of the batch id
committed since the ledger snapshot the id was chosen from.

The write overwrites the batch's (pipeline, table, batch id) rows, of which there are none, with Iceberg's
serializable validation from that snapshot (``isolation-level``, ``validate-from-snapshot-id``): data or deletes
that may hold rows of the batch, committed since, fail the commit (``ValidationException``, which ``claim`` reads as
a conflict and answers by reading who won). One write, two Spark jobs; a MERGE did this before (five). A plain
append would commit without any check: two runs could both write their claim, both see both, and both withdraw.

Two cases cannot be validated that way, and then the claim is the MERGE after all (``merge_claim_sql``), whose
conflict check starts from the ledger as the MERGE reads it:

* the snapshot was expired meanwhile (Iceberg: "Cannot determine history");
* a data file holds rows of this table from another pipeline with overlapping batch ids, which only a compaction of
  the ledger (maintenance) writes, after a pipeline was renamed: an overwrite must delete whole files, so it
  refuses ("Cannot delete file where some, but not all, rows match filter").
"""

from __future__ import annotations

from typing import Any, Sequence

from cdc.sql import lit

# Iceberg's messages for a claim the overwrite cannot validate (not conflicts: no other claim is involved)
UNVALIDATABLE = ("Cannot determine history", "Cannot delete file where some, but not all, rows match filter")

_NULLS = ("CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), "
          "CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(NULL AS STRING), "
          "CAST(NULL AS STRING), CAST(NULL AS TIMESTAMP), CAST(NULL AS TIMESTAMP)")
_COLUMNS = ("pipeline, table_name, batch_id, mode, topic, `partition`, start_offset, end_offset, status, events_read, "
            "events_skipped, dead_letters, inserted, updated, deleted, target_snapshot_id, truncate_barrier, "
            "phase_seconds, staged_at, committed_at, run_id, owner, claimed_at, max_position, server_ids")


def claim_rows_sql(pipeline: str, table: str, batch_id: int, mode: str, ranges: Sequence[Any], run_id: str,
                   owner: str) -> str:
    """A query of the claim's ledger rows (one per range: ``topic``, ``partition``, ``start``, ``end``), pure."""
    values = ", ".join(
        f"({lit(pipeline)}, {lit(table)}, {int(batch_id)}, {lit(mode)}, {lit(r.topic)}, {int(r.partition)}, "
        f"{int(r.start)}, {int(r.end)}, 'claimed', {_NULLS}, {lit(run_id)}, {lit(owner)}, "
        "current_timestamp(), CAST(NULL AS STRING), CAST(NULL AS STRING))" for r in ranges)
    return f"SELECT * FROM (VALUES {values}) AS v({_COLUMNS})"


def this_batch_sql(pipeline: str, table: str, batch_id: int, alias: str = "") -> str:
    """The batch's rows, as literals (Iceberg builds its conflict filter from them), pure."""
    return (f"{alias}pipeline = {lit(pipeline)} AND {alias}table_name = {lit(table)} "
            f"AND {alias}batch_id = {int(batch_id)}")


def merge_claim_sql(ledger: str, pipeline: str, table: str, batch_id: int, rows_sql: str) -> str:
    """The claim as a row-level MERGE (its matched clause never fires) whose target rows are exactly the batch's: on
    the copy-on-write, serializable ledger a claim of the batch committed after the MERGE read the ledger fails it."""
    src = f"{rows_sql} WHERE NOT EXISTS (SELECT 1 FROM {ledger} WHERE {this_batch_sql(pipeline, table, batch_id)})"
    return (f"MERGE INTO {ledger} l USING ({src}) s ON {this_batch_sql(pipeline, table, batch_id, 'l.')} "
            "AND l.topic = s.topic AND l.`partition` = s.`partition` "
            "WHEN MATCHED AND l.status = 'never' THEN UPDATE SET l.status = l.status WHEN NOT MATCHED THEN INSERT *")


def write_claim(spark: Any, ledger: str, pipeline: str, table: str, batch_id: int, rows_sql: str,
                seen: int | None) -> None:
    """Write the claim rows, validated from ledger snapshot ``seen`` (None: the ledger had none, so every commit
    since its creation is checked); the MERGE when that cannot be validated. Conflicts are raised."""
    from pyspark.sql import functions as F

    writer = spark.sql(rows_sql).writeTo(ledger).option("isolation-level", "serializable")
    if seen is not None:
        writer = writer.option("validate-from-snapshot-id", str(int(seen)))
    try:
        writer.overwrite((F.col("pipeline") == pipeline) & (F.col("table_name") == table)
                         & (F.col("batch_id") == int(batch_id)))
    except Exception as exc:
        if not any(m in str(exc) for m in UNVALIDATABLE):
            raise
        spark.sql(merge_claim_sql(ledger, pipeline, table, batch_id, rows_sql))
