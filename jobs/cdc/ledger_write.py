"""How ``cdc.ledger`` writes a batch's rows: whole rows, by an overwrite of the batch's (pipeline, table, batch id)
rows that Iceberg validates as serializable from a ledger snapshot (``isolation-level``, ``validate-from-snapshot-id``):
data or deletes that may hold rows of the batch, committed since that snapshot, fail the commit
(``ValidationException``, which the ledger reads as a conflict and answers by reading who owns the batch). One write,
one Spark job, always the same (already warm) write path.

* **The claim** (``claim_rows``): of those rows there are none. The validation starts at the snapshot the batch id
  was chosen from (``TableState.snapshot_id``): of two runs claiming one batch id, the second to commit gets a
  conflict and writes nothing. A MERGE did this before (five jobs). A plain append would commit without any check:
  two runs could both write their claim, both see both, and both withdraw. A claim that committed this way from the
  state its run planned from (no pending batch) is not read back (``Ledger.claim``'s ``planned``); its snapshot,
  found by its ``cdc.ledger-write``, is the one the staged mark is validated from.
* **The staged and committed marks** (``Held``, ``held_rows``): the rows this run claimed, written again with their
  new status. The validation starts at ``Held.since``, the snapshot from which this run knows nobody else wrote them
  (after the claim, its own commit or the snapshot its ownership check read; after a mark, that mark's own commit,
  found by its ``cdc.ledger-write`` summary property). A take-over since then fails the commit. So does the run's
  own lease renewal, and then the ledger finds the batch still its own and writes the mark as the row-level UPDATE.
  Before, each mark was that UPDATE (four jobs and a row-level plan), and the commit read the owners first.

Some writes cannot be validated that way (``UNVALIDATABLE``). Then the claim is a MERGE (``merge_claim_sql``) and a
mark the UPDATE:

* the snapshot was expired meanwhile (Iceberg: "Cannot determine history");
* a data file holds the batch's rows together with rows that do not match (an overwrite deletes whole files, so it
  refuses: "Cannot delete file where some, but not all, rows match filter"). Only a compaction of the ledger
  (maintenance) writes such files, e.g. mixing a renamed pipeline's rows of the same batch ids. Iceberg tells that
  a file holds only the batch's rows from its column bounds, so the ledger keeps the ``pipeline`` column's bounds
  whole (``LEDGER_SETTINGS``; by default strings are cut to 16 characters).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cdc.ledger_model import LEDGER_COLUMNS
from cdc.sql import lit, q

# Iceberg's messages for a write the overwrite cannot validate (not conflicts: no other run is involved)
UNVALIDATABLE = ("Cannot determine history", "Cannot delete file where some, but not all, rows match filter")
WRITE_ID = "cdc.ledger-write"  # snapshot summary property: the write a snapshot committed (``snapshot_of_write``)


@dataclass(frozen=True)
class Held:
    """A batch this run claimed, as its ledger rows hold it, and ``since``: the ledger snapshot from which no other
    run has written them (the next mark is validated from there)."""

    batch_id: int
    mode: str
    ranges: tuple[Any, ...]  # cdc.ledger.LedgerRange, with their counts once staged
    since: int
    barrier: tuple[int, ...] | None = None
    staged_at_us: int | None = None  # epoch microseconds; also the claim's renewal (claimed_at) by the staged mark


def rows_sql(rows: Sequence[Mapping[str, str]], table_columns: Sequence[str] = ()) -> str:
    """A query of ledger rows, each given as SQL expressions by column name (a missing column is NULL), with the
    columns ``column_names`` lists; pure. Writes name the columns (an overwrite matches them by name, the INSERT lists
    them, ``columns_sql``), so the ledger's own column order does not matter."""
    types = dict(LEDGER_COLUMNS)
    names = column_names(table_columns)
    values = ", ".join("(" + ", ".join(r.get(n, f"CAST(NULL AS {types[n].upper()})" if n in types else "NULL")
                                       for n in names) + ")" for r in rows)
    return f"SELECT * FROM (VALUES {values}) AS v({columns_sql(table_columns)})"


def column_names(table_columns: Sequence[str] = ()) -> list[str]:
    """This version's ledger columns (``LEDGER_COLUMNS``), then any other of ``table_columns`` (the ledger's, as the
    session sees it: a newer version may have added one, which this version's rows leave NULL); pure."""
    known = [n for n, _ in LEDGER_COLUMNS]
    return known + [c for c in table_columns if c not in known]


def columns_sql(table_columns: Sequence[str] = ()) -> str:
    """``column_names`` as a SQL column list; pure."""
    return ", ".join(q(n) for n in column_names(table_columns))


def claim_rows(pipeline: str, table: str, batch_id: int, mode: str, ranges: Sequence[Any], run_id: str,
               owner: str) -> list[dict[str, str]]:
    """The claim's ledger rows, one per range (``topic``, ``partition``, ``start``, ``end``); pure."""
    return [{"pipeline": lit(pipeline), "table_name": lit(table), "batch_id": f"{int(batch_id)}L", "mode": lit(mode),
             "topic": lit(r.topic), "partition": str(int(r.partition)), "start_offset": f"{int(r.start)}L",
             "end_offset": f"{int(r.end)}L", "status": "'claimed'", "run_id": lit(run_id), "owner": lit(owner),
             "claimed_at": "current_timestamp()"} for r in ranges]


