"""A few rows into an Iceberg table as one validated overwrite (``overwrite_rows``) or row delta (``replace_rows``),
written and committed by Iceberg's Java API through Py4J: no Spark statement, no Spark job.

The ledger writes a handful of rows three times per table and batch (``cdc.ledger.write``), one at a time per process
(``cdc.ledger.ledger.ledger_lock``). As a Spark write each cost a query plan and a one-task job (about 60 ms idle, more on
a busy driver) on top of the commit; here the same commit takes only a Parquet file written from the driver. What
Iceberg validates is what Spark's overwrite-by-filter validates with ``isolation-level=serializable`` (Iceberg's
``SparkWrite``): ``newOverwrite().overwriteByRowFilter(filter)``, ``validateFromSnapshot(since)`` (when known),
``validateNoConflictingDeletes()`` and ``validateNoConflictingData()``; so a conflict or a write Iceberg cannot
validate raises the same ``ValidationException`` messages. A small batch's tombstones (``cdc.merge.tombstone_write``) are
a row delta: new rows plus a position delete file for the rows they replace, validated as Spark's merge-on-read
MERGE validates its commit (``SparkPositionDeltaWrite``).

Rows go to Iceberg as JSON in its single-value format (``SingleValueParser``, field ids as keys: Py4J would send
small integers as Java ints, which a ``long`` column's writer refuses), timestamps set apart as ``OffsetDateTime``
(what Iceberg's generic writer takes), and are written with the table's own
properties (metrics, compression) by ``GenericAppenderFactory`` into one data file of one partition.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from cdc.iceberg.row_writer import output_files, parquet, writer_class
from cdc.iceberg.tables import equal_filter, iceberg_table
from cdc.spark.py4j_classes import iceberg_class, java_class


def now_us() -> int:
    """The current time in epoch microseconds: a ledger row's timestamps (``claimed_at``, ``staged_at``,
    ``committed_at``) as this driver's clock gives them."""
    return time.time_ns() // 1000


def iso_micros(micros: int) -> str:
    """Epoch microseconds as the ISO text Iceberg parses as a ``timestamptz`` (UTC); pure."""
    seconds, rest = divmod(int(micros), 1_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest:06d}+00:00"


def rows_json(rows: Sequence[Mapping[str, Any]], field_ids: Mapping[str, int], timestamps: frozenset[str]) -> str:
    """``rows`` (column → Python value; a missing column or None is null) without their ``timestamps`` columns, as a
    JSON list of objects keyed by field id; pure. A column the table does not have is an error (nothing is
    dropped)."""
    out = []
    for row in rows:
        unknown = sorted(set(row) - set(field_ids))
        if unknown:
            raise ValueError(f"columns {unknown} are not in the table (it has {sorted(field_ids)})")
        out.append({str(field_ids[k]): v for k, v in row.items() if v is not None and k not in timestamps})
    return json.dumps(out)


def overwrite_rows(spark: Any, name: str, rows: Sequence[Mapping[str, Any]], equal: Mapping[str, Any],
                   since: int | None, properties: Mapping[str, str] | None = None) -> None:
    """Replace the rows of Iceberg table ``name`` where every column of ``equal`` has its value by ``rows`` (all of
    one partition), validated as serializable from snapshot ``since`` (None: from the table's first); ``properties``
    go into the snapshot's summary (e.g. a write id, to find the snapshot later). Raises what Iceberg raises (a
    conflict, a write it cannot validate)."""
    table, data_file = _data_file(spark, name, rows)
    overwrite = in_caller(spark, table.newOverwrite()).overwriteByRowFilter(equal_filter(spark, equal)).addFile(
        data_file)
    if since is not None:
        overwrite = overwrite.validateFromSnapshot(int(since))
    overwrite = overwrite.validateNoConflictingDeletes().validateNoConflictingData()
    for k, v in (properties or {}).items():
        overwrite = overwrite.set(k, v)
    overwrite.commit()


def in_caller(spark: Any, update: Any) -> Any:
    """Iceberg ``update`` (a snapshot producer) with its manifest work run in the calling thread.

    By default Iceberg hands each step of a commit (filtering, merging and validating manifests) to its shared worker
    pool and waits for the results by polling: ``Tasks.waitFor`` checks the futures every 10 ms. A commit of a few
    rows to a small table has a few milliseconds of work per step, so each step cost a 10 ms sleep; in the caller the
    futures are done when the poll first looks. Measured on this project's 2-core machine (JFR, alternating runs):
    a one-row overwrite of a small partitioned table 95 -> 74 ms (medians); a 20-table batch, whose ledger commits
    take turns (``cdc.ledger.ledger.ledger_lock``: the sleeps were the lock's hold time too), 19.0 -> 17.6 s. Iceberg
    writes new manifests on its pool whatever the executor, so one sleep per commit remains."""
    direct = java_class(spark, "org.apache.iceberg.relocated.com.google.common.util.concurrent.MoreExecutors")
    return update.scanManifestsWith(direct.newDirectExecutorService())


def replace_rows(spark: Any, name: str, rows: Sequence[Mapping[str, Any]], deletes: Sequence[tuple[str, int]],
                 since: int | None) -> None:
    """Add ``rows`` to the unpartitioned Iceberg table ``name`` and delete the rows at ``deletes`` (data file path,
    row position) as one row delta (``commit_delta``)."""
    table, data_file = _data_file(spark, name, rows)
    commit_delta(spark, table, data_file, deletes, since)


