"""Read a batch's chunks from Kafka in parallel Spark tasks into the staging table; count; divert dead letters.

The staging table keeps exactly what the batch read (one row per Kafka record), partitioned by ``batch_id``, so a
batch can be re-merged without Kafka and audited afterwards. Re-staging a batch overwrites its partition.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Sequence

from cdc.common.errors import BadRecordError, DeadLetterRatioExceeded
from cdc.common.sql import lit, q
from cdc.config.names import TableNames
from cdc.iceberg.tables import ensure_staging, spark_schema, table_property
from cdc.kafka.plan import OffsetRange
from cdc.positions.ordering import Ordering, epochs_json, epochs_of
from cdc.schema import evolution
from cdc.schema.columns import (
    ERROR,
    ERROR_CLASS,
    KIND,
    OFFSET,
    PARTITION,
    RAW_KEY,
    RAW_VALUE,
    TOPIC,
    Column,
    arrow_schema,
)
from cdc.stage import driver_read
from cdc.stage.reader import ReadSpec, map_chunks
from cdc.stage.stats import BatchStats, ChunkAggregates, PartitionCounts, TaskCounts, arrow_batch_stats


def stage(spark: Any, spec: ReadSpec, chunks: Sequence[OffsetRange], names: TableNames,
          driver_max_records: int = 0) -> BatchStats | None:
    """Read ``chunks`` (one Spark task each; in the driver when they hold at most ``driver_max_records`` offsets,
    ``cdc.stage.driver_read``) and overwrite the batch's staging partition. Returns the batch's ``BatchStats`` when
    the driver read it (counted from the rows in hand, ``arrow_batch_stats``: no Spark job), else None (then
    ``batch_stats`` counts the staged rows)."""
    ensure_staging(spark, names.staging, spec.staging_columns)
    epochs = epochs_json(spec.ordering.epochs)
    spark.sql(f"ALTER TABLE {names.staging} SET TBLPROPERTIES ("
              f"'cdc.key'={lit(json.dumps(list(spec.key)))}, "
              f"'cdc.ordering'={lit(json.dumps([spec.ordering.kind, list(spec.ordering.paths), epochs]))})")

    df, read, counts = None, None, None
    if driver_read.use_driver(chunks, driver_max_records):
        try:
            read = list(driver_read.read_in_driver(spec, chunks))
        except driver_read.TooLarge:  # large rows: read in Spark tasks, chunk by chunk, as a larger batch is
            read = None
        if read is not None:
            df = driver_read.arrow_frame(spark, iter(read), arrow_schema(spec.staging_columns),
                                         spark_schema(spec.staging_columns))
    if df is None:
        rows = [tuple(asdict(c).values()) for c in chunks]
        rdd = spark.sparkContext.parallelize(rows, max(1, len(rows)))
        chunk_df = spark.createDataFrame(rdd, "topic string, partition int, start long, end long")
        counts = TaskCounts(spark.sparkContext.accumulator({}, ChunkAggregates()), tuple(spec.ordering.columns))
        df = chunk_df.mapInArrow(map_chunks(spec, counts.counted), spark_schema(spec.staging_columns))
    from pyspark.sql import functions as F

    have = spark.table(names.staging).schema.fields
    mine = set(df.columns)  # columns the reader does not write (e.g. cdc.merge.pk_moves' __moved) stay NULL, typed
    df = df.select(*[F.col(q(f.name)) if f.name in mine else F.lit(None).cast(f.dataType).alias(f.name)
                     for f in have])
    write_staging(df if read is None else df.coalesce(1), names.staging)
    if counts is not None:
        return counts.stats(spark, chunks, names.staging, {f.name for f in have})
    if not any(b.num_rows for b in read):  # nothing read: an earlier attempt's rows of this batch id may remain (an
        return None  # empty overwrite commits nothing), and batch_stats counts what is staged
    return arrow_batch_stats(read, spec.ordering.columns, {f.name for f in have})


def write_staging(df: Any, staging: str) -> None:
    """Overwrite the batch's staging partition with ``df`` (rows of one ``batch_id``), each task writing its own rows.

    Iceberg's default for a partitioned table (``distribution-mode`` hash) would shuffle the rows by partition first,
    and as they all hold the one ``batch_id``, a single task then wrote every row of the batch: a shuffle of the
    whole batch (raw bytes included) and a write on one core. Rows of one partition need no clustering, so each read
    task (one chunk) writes its file directly; a batch the driver read is written by one task, as one file."""
    df.writeTo(staging).option("distribution-mode", "none").overwritePartitions()


def staged_key_and_ordering(spark: Any, staging: str) -> tuple[tuple[str, ...], Ordering]:
    """The key and ordering the staging table's newest batch was staged with."""
    kind, paths, *rest = json.loads(table_property(spark, staging, "cdc.ordering"))
    epochs = rest[0] if rest else None
    return tuple(json.loads(table_property(spark, staging, "cdc.key"))), Ordering(kind, tuple(paths), epochs_of(epochs))


