"""Read a batch's chunks from Kafka in parallel Spark tasks into the staging table; count; divert dead letters.

The staging table keeps exactly what the batch read (one row per Kafka record), partitioned by ``batch_id``, so a
batch can be re-merged without Kafka and audited afterwards. Re-staging a batch overwrites its partition.
"""

from __future__ import annotations

import json
from dataclasses import asdict, astuple, dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam

from cdc.decode.model import Column
from cdc.errors import BadRecordError, DeadLetterRatioExceeded
from cdc.kafka.read import Chunk, ReadSpec, map_chunks
from cdc.ordering import Ordering
from cdc.sql import lit, q
from cdc.tables import TableNames, arrow_schema, ensure_staging, spark_schema, table_property

SKIPPED = ("tombstone", "message", "tx")


@dataclass(frozen=True)
class PartitionCounts:
    partition: int
    events_read: int
    events_skipped: int
    dead_letters: int
    max_position: tuple[int, ...] | None = None  # newest source position among the partition's change events
    min_columns: tuple[int | None, ...] | None = None  # each ordering column's lowest value among them (cdc.regression)
    servers: tuple[str, ...] | None = None  # the server ids of its change events (None: no changes; cdc.regression)


def stage(spark: Any, spec: ReadSpec, chunks: Sequence[Chunk], names: TableNames,
          driver_max_records: int = 0) -> BatchStats | None:
    """Read ``chunks`` (one Spark task each; in the driver when they hold at most ``driver_max_records`` offsets,
    ``cdc.kafka.driver_read``) and overwrite the batch's staging partition. Returns the batch's ``BatchStats`` when
    the driver read it (counted from the rows in hand, ``arrow_batch_stats``: no Spark job), else None (then
    ``batch_stats`` counts the staged rows)."""
    ensure_staging(spark, names.staging, spec.staging_columns)
    epochs = None if spec.ordering.epochs is None else [[e, [list(s) for s in st]] for e, st in spec.ordering.epochs]
    spark.sql(f"ALTER TABLE {names.staging} SET TBLPROPERTIES ("
              f"'cdc.key'={lit(json.dumps(list(spec.key)))}, "
              f"'cdc.ordering'={lit(json.dumps([spec.ordering.kind, list(spec.ordering.paths), epochs]))})")
    from cdc.kafka import driver_read

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
    mine = set(df.columns)  # columns the reader does not write (e.g. cdc.pk_moves' __moved) stay NULL, typed
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


def epochs_of(raw: Any) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...] | None:
    """Epoch history from its JSON form ``[[epoch, [[partition, offset], ...]], ...]`` (None stays None)."""
    if raw is None:
        return None
    return tuple((int(e), tuple((int(p), int(o)) for p, o in starts)) for e, starts in raw)


@dataclass(frozen=True)
class BatchStats:
    """What one pass over a staged batch tells: counts per partition, TOAST columns seen, newest truncate."""

    partitions: dict[int, PartitionCounts]
    toast_columns: tuple[str, ...]
    truncate: tuple[int, ...] | None
    # (changes with an old-key header, deletes with a new-key header): the batch's primary-key moves (cdc.pk_moves);
    # None when the staging table has no header columns
    moves: tuple[int, int] | None = None
    # Arrow bytes of the staged rows when the driver read the batch (so its changes fit in the driver: cdc.target_write);
    # None when Spark tasks read it or the staged rows were counted. Where the stats came from, not what they say:
    # not compared (stats counted from the rows in hand equal those counted by the query)
    driver_bytes: int | None = field(default=None, compare=False)

    @property
    def events_read(self) -> int:
        return sum(c.events_read for c in self.partitions.values())

    @property
    def dead_letters(self) -> int:
        return sum(c.dead_letters for c in self.partitions.values())


