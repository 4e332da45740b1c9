"""A DataFrame's rows, collected to the driver, written into one Iceberg data file by Iceberg's own Spark writers.

``cdc.merge.target_write`` commits a small batch's changes to the target as a row delta through Iceberg's API. Its new
rows have the target's full schema (every Spark type a source column can have), so they are not converted in Python
(as ``cdc.iceberg.row_commit``'s few ledger and tombstone rows are): the rows stay Spark ``InternalRow``s in the JVM, and
Iceberg's ``SparkParquetWriters`` (what Spark's own Iceberg writes use) write them with the table's properties. The
writer is chosen by a ``Function`` from the file's Parquet schema to a value writer, which Py4J cannot implement, so
a glue class of a few lines is compiled once per driver JVM (``cdc.spark.janino``). Without it (Janino missing, a compile
error) ``writer_class`` returns None and the caller keeps the MERGE.
"""

from __future__ import annotations

import uuid
from typing import Any

from cdc.spark.janino import compiled
from cdc.spark.py4j_classes import iceberg_class


def parquet(spark: Any) -> Any:
    """Iceberg's ``FileFormat.PARQUET``."""
    return iceberg_class(spark, "FileFormat").PARQUET


def output_files(spark: Any, table: Any) -> Any:
    """An ``OutputFileFactory`` of new Parquet files of ``table`` (its location provider and encryption)."""
    return iceberg_class(spark, "io.OutputFileFactory").builderFor(table, 0, 0).format(parquet(spark)).operationId(
        uuid.uuid4().hex).build()


CLASS = "CdcInternalRowWriters"
SOURCE = r"""
public class CdcInternalRowWriters implements java.util.function.Function {
  private org.apache.spark.sql.types.StructType type;

  public CdcInternalRowWriters() {}

  /** The writer function of a file whose rows have Spark type {@code t} (the table's columns, in order). */
  public CdcInternalRowWriters forType(org.apache.spark.sql.types.StructType t) {
    CdcInternalRowWriters f = new CdcInternalRowWriters();
    f.type = t;
    return f;
  }

  public Object apply(Object message) {
    return org.apache.iceberg.spark.data.SparkParquetWriters.buildWriter(
        type, (org.apache.iceberg.shaded.org.apache.parquet.schema.MessageType) message);
  }

  /** The rows of {@code ds}, collected to the driver as Spark's internal rows (each its own copy). */
  public org.apache.spark.sql.catalyst.InternalRow[] collect(org.apache.spark.sql.Dataset ds) {
    return (org.apache.spark.sql.catalyst.InternalRow[]) ds.queryExecution().executedPlan().executeCollect();
  }

  /** The rows of {@code ds} collected to the driver once (one Spark job), as a Dataset over them: a local relation,
   * whose later queries Spark evaluates in the driver, without a Spark job (cdc.iceberg.row_writer.in_driver). */
  public org.apache.spark.sql.Dataset local(org.apache.spark.sql.Dataset ds) {
    org.apache.spark.sql.catalyst.InternalRow[] rows = collect(ds);
    scala.collection.Seq output = org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(ds.schema());
    scala.collection.Seq data = scala.collection.JavaConverters.asScalaBuffer(java.util.Arrays.asList(rows)).toSeq();
    return org.apache.spark.sql.Dataset.ofRows(ds.sparkSession(),
        new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(output, data, false));
  }

  public void writeAll(org.apache.iceberg.io.DataWriter writer, org.apache.spark.sql.catalyst.InternalRow[] rows) {
    for (int i = 0; i < rows.length; i++) writer.write(rows[i]);
  }

  /** Position deletes into {@code writer}, given as one string (one Py4J argument, not a list converted element by
   * element): "position path" lines, in the order to write (cdc.iceberg.row_commit.positions_text). */
  public void writePositions(org.apache.iceberg.io.FileWriter writer, String deletes) {
    org.apache.iceberg.deletes.PositionDelete delete = org.apache.iceberg.deletes.PositionDelete.create();
    int at = 0;
    while (at < deletes.length()) {
      int end = deletes.indexOf('\n', at);
      if (end < 0) end = deletes.length();
      int split = deletes.indexOf(' ', at);
      long position = Long.parseLong(deletes.substring(at, split));
      writer.write(delete.set(deletes.substring(split + 1, end), position, null));
      at = end + 1;
    }
  }
}
"""


def writer_class(spark: Any) -> Any | None:
    """An instance of ``CLASS`` in this driver's JVM (compiled on first use, about 0.2 s), or None when Janino cannot
    build it here (logged once)."""
    return compiled(spark, CLASS, SOURCE, "small batches merge by MERGE")


def in_driver(spark: Any, df: Any) -> Any | None:
    """``df``'s rows computed once and held in the driver, as a DataFrame over them (a local relation), or None when
    the writer class is missing. What ``localCheckpoint`` gives (a result computed once, which later queries read
    without computing it again), for a result small enough for the driver: queries of a local relation are evaluated
    in the driver (Spark's ``ConvertToLocalRelation``, ``LocalTableScanExec``), so each one that a checkpoint would
    serve by a Spark job (a collect of the actions, of the rows to write) runs none. Interpreted, row by row: for
    more than a few thousand rows the jobs are cheaper (``cdc.merge.apply.IN_DRIVER_MAX_EVENTS``)."""
    from pyspark.sql import DataFrame

    helper = writer_class(spark)
    return None if helper is None else DataFrame(helper.local(df._jdf), spark)


def write_frame(spark: Any, table: Any, df: Any) -> Any | None:
    """The rows of ``df`` (the columns of the unpartitioned Iceberg ``table``, in its order and with its Spark types)
    collected to the driver and written into one new data file of the table: its ``DataFile``, nothing committed;
    None when ``df`` has no rows or the writer class is missing."""
    helper = writer_class(spark)
    if helper is None:
        return None
    rows = helper.collect(df._jdf)
    if not len(rows):
        return None
    struct = iceberg_class(spark, "spark.SparkSchemaUtil").convert(table.schema())
    out = output_files(spark, table).newOutputFile()
    writer = (iceberg_class(spark, "parquet.Parquet").writeData(out).forTable(table)
              .createWriterFunc(helper.forType(struct)).withSpec(table.spec()).overwrite().build())
    try:
        helper.writeAll(writer, rows)
    finally:
        writer.close()
    return writer.toDataFile()