def commit_delta(spark: Any, table: Any, data_file: Any | None, deletes: Sequence[tuple[str, int]],
                 since: int | None, properties: Mapping[str, str] | None = None) -> None:
    """Commit ``data_file`` (a new data file of the Iceberg ``table``, or None) and a position delete file of the
    rows at ``deletes`` (data file path, row position) as one row delta: what Spark's merge-on-read MERGE commits,
    validated as it validates one with ``isolation-level=serializable`` from snapshot ``since`` (None: from the
    table's first): the deleted rows' files still exist, and no data or delete file was committed since.
    ``properties`` go into the snapshot's summary. Raises what Iceberg raises; on a failure the files of this delta
    are deleted again (unless the commit's outcome is unknown)."""
    written = [] if data_file is None else [data_file.location()]
    try:
        delta = in_caller(spark, table.newRowDelta())
        if data_file is not None:
            delta = delta.addRows(data_file)
        if deletes:
            files = output_files(spark, table)
            factory = iceberg_class(spark, "data.GenericAppenderFactory")(table.schema(), table.spec())
            factory.setAll(table.properties())
            writer = factory.newPosDeleteWriter(files.newOutputFile(), parquet(spark), None)
            try:
                write_positions(spark, writer, sorted(deletes))  # a position delete file: by path, then position
            finally:
                writer.close()
            delete_file = writer.toDeleteFile()
            written.append(delete_file.location())
            delta = (delta.addDeletes(delete_file).validateDeletedFiles()
                     .validateDataFilesExist(_java_list(spark, sorted({p for p, _ in deletes}))))
        if since is not None:
            delta = delta.validateFromSnapshot(int(since))
        for k, v in (properties or {}).items():
            delta = delta.set(k, v)
        delta.validateNoConflictingDataFiles().validateNoConflictingDeleteFiles().commit()
    except BaseException as exc:
        if "CommitStateUnknownException" in str(exc):  # it may have been committed: its files may be the table's
            raise
        for path in written:
            try:
                table.io().deleteFile(path)
            except Exception:  # noqa: BLE001 - best effort: an orphan file is what a failed Spark write leaves too
                pass
        raise


def positions_text(deletes: Sequence[tuple[str, int]]) -> str | None:
    """``deletes`` as ``CdcInternalRowWriters.writePositions`` takes them: ``<position> <path>`` lines (None when a
    path holds a line break); pure."""
    if any("\n" in path or "\r" in path for path, _ in deletes):
        return None
    return "\n".join(f"{int(pos)} {path}" for path, pos in deletes)


def write_positions(spark: Any, writer: Any, deletes: Sequence[tuple[str, int]]) -> None:
    """``deletes`` (data file path, row position) into Iceberg's position delete ``writer``: in one call to the
    JVM (``cdc.iceberg.row_writer``'s class; a few hundred deletes one by one cost a few hundred milliseconds of Py4J round
    trips), else one by one."""

    helper, text = writer_class(spark), positions_text(deletes)
    if helper is not None and text is not None:
        helper.writePositions(writer, text)
        return
    delete = iceberg_class(spark, "deletes.PositionDelete")
    for path, pos in deletes:
        writer.write(delete.create().set(path, int(pos), None))


def _java_list(spark: Any, values: Sequence[str]) -> Any:
    out = java_class(spark, "java.util.ArrayList")()
    for v in values:
        out.add(v)
    return out


def _data_file(spark: Any, name: str, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Any]:
    """``rows`` (all of one partition) written into one new data file of table ``name`` with the table's own
    properties: (the table, the ``DataFile``), nothing committed."""
    table = iceberg_table(spark, name)
    schema, spec = table.schema(), table.spec()
    struct = schema.asStruct()
    list_type = iceberg_class(spark, "types.Types$ListType").ofOptional(schema.highestFieldId() + 1, struct)
    fields = json.loads(iceberg_class(spark, "SchemaParser").toJson(schema))["fields"]  # one call, not one per field
    ids = {f["name"]: f["id"] for f in fields}
    timestamps = frozenset(f["name"] for f in fields if str(f["type"]).startswith("timestamp"))
    parsed = iceberg_class(spark, "SingleValueParser").fromJson(list_type, rows_json(rows, ids, timestamps))
    records = [parsed.get(i) for i in range(len(rows))]  # not iterated: Py4J ends an iteration with an exception
    instants: dict[int, Any] = {}  # epoch microseconds → java.time.OffsetDateTime, what the generic writer takes
    for record, row in zip(records, rows):
        for column in timestamps:
            if row.get(column) is not None:
                micros = int(row[column])
                if micros not in instants:
                    instants[micros] = java_class(spark, "java.time.OffsetDateTime").parse(iso_micros(micros))
                record.setField(column, instants[micros])

    factory = iceberg_class(spark, "data.GenericAppenderFactory")(schema, spec)
    factory.setAll(table.properties())
    key = iceberg_class(spark, "PartitionKey")(spec, schema)
    key.partition(records[0])
    files = output_files(spark, table)
    # unpartitioned: newOutputFile(spec, key) would name <data>//<file> (an empty partition path), which object
    # stores keep as a key with an empty path segment ("data/%2F..." on S3)
    out = files.newOutputFile() if spec.isUnpartitioned() else files.newOutputFile(spec, key)
    writer = factory.newDataWriter(out, parquet(spark), key)
    try:
        for record in records:  # one by one: Py4J would pick write(Object) for the whole list
            writer.write(record)
    finally:
        writer.close()
    return table, writer.toDataFile()