def batch_stats(spark: Any, staging: str, batch_id: int, ordering: Sequence[str]) -> BatchStats:
    skipped = ", ".join(lit(k) for k in SKIPPED)
    position = "named_struct(" + ", ".join(f"'o{i}', {q(c)}" for i, c in enumerate(ordering)) + ")"
    lowest = "array(" + ", ".join(f"min(IF(__kind = 'change', CAST({q(c)} AS BIGINT), NULL))" for c in ordering) + ")"
    from cdc.layout import NEW_KEY, OLD_KEY, SERVER_ID

    have = {f.name for f in spark.table(staging).schema.fields}
    headers = {OLD_KEY, NEW_KEY} <= have
    servers = f"collect_set(IF(__kind = 'change', {q(SERVER_ID)}, NULL))" if SERVER_ID in have \
        else "CAST(NULL AS ARRAY<STRING>)"  # staged before server ids were
    moves = (f"count_if(__kind = 'change' AND {q(OLD_KEY)} IS NOT NULL) AS mo, "
             f"count_if(__kind = 'change' AND {q(NEW_KEY)} IS NOT NULL AND __op = 'd') AS md, ") if headers else ""
    rows = spark.sql(
        f"SELECT __partition AS p, count(*) AS n, sum(IF(__kind IN ({skipped}), 1, 0)) AS s, "
        f"sum(IF(__kind = 'error', 1, 0)) AS e, array_distinct(flatten(collect_list(__unavailable))) AS u, "
        f"max(IF(__kind = 'change' AND __op = 't', {position}, NULL)) AS t, "
        f"max(IF(__kind = 'change', {position}, NULL)) AS m, "
        f"{moves}{lowest} AS lo, {servers} AS sv "
        f"FROM {staging} WHERE batch_id = {int(batch_id)} GROUP BY __partition"
    ).collect()
    return _assemble([r.asDict() for r in rows], headers)


def arrow_batch_stats(batches: Sequence[pa.RecordBatch], ordering: Sequence[str], have: set[str]) -> BatchStats:
    """``batch_stats`` of staged rows in hand (pure): the same counts, from the record batches a driver read staged
    (the rows the staging table then holds; ``have``: its columns). ``batch_stats``' SQL is the definition: each value
    here follows its expression, including Spark's order of structs with NULL fields (NULL first)."""
    return replace(stats_of(aggregates(batches, ordering), have), driver_bytes=sum(b.nbytes for b in batches))


def _order(pos: Sequence[Any]) -> tuple[tuple[int, ...], ...]:
    return tuple((0,) if v is None else (1, v) for v in pos)  # Spark: a NULL field sorts first


def _newest(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    return a if b is None or (a is not None and _order(a) >= _order(b)) else b


def _lowest(a: Sequence[Any], b: Sequence[Any]) -> list[Any]:
    return [v if lo is None else lo if v is None else min(lo, v) for lo, v in zip(a, b)]  # SQL min: NULLs ignored


def aggregates(batches: Sequence[pa.RecordBatch], ordering: Sequence[str]) -> dict[int, dict[str, Any]]:
    """``batch_stats``' aggregates of staged rows, per Kafka partition, named as its query names them (pure; Arrow
    compute over each batch and partition, then ``merge_aggregates``: no per-row Python, which cost a read task about
    a quarter of its CPU)."""
    return merge_aggregates(_aggregates(b, ordering) for b in batches)


def _aggregates(batch: pa.RecordBatch, ordering: Sequence[str]) -> dict[int, dict[str, Any]]:
    import pyarrow.compute as pc

    from cdc.layout import PARTITION

    parts = batch.column(PARTITION)
    found = pc.unique(parts).to_pylist()
    if len(found) == 1:
        return {int(found[0]): _partition_aggregates(batch, ordering)}
    return {int(p): _partition_aggregates(batch.filter(pc.equal(parts, p)), ordering) for p in found}


def _partition_aggregates(rows: pa.RecordBatch, ordering: Sequence[str]) -> dict[str, Any]:
    """The aggregates of one partition's rows."""
    import pyarrow.compute as pc

    from cdc.layout import KIND, NEW_KEY, OLD_KEY, OP, SERVER_ID, UNAVAILABLE

    def count(mask: pa.Array) -> int:
        return int(pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0)

    kind = _column(rows, KIND)
    change = pc.fill_null(pc.equal(kind, "change"), False)
    needed = [c for c in (OP, SERVER_ID, OLD_KEY, NEW_KEY, *ordering) if c in rows.schema.names]
    changes = rows.select(needed).filter(change)  # only the columns counted: no copy of the row images
    op = _column(changes, OP)
    unavailable = _column(rows, UNAVAILABLE)
    servers = _column(changes, SERVER_ID)
    return {
        "n": rows.num_rows, "s": count(pc.is_in(kind, pa.array(SKIPPED))), "e": count(pc.equal(kind, "error")),
        "u": pc.unique(pc.list_flatten(unavailable)).to_pylist() if unavailable.null_count < len(unavailable) else [],
        "t": _newest_of(changes.filter(pc.fill_null(pc.equal(op, "t"), False)), ordering),
        "m": _newest_of(changes, ordering),
        "mo": count(pc.is_valid(_column(changes, OLD_KEY))),
        "md": count(pc.and_(pc.is_valid(_column(changes, NEW_KEY)), pc.fill_null(pc.equal(op, "d"), False))),
        "lo": [pc.min(_column(changes, c)).as_py() for c in ordering],
        "sv": set(pc.unique(servers).drop_null().to_pylist()) if servers.null_count < len(servers) else set(),
    }


def _column(rows: pa.RecordBatch, name: str) -> pa.Array:
    """A column of ``rows``; all NULL when the batch lacks it (as ``arrow_frame`` fills it for the JVM)."""
    return rows.column(name) if name in rows.schema.names else pa.nulls(rows.num_rows)


def _newest_of(rows: pa.RecordBatch, ordering: Sequence[str]) -> tuple[Any, ...] | None:
    """The largest position of ``rows`` in Spark's order of structs (field by field, a NULL field first), or None."""
    import pyarrow.compute as pc

    if not rows.num_rows:
        return None
    out = []
    for c in ordering:
        values = _column(rows, c)
        top = pc.max(values).as_py()
        out.append(top)
        if top is not None:  # else every candidate holds NULL here: all stay
            rows = rows.filter(pc.fill_null(pc.equal(values, top), False))
    return tuple(out)


def merge_aggregates(parts: Iterable[Mapping[int, Mapping[str, Any]]]) -> dict[int, dict[str, Any]]:
    """The ``aggregates`` of rows split into parts (e.g. one per read chunk), from the parts' (pure)."""
    out: dict[int, dict[str, Any]] = {}
    for part in parts:
        for p, a in part.items():
            o = out.get(p)
            if o is None:
                out[p] = {**a, "u": list(a["u"]), "lo": list(a["lo"]), "sv": set(a["sv"])}
                continue
            for k in ("n", "s", "e", "mo", "md"):
                o[k] += a[k]
            o["u"].extend(c for c in a["u"] if c not in o["u"])
            o["m"], o["t"] = _newest(o["m"], a["m"]), _newest(o["t"], a["t"])
            o["lo"] = _lowest(o["lo"], a["lo"])
            o["sv"] |= a["sv"]
    return out


def stats_of(acc: Mapping[int, Mapping[str, Any]], have: set[str]) -> BatchStats:
    """``BatchStats`` from ``aggregates`` (``have``: the staging table's columns)."""
    from cdc.layout import NEW_KEY, OLD_KEY, SERVER_ID

    return _assemble([{**a, "p": p, "sv": a["sv"] if SERVER_ID in have else None} for p, a in acc.items()],
                     {OLD_KEY, NEW_KEY} <= have)


class ChunkAggregates(AccumulatorParam):
    """A Spark accumulator of ``aggregates`` by read chunk: a chunk read twice (a task attempt run again) holds the
    same records and replaces its entry, so the sum over chunks is that of the rows staged."""

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
        a.update(b)
        return a


@dataclass(frozen=True)
class TaskCounts:
    """``batch_stats``' aggregates of a batch read by Spark tasks, counted by each task from the rows it stages, so
    no Spark job reads the staged batch again to count it (at 100k events that query took 0.5 s)."""

    accumulator: Any  # of ChunkAggregates
    ordering: tuple[str, ...]

    def counted(self, chunk: Chunk, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """In the task: ``batches`` (the chunk's staging rows) passed on; their aggregates added once all are read."""
        acc: dict[int, dict[str, Any]] = {}
        for b in batches:
            acc = merge_aggregates([acc, aggregates([b], self.ordering)])
            yield b
        self.accumulator.add({astuple(chunk): acc})

    def stats(self, spark: Any, chunks: Sequence[Chunk], staging: str, have: set[str]) -> BatchStats | None:
        """In the driver, after the write: the batch's stats, or None (then ``batch_stats`` counts the staged rows)
        unless every chunk reported and their rows are exactly those the staging write committed (its snapshot's
        ``added-records``; nothing read also means nothing committed, and an earlier attempt's rows may remain)."""
        from cdc.tables import added_records

        found = self.accumulator.value
        if set(found) != {astuple(c) for c in chunks}:
            return None
        acc = merge_aggregates(found.values())
        rows = sum(a["n"] for a in acc.values())
        return stats_of(acc, have) if rows and rows == added_records(spark, staging) else None


def _assemble(groups: Sequence[Mapping[str, Any]], headers: bool) -> BatchStats:
    """``BatchStats`` from a batch's aggregates per partition, named as ``batch_stats``' query names them (``sv``:
    None when the staging table has no server ids; ``mo``, ``md``: only with ``headers``)."""
    truncates = [tuple(int(v) for v in g["t"]) for g in groups if g["t"] is not None]
    return BatchStats(
        partitions={int(g["p"]): PartitionCounts(int(g["p"]), int(g["n"]), int(g["s"]), int(g["e"]),
                                                 tuple(int(v) for v in g["m"]) if g["m"] is not None else None,
                                                 tuple(None if v is None else int(v) for v in g["lo"]),
                                                 tuple(sorted(g["sv"])) if g["m"] is not None and g["sv"] is not None
                                                 else None)
                    for g in groups},
        toast_columns=tuple(sorted({c for g in groups for c in (g["u"] or [])})),
        truncate=max(truncates) if truncates else None,
        moves=(sum(g["mo"] for g in groups), sum(g["md"] for g in groups)) if headers else None,
    )


def record_dead_letters(spark: Any, names: TableNames, pipeline: str, table: str, batch_id: int) -> None:
    """Copy the batch's bad records to the dead-letter table (idempotent on topic/partition/offset)."""
    src = (f"SELECT {lit(pipeline)} AS pipeline, {lit(table)} AS table_name, batch_id, __topic AS topic, "
           f"__partition AS `partition`, __offset AS `offset`, __raw_key AS key, __raw_value AS value, "
           f"__error_class AS error_class, __error AS error_message, current_timestamp() AS created_at "
           f"FROM {names.staging} WHERE batch_id = {int(batch_id)} AND __kind = 'error'")
    spark.sql(
        f"MERGE INTO {names.dead_letters} d USING ({src}) s ON d.table_name = s.table_name AND d.topic = s.topic "
        "AND d.`partition` = s.`partition` AND d.`offset` = s.`offset` WHEN NOT MATCHED THEN INSERT *")


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
    from cdc import evolution

    found = spark.sql(
        f"SELECT min(struct(__partition, __offset, __raw_key, __raw_value)) AS r FROM {staging} "
        f"WHERE batch_id = {int(batch_id)} AND __error_class = 'UnboundColumns' GROUP BY __error").collect()
    cols = list(row_cols)
    for p, o, k, v in (r["r"] for r in found):
        try:
            own = decoder.record_columns(k and bytes(k), v and bytes(v), cols)
            cols = evolution.plan(cols, own or [], table.allow_field_addition).columns
        except evolution.Incompatible as exc:
            raise evolution.evolution_error(table.target, table.topic, exc, (p, o)) from None
    if found and cols == list(row_cols):  # nothing to add or widen: staging again would not help
        p, o = found[0]["r"][:2]
        raise BadRecordError(
            f"table {table.target}: topic {table.topic} partition {p} offset {o}: the record has columns the "
            "batch schema lacks and they cannot be added (see its dead letter reason); check the record's schema "
            "and allow_field_addition for this table, then rerun")
    return cols if found else None