def held_rows(pipeline: str, table: str, held: Held, run_id: str, owner: str,
              committed: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """A held batch's rows once staged (its ranges' counts, barrier and ``staged_at_us``), and once committed when
    ``committed`` gives the commit's columns as SQL; pure."""
    def json_or_null(v: Sequence[Any] | None) -> str:  # as the UPDATE writes them: an empty list stays a list
        return "CAST(NULL AS STRING)" if v is None else lit(json.dumps(list(v)))

    if held.staged_at_us is None:
        raise ValueError(f"batch {held.batch_id}: its rows are rewritten only once it is staged")
    at = f"timestamp_micros({int(held.staged_at_us)})"
    return [{**claimed, "status": "'staged'", "events_read": f"{int(r.events_read)}L",
             "events_skipped": f"{int(r.events_skipped)}L", "dead_letters": f"{int(r.dead_letters)}L",
             "truncate_barrier": json_or_null(held.barrier or None), "max_position": json_or_null(r.max_position),
             "server_ids": json_or_null(r.server_ids), "staged_at": at, "claimed_at": at, **(committed or {})}
            for r, claimed in zip(held.ranges, claim_rows(pipeline, table, held.batch_id, held.mode, held.ranges,
                                                           run_id, owner))]


def this_batch_sql(pipeline: str, table: str, batch_id: int, alias: str = "") -> str:
    """The batch's rows, as literals (Iceberg builds its conflict filter from them), pure."""
    return (f"{alias}pipeline = {lit(pipeline)} AND {alias}table_name = {lit(table)} "
            f"AND {alias}batch_id = {int(batch_id)}")


def merge_claim_sql(ledger: str, pipeline: str, table: str, batch_id: int, rows: str) -> str:
    """The claim as a row-level MERGE (its matched clause never fires) whose target rows are exactly the batch's: on
    the copy-on-write, serializable ledger a claim of the batch committed after the MERGE read the ledger fails it."""
    src = f"{rows} WHERE NOT EXISTS (SELECT 1 FROM {ledger} WHERE {this_batch_sql(pipeline, table, batch_id)})"
    return (f"MERGE INTO {ledger} l USING ({src}) s ON {this_batch_sql(pipeline, table, batch_id, 'l.')} "
            "AND l.topic = s.topic AND l.`partition` = s.`partition` "
            "WHEN MATCHED AND l.status = 'never' THEN UPDATE SET l.status = l.status WHEN NOT MATCHED THEN INSERT *")


def overwrite_batch(spark: Any, ledger: str, pipeline: str, table: str, batch_id: int, rows: str, since: int | None,
                    write_id: str | None = None) -> None:
    """Replace the batch's rows by the query ``rows``, validated from ledger snapshot ``since`` (None: the ledger had
    none, so every commit since its creation is checked); ``write_id`` goes into the snapshot's summary. Raises what
    Iceberg raises: a conflict, or one of ``UNVALIDATABLE``."""
    from pyspark.sql import functions as F

    # One task writes the few rows, all of one table_name partition: one file and one Spark job (Iceberg would
    # otherwise shuffle them by partition first: two jobs, and a file per task)
    writer = spark.sql(rows).coalesce(1).writeTo(ledger).option("isolation-level", "serializable") \
        .option("distribution-mode", "none")
    if since is not None:
        writer = writer.option("validate-from-snapshot-id", str(int(since)))
    if write_id is not None:
        writer = writer.option(f"snapshot-property.{WRITE_ID}", write_id)
    writer.overwrite(F.expr(this_batch_sql(pipeline, table, batch_id)))


def write_claim(spark: Any, ledger: str, pipeline: str, table: str, batch_id: int, rows: str,
                seen: int | None, write_id: str | None = None) -> bool:
    """Write the claim rows, validated from ledger snapshot ``seen`` (``write_id`` into the snapshot's summary);
    the MERGE when that cannot be validated. Whether the validated write committed (False: the MERGE did).
    Conflicts are raised."""
    try:
        overwrite_batch(spark, ledger, pipeline, table, batch_id, rows, seen, write_id)
        return True
    except Exception as exc:
        if not any(m in str(exc) for m in UNVALIDATABLE):
            raise
        spark.sql(merge_claim_sql(ledger, pipeline, table, batch_id, rows))
        return False


def snapshot_of_write(spark: Any, ledger: str, write_id: str, depth: int = 1000) -> int | None:
    """The ledger snapshot that committed ``write_id`` (None: not among the newest ``depth``), walking back from the
    current snapshot of the table the session's catalog holds (Py4J, no Spark job). Other tables' ledger writes may
    have committed after it, so the current snapshot is not enough: a mark validated from a later snapshot would
    miss a take-over committed in between."""
    from cdc.tables import iceberg_table

    table = iceberg_table(spark, ledger)
    snap = table.currentSnapshot()
    for _ in range(depth):
        if snap is None:
            return None
        if snap.summary().get(WRITE_ID) == write_id:
            return int(snap.snapshotId())
        parent = snap.parentId()
        snap = None if parent is None else table.snapshot(parent)
    return None
