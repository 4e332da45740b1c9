"""How ``cdc.ledger`` writes a batch's rows: whole rows, by an overwrite of the batch's (pipeline, table, batch id)
rows that Iceberg validates as serializable from a ledger snapshot (``isolation-level``, ``validate-from-snapshot-id``):
data or deletes that may hold rows of the batch, committed since that snapshot, fail the commit
(``ValidationException``, which the ledger reads as a conflict and answers by reading who owns the batch). One write
is one Iceberg commit of one small data file, made through Iceberg's API (``cdc.iceberg.row_commit``): no Spark statement,
no Spark job (as a Spark write, each cost a query plan and a job besides the commit: three per table and batch).

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

from cdc.common.sql import lit, q
from cdc.ledger.model import LEDGER_COLUMNS

# Iceberg's messages for a write the overwrite cannot validate (not conflicts: no other run is involved)
UNVALIDATABLE = ("Cannot determine history", "Cannot delete file where some, but not all, rows match filter")
WRITE_ID = "cdc.ledger-write"  # snapshot summary property: the write a snapshot committed (``snapshot_of_write``)
_TYPES = dict(LEDGER_COLUMNS)


@dataclass(frozen=True)
class Held:
    """A batch this run claimed, as its ledger rows hold it, and ``since``: the ledger snapshot from which no other
    run has written them (the next mark is validated from there)."""

    batch_id: int
    mode: str
    ranges: tuple[Any, ...]  # cdc.ledger.ledger.LedgerRange, with their counts once staged
    since: int
    barrier: tuple[int, ...] | None = None
    staged_at_us: int | None = None  # epoch microseconds; also the claim's renewal (claimed_at) by the staged mark


def sql_value(column: str, value: Any) -> str:
    """A ledger row's value as a SQL literal of its column's type (``LEDGER_COLUMNS``; timestamps are epoch
    microseconds; a column this version does not know takes only NULL); pure."""
    kind = _TYPES.get(column)
    if value is None:
        return f"CAST(NULL AS {kind.upper()})" if kind else "NULL"
    if kind == "timestamp":
        return f"timestamp_micros({int(value)})"
    if kind == "bigint":
        return f"{int(value)}L"
    if kind == "int":
        return str(int(value))
    return lit(value)


def rows_sql(rows: Sequence[Mapping[str, Any]], table_columns: Sequence[str] = ()) -> str:
    """A query of ledger rows (column → value; a missing column is NULL, ``sql_value``) with the columns
    ``column_names`` lists; pure. Writes name the columns (the INSERT lists them, ``columns_sql``), so the ledger's
    own column order does not matter."""
    names = column_names(table_columns)
    values = ", ".join("(" + ", ".join(sql_value(n, r.get(n)) for n in names) + ")" for r in rows)
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
               owner: str, claimed_at_us: int) -> list[dict[str, Any]]:
    """The claim's ledger rows (column → value), one per range (``topic``, ``partition``, ``start``, ``end``);
    pure."""
    return [{"pipeline": pipeline, "table_name": table, "batch_id": int(batch_id), "mode": mode, "topic": r.topic,
             "partition": int(r.partition), "start_offset": int(r.start), "end_offset": int(r.end),
             "status": "claimed", "run_id": run_id, "owner": owner, "claimed_at": int(claimed_at_us)} for r in ranges]


def held_rows(pipeline: str, table: str, held: Held, run_id: str, owner: str,
              committed: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """A held batch's rows once staged (its ranges' counts, barrier and ``staged_at_us``), and once committed when
    ``committed`` gives the commit's columns (``commit_values``); pure."""
    def json_or_null(v: Sequence[Any] | None) -> str | None:  # as the UPDATE writes them: an empty list stays a list
        return None if v is None else json.dumps(list(v))

    if held.staged_at_us is None:
        raise ValueError(f"batch {held.batch_id}: its rows are rewritten only once it is staged")
    at = int(held.staged_at_us)
    return [{**claimed, "status": "staged", "events_read": int(r.events_read),
             "events_skipped": int(r.events_skipped), "dead_letters": int(r.dead_letters),
             "truncate_barrier": json_or_null(held.barrier or None), "max_position": json_or_null(r.max_position),
             "server_ids": json_or_null(r.server_ids), "staged_at": at, **(committed or {})}
            for r, claimed in zip(held.ranges, claim_rows(pipeline, table, held.batch_id, held.mode, held.ranges,
                                                           run_id, owner, at))]


def commit_values(counts: Mapping[str, int], snapshot_id: int | None, phase_seconds: Mapping[str, float],
                  committed_at_us: int) -> dict[str, Any]:
    """The columns a batch's commit sets (column → value); pure."""
    return {"status": "committed", **{k: int(counts.get(k, 0)) for k in ("inserted", "updated", "deleted")},
            "target_snapshot_id": None if snapshot_id is None else int(snapshot_id),
            "phase_seconds": json.dumps({k: round(v, 3) for k, v in phase_seconds.items()}),
            "committed_at": int(committed_at_us)}


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


def overwrite_batch(spark: Any, ledger: str, pipeline: str, table: str, batch_id: int, rows: Sequence[Mapping[str, Any]],
                    since: int | None, write_id: str | None = None) -> None:
    """Replace the batch's rows by ``rows``, validated from ledger snapshot ``since`` (None: the ledger had none, so
    every commit since its creation is checked); ``write_id`` goes into the snapshot's summary. Iceberg's API, not a
    Spark statement (``cdc.iceberg.row_commit``). Raises what Iceberg raises: a conflict, or one of ``UNVALIDATABLE``."""
    from cdc.iceberg.row_commit import overwrite_rows

    overwrite_rows(spark, ledger, rows, {"pipeline": pipeline, "table_name": table, "batch_id": int(batch_id)}, since,
                   {WRITE_ID: write_id} if write_id is not None else None)


def write_claim(spark: Any, ledger: str, pipeline: str, table: str, batch_id: int,
                rows: Sequence[Mapping[str, Any]], table_columns: Sequence[str], seen: int | None,
                write_id: str | None = None) -> bool:
    """Write the claim rows, validated from ledger snapshot ``seen`` (``write_id`` into the snapshot's summary);
    the MERGE (over ``table_columns``, the ledger's as the session sees them) when that cannot be validated. Whether
    the validated write committed (False: the MERGE did). Conflicts are raised."""
    try:
        overwrite_batch(spark, ledger, pipeline, table, batch_id, rows, seen, write_id)
        return True
    except Exception as exc:
        if not any(m in str(exc) for m in UNVALIDATABLE):
            raise
        spark.sql(merge_claim_sql(ledger, pipeline, table, batch_id, rows_sql(rows, table_columns)))
        return False


def snapshot_of_write(spark: Any, ledger: str, write_id: str, depth: int = 1000) -> int | None:
    """The ledger snapshot that committed ``write_id`` (None: not among the newest ``depth``), walking back from the
    current snapshot of the table the session's catalog holds (Py4J, no Spark job). Other tables' ledger writes may
    have committed after it, so the current snapshot is not enough: a mark validated from a later snapshot would
    miss a take-over committed in between."""
    from cdc.iceberg.tables import iceberg_table

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
