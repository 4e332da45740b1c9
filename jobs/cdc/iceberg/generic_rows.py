"""The rows of a small Iceberg table (the ledger) read in the driver by Iceberg's generic reader: no Spark statement.

A table's ledger state (``cdc.ledger.ledger.Ledger.state``) is read two or three times per table and batch. As a Spark
query each read costs a plan (analysis, optimisation, Iceberg's scan planning) and a job, about 0.17 s of a busy
driver's time: 27 reads and 4.6 s per batch of a 20-table group (bench/results/2026-11-29-classification-profile.md).
The rows are few, in a few small files of a few partitions (maintenance rewrites the ledger's small files), so Iceberg's
``IcebergGenerics`` reads them in the driver, at one snapshot, with the same delete files applied, and a compiled
class (``cdc.spark.janino``) sends them to Python as one string: JSON lines in Iceberg's single-value format (keys are
field ids, a null is left out, a timestamp is ISO text). A scan of more than ``MAX_FILES`` files (a ledger not
compacted for a long time) is left to Spark's parallel tasks: ``read`` returns None and the caller runs its query.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from cdc.spark.janino import compiled

MAX_FILES = 64  # more files than this: the caller's Spark query reads them in parallel tasks

CLASS = "CdcGenericRows"
SOURCE = r"""
public class CdcGenericRows {
  public CdcGenericRows() {}

  /** The rows of {@code table} at snapshot {@code snapshotId} that match {@code filter}, projected to
   * {@code names} (comma-separated): a first line of "fieldId name" pairs separated by tabs, then one JSON object
   * per row in Iceberg's single-value format. Null when the scan has more than {@code maxFiles} files. */
  public String read(org.apache.iceberg.Table table, long snapshotId, org.apache.iceberg.expressions.Expression filter,
                     String names, int maxFiles) throws java.io.IOException {
    String[] columns = names.split(",");
    if (!fewFiles(table, snapshotId, filter, maxFiles)) return null;
    StringBuilder out = new StringBuilder();
    java.util.List fields = table.schema().select(columns).columns();
    for (int i = 0; i < fields.size(); i++) {
      org.apache.iceberg.types.Types.NestedField f = (org.apache.iceberg.types.Types.NestedField) fields.get(i);
      out.append(i == 0 ? "" : "\t").append(f.fieldId()).append(' ').append(f.name());
    }
    out.append('\n');
    org.apache.iceberg.io.CloseableIterable records = org.apache.iceberg.data.IcebergGenerics.read(table)
        .useSnapshot(snapshotId).where(filter).select(columns).build();
    try {
      java.util.Iterator it = records.iterator();
      while (it.hasNext()) {
        org.apache.iceberg.data.Record r = (org.apache.iceberg.data.Record) it.next();
        org.apache.iceberg.types.Types.StructType struct = r.struct();
        out.append(org.apache.iceberg.SingleValueParser.toJson(
            struct, new org.apache.iceberg.data.InternalRecordWrapper(struct).wrap(r))).append('\n');
      }
    } finally {
      records.close();
    }
    return out.toString();
  }

  /** Whether the scan plans at most {@code maxFiles} data files: the snapshot's own total when it says so (no
   * planning), else the planned files counted (the read then plans them again). */
  private static boolean fewFiles(org.apache.iceberg.Table table, long snapshotId,
                                  org.apache.iceberg.expressions.Expression filter, int maxFiles)
      throws java.io.IOException {
    String total = (String) table.snapshot(snapshotId).summary().get("total-data-files");
    if (total != null && Long.parseLong(total) <= maxFiles) return true;
    org.apache.iceberg.TableScan scan = (org.apache.iceberg.TableScan) table.newScan().useSnapshot(snapshotId);
    org.apache.iceberg.io.CloseableIterable tasks = ((org.apache.iceberg.TableScan) scan.filter(filter)).planFiles();
    int files = 0;
    try {
      java.util.Iterator it = tasks.iterator();
      while (it.hasNext() && files <= maxFiles) { it.next(); files++; }
    } finally {
      tasks.close();
    }
    return files <= maxFiles;
  }
}
"""


def reader(spark: Any) -> Any | None:
    """The compiled reader of this driver's JVM, or None (then every read is a Spark query)."""
    return compiled(spark, CLASS, SOURCE, "ledger reads run as Spark queries")


def parse(text: str, columns: Sequence[str], timestamps: frozenset[str]) -> list[dict[str, Any]]:
    """The rows ``CLASS.read`` returned, as dicts of ``columns`` (a null is None); the ``timestamps`` columns as epoch
    microseconds; pure."""
    header, *lines = text.split("\n")
    names = dict(pair.split(" ", 1) for pair in header.split("\t")) if header else {}
    out = []
    for line in lines:
        if not line:
            continue
        row = dict.fromkeys(columns)
        for field_id, value in json.loads(line).items():
            name = names.get(field_id)
            if name is None:  # a column of the filter, read to apply it
                continue
            row[name] = micros(value) if name in timestamps and value is not None else value
        out.append(row)
    return out


def micros(iso: str) -> int:
    """Epoch microseconds of an ISO timestamp with a zone (Iceberg's ``timestamptz`` text); pure, exact."""
    delta = datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def read(spark: Any, table: Any, snapshot_id: int, equal: Mapping[str, str], columns: Sequence[str],
         timestamps: frozenset[str] = frozenset(), within: Mapping[str, Sequence[str]] | None = None
         ) -> list[dict[str, Any]] | None:
    """The rows of the Iceberg ``table`` (Java, ``cdc.iceberg.tables.iceberg_table``) at ``snapshot_id`` whose ``equal``
    columns have those values and whose ``within`` columns one of theirs, as dicts of ``columns`` (``timestamps``: as
    epoch microseconds); None when the reader is missing or the scan has more than ``MAX_FILES`` files (the caller
    reads with Spark)."""
    helper = reader(spark)
    if helper is None:
        return None
    from cdc.iceberg.tables import equal_filter

    text = helper.read(table, int(snapshot_id), equal_filter(spark, equal, within), ",".join(columns), MAX_FILES)
    return None if text is None else parse(text, columns, timestamps)
