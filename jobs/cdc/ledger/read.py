"""The ledger read a run decides from (``cdc.ledger.ledger.Ledger.states``): the rows of some tables in one read, turned into
each table's ``TableState`` (``cdc.ledger.state``).

A table's state is read before each batch is planned, and by the checks around a claim; as a Spark query each read
cost a plan and a job, about 0.17 s of a busy driver's time, 27 per batch of a 20-table group
(bench/results/2026-11-29-classification-profile.md). So the read is Iceberg's generic reader in the driver
(``cdc.iceberg.generic_rows``) unless the rows are in many files (a ledger not compacted for long: then a Spark query reads
them in parallel tasks), and a group's tables are read all at once (``cdc.run.batch.run_batch``).

The state names the ledger snapshot that was current before the read (``TableState.snapshot_id``); a claim is
validated from it (``Ledger.claim``). The driver reads exactly that snapshot; the Spark query reads the table as it
is then (a query pinned to a snapshot would use that snapshot's schema, and miss a column an upgrade added since
without a commit): at most rows committed after it, so a claim validated from it is never laxer. A state read earlier
than its table plans is a state read by a table that took that long to plan: the claim is refused if another run
claimed the batch since.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from cdc.common.sql import lit
from cdc.iceberg import generic_rows
from cdc.iceberg.tables import iceberg_table
from cdc.ledger.model import newest_resets
from cdc.ledger.state import TableState, table_state

# What a table's state is built from (``table_state``); ``claimed_at`` as epoch microseconds
STATE_COLUMNS = ("table_name", "batch_id", "mode", "topic", "partition", "start_offset", "end_offset", "status",
                 "events_read", "events_skipped", "dead_letters", "run_id", "owner", "claimed_at", "max_position",
                 "server_ids", "truncate_barrier")


def read_states(spark: Any, ledger: str, pipeline: str, tables: Mapping[str, str | None]) -> dict[str, TableState]:
    """The ``TableState`` of each of ``tables`` (table → its topic, or None) in ``pipeline``, from one read of
    ``ledger`` as the session's catalog holds it (the caller refreshes it first)."""
    table = iceberg_table(spark, ledger)
    current = table.currentSnapshot()
    seen = None if current is None else int(current.snapshotId())
    names = sorted(tables)
    rows: list[dict[str, Any]] = []
    if seen is not None:
        found = generic_rows.read(spark, table, seen, {"pipeline": pipeline}, STATE_COLUMNS, frozenset({"claimed_at"}),
                                  within={"table_name": names})
        rows = found if found is not None else spark_rows(spark, ledger, pipeline, names)
    by_table: dict[str, list[dict[str, Any]]] = {t: [] for t in names}
    for r in rows:  # both reads select the tables' rows only
        r["claimed_at_us"] = r.pop("claimed_at")
        by_table[r["table_name"]].append(r)
    return {t: table_state(by_table[t], t, topic, seen) for t, topic in tables.items()}


def spark_rows(spark: Any, ledger: str, pipeline: str, tables: Sequence[str]) -> list[dict[str, Any]]:
    """``read_states``'s rows by a Spark query: every row of the tables, the state picked in Python
    (``table_state``): a plain scan is one Spark job; selecting the rows in SQL needs the newest batch id first (a
    window: a shuffle, two jobs)."""
    columns = ", ".join("unix_micros(claimed_at) AS claimed_at" if c == "claimed_at" else f"`{c}`"
                        for c in STATE_COLUMNS)
    return [r.asDict() for r in spark.sql(
        f"SELECT {columns} FROM {ledger} WHERE pipeline = {lit(pipeline)} "
        f"AND table_name IN ({', '.join(lit(t) for t in tables)})").collect()]


def reset_batches(spark: Any, ledger: str, table: str, batch_id: int) -> tuple[tuple[int, int], ...]:
    """(partition, batch id) of each partition's newest committed cursor reset (``--reset-cursor``, mode ``reset``)
    of ``table`` before ``batch_id``: rows the table holds from earlier batches came from that partition's offsets
    before the reset (``cdc.merge.compaction``). Read as the session's catalog holds the ledger: at least as new as
    the batch's own claim, and a reset is refused while a batch is pending. The table name alone selects its rows:
    its staging and tombstones tables are named by metadata namespace and table, so two pipelines of one ledger
    never write one table."""
    table_j = iceberg_table(spark, ledger)
    current = table_j.currentSnapshot()
    if current is None:
        return ()
    columns = ("partition", "batch_id", "mode", "status")
    rows = generic_rows.read(spark, table_j, int(current.snapshotId()), {"table_name": table, "mode": "reset"},
                             columns)
    if rows is None:
        rows = [r.asDict() for r in spark.sql(
            f"SELECT `partition`, batch_id, mode, status FROM {ledger} WHERE table_name = {lit(table)} "
            "AND mode = 'reset'").collect()]
    return newest_resets(rows, batch_id)