def record_dead_letters(spark: Any, names: TableNames, pipeline: str, table: str, batch_id: int) -> None:
    """Copy the batch's bad records to the dead-letter table, one row per batch and record: a rerun of the batch
    adds nothing, while a record at an offset an earlier batch's dead letter holds (a re-created topic after
    ``--reset-cursor``, or a backfill's replay) gets a row of its own."""
    src = (f"SELECT {lit(pipeline)} AS pipeline, {lit(table)} AS table_name, batch_id, {q(TOPIC)} AS topic, "
           f"{q(PARTITION)} AS `partition`, {q(OFFSET)} AS `offset`, {q(RAW_KEY)} AS key, {q(RAW_VALUE)} AS value, "
           f"{q(ERROR_CLASS)} AS error_class, {q(ERROR)} AS error_message, current_timestamp() AS created_at "
           f"FROM {names.staging} WHERE batch_id = {int(batch_id)} AND {q(KIND)} = 'error'")
    spark.sql(
        f"MERGE INTO {names.dead_letters} d USING ({src}) s ON d.pipeline = s.pipeline AND d.table_name = s.table_name "
        "AND d.batch_id = s.batch_id AND d.topic = s.topic AND d.`partition` = s.`partition` AND d.`offset` = s.`offset` "
        "WHEN NOT MATCHED THEN INSERT *")


def check_dead_letter_ratio(table: str, counts: dict[int, PartitionCounts], max_ratio: float,
                            dead_letters_table: str, batch_id: int) -> None:
    """Fail the batch (before any merge) when too many of its records are bad."""
    read = sum(c.events_read for c in counts.values())
    bad = sum(c.dead_letters for c in counts.values())
    if read and bad / read > max_ratio:
        raise DeadLetterRatioExceeded(
            f"table {table}: batch {batch_id}: {bad} of {read} records ({bad / read:.1%}) could not be decoded, "
            f"more than max_dead_letter_ratio {max_ratio:.1%}; nothing was merged. Inspect them with "
            f"SELECT * FROM {dead_letters_table} WHERE table_name = {lit(table)} AND batch_id = {batch_id}, fix the "
            "cause, or raise max_dead_letter_ratio for this table and rerun")


def unbound_columns(spark: Any, staging: str, batch_id: int, decoder: Any, row_cols: list[Column],
                    table: Any) -> list[Column] | None:
    """The row columns widened with the columns of staged ``UnboundColumns`` records (one record per distinct
    message, i.e. per schema) of ``table`` (its ``TableConfig``), or None when there are none."""

    found = spark.sql(
        f"SELECT min(struct({q(PARTITION)}, {q(OFFSET)}, {q(RAW_KEY)}, {q(RAW_VALUE)})) AS r FROM {staging} "
        f"WHERE batch_id = {int(batch_id)} AND {q(ERROR_CLASS)} = 'UnboundColumns' GROUP BY {q(ERROR)}").collect()
    cols = list(row_cols)
    for p, o, k, v in (r["r"] for r in found):
        try:
            own = decoder.record_columns(k and bytes(k), v and bytes(v), cols)
            cols = evolution.plan(cols, own or [], table.allow_field_addition).columns
        except evolution.Incompatible as exc:
            raise evolution.evolution_error(table.target, table.topic, exc, (p, o),
                                            bootstrap_mode=evolution.bootstrap_mode(table)) from None
    if found and cols == list(row_cols):  # nothing to add or widen: staging again would not help
        p, o = found[0]["r"][:2]
        raise BadRecordError(
            f"table {table.target}: topic {table.topic} partition {p} offset {o}: the record has columns the "
            "batch schema lacks and they cannot be added (see its dead letter reason); check the record's schema "
            "and allow_field_addition for this table, then rerun")
    return cols if found else None
