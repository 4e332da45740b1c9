"""What one pass over a staged batch tells (``BatchStats``): counts per partition, newest positions, TOAST
columns, truncates, primary-key moves. Counted by the read tasks themselves (Arrow compute, ``TaskCounts``) or by
one query of the staged rows (``batch_stats``, the definition)."""

from __future__ import annotations

from dataclasses import astuple, dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam

from cdc.common.sql import lit, q
from cdc.decode.model import SKIPPED_KINDS
from cdc.iceberg.tables import added_records
from cdc.kafka.plan import OffsetRange
from cdc.schema.columns import KIND, NEW_KEY, OLD_KEY, OP, PARTITION, SERVER_ID, SNAPSHOT_END, UNAVAILABLE


@dataclass(frozen=True)
class PartitionCounts:
    partition: int
    events_read: int
    events_skipped: int
    dead_letters: int
    max_position: tuple[int, ...] | None = None  # newest source position among the partition's change events
    min_columns: tuple[int | None, ...] | None = None  # each ordering column's lowest value among them (cdc.positions.regression)
    server_ids: tuple[str, ...] | None = None  # its change events' server ids (None: no changes; cdc.positions.regression)


@dataclass(frozen=True)
class BatchStats:
    """What one pass over a staged batch tells: counts per partition, TOAST columns seen, newest truncate."""

    partitions: dict[int, PartitionCounts]
    toast_columns: tuple[str, ...]
    truncate: tuple[int, ...] | None
    # (changes with an old-key header, deletes with a new-key header): the batch's primary-key moves (cdc.merge.pk_moves);
    # None when the staging table has no header columns
    moves: tuple[int, int] | None = None
    # Arrow bytes of the staged rows when the driver read the batch (so its changes fit in the driver: cdc.merge.target_write);
    # None when Spark tasks read it or the staged rows were counted. Where the stats came from, not what they say:
    # not compared (stats counted from the rows in hand equal those counted by the query)
    driver_bytes: int | None = field(default=None, compare=False)
    # the newest position of a read that ends a snapshot (SNAPSHOT_END), None: no snapshot ended in the batch
    snapshot_end: tuple[int, ...] | None = None

    @property
    def events_read(self) -> int:
        return sum(c.events_read for c in self.partitions.values())

    @property
    def dead_letters(self) -> int:
        return sum(c.dead_letters for c in self.partitions.values())


def batch_stats(spark: Any, staging: str, batch_id: int, ordering: Sequence[str]) -> BatchStats:
    skipped = ", ".join(lit(k) for k in SKIPPED_KINDS)
    position = "named_struct(" + ", ".join(f"'o{i}', {q(c)}" for i, c in enumerate(ordering)) + ")"
    lowest = "array(" + ", ".join(f"min(IF({q(KIND)} = 'change', CAST({q(c)} AS BIGINT), NULL))"
                                  for c in ordering) + ")"

    have = {f.name for f in spark.table(staging).schema.fields}
    headers = {OLD_KEY, NEW_KEY} <= have
    servers = f"collect_set(IF({q(KIND)} = 'change', {q(SERVER_ID)}, NULL))" if SERVER_ID in have \
        else "CAST(NULL AS ARRAY<STRING>)"  # staged before server ids were
    ends = (f"max(IF({q(KIND)} = 'change' AND {q(SNAPSHOT_END)}, {position}, NULL))" if SNAPSHOT_END in have
            else "CAST(NULL AS STRING)")  # staged before snapshot ends were
    moves = (f"count_if({q(KIND)} = 'change' AND {q(OLD_KEY)} IS NOT NULL) AS mo, "
             f"count_if({q(KIND)} = 'change' AND {q(NEW_KEY)} IS NOT NULL AND {q(OP)} = 'd') AS md, "
             ) if headers else ""
    rows = spark.sql(
        f"SELECT {q(PARTITION)} AS p, count(*) AS n, sum(IF({q(KIND)} IN ({skipped}), 1, 0)) AS s, "
        f"sum(IF({q(KIND)} = 'error', 1, 0)) AS e, array_distinct(flatten(collect_list({q(UNAVAILABLE)}))) AS u, "
        f"max(IF({q(KIND)} = 'change' AND {q(OP)} = 't', {position}, NULL)) AS t, "
        f"max(IF({q(KIND)} = 'change', {position}, NULL)) AS m, "
        f"{moves}{lowest} AS lo, {servers} AS sv, {ends} AS se "
        f"FROM {staging} WHERE batch_id = {int(batch_id)} GROUP BY {q(PARTITION)}"
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


    parts = batch.column(PARTITION)
    found = pc.unique(parts).to_pylist()
    if len(found) == 1:
        return {int(found[0]): _partition_aggregates(batch, ordering)}
    return {int(p): _partition_aggregates(batch.filter(pc.equal(parts, p)), ordering) for p in found}


def _partition_aggregates(rows: pa.RecordBatch, ordering: Sequence[str]) -> dict[str, Any]:
    """The aggregates of one partition's rows."""
    import pyarrow.compute as pc


    def count(mask: pa.Array) -> int:
        return int(pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0)

    kind = _column(rows, KIND)
    change = pc.fill_null(pc.equal(kind, "change"), False)
    needed = [c for c in (OP, SERVER_ID, SNAPSHOT_END, OLD_KEY, NEW_KEY, *ordering) if c in rows.schema.names]
    changes = rows.select(needed).filter(change)  # only the columns counted: no copy of the row images
    op = _column(changes, OP)
    unavailable = _column(rows, UNAVAILABLE)
    servers = _column(changes, SERVER_ID)
    return {
        "n": rows.num_rows, "s": count(pc.is_in(kind, pa.array(SKIPPED_KINDS))), "e": count(pc.equal(kind, "error")),
        "u": pc.unique(pc.list_flatten(unavailable)).to_pylist() if unavailable.null_count < len(unavailable) else [],
        "t": _newest_of(changes.filter(pc.fill_null(pc.equal(op, "t"), False)), ordering),
        "m": _newest_of(changes, ordering),
        "se": _newest_of(changes.filter(pc.fill_null(changes.column(SNAPSHOT_END), False)), ordering)
        if SNAPSHOT_END in changes.schema.names else None,
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
            o["m"], o["t"], o["se"] = _newest(o["m"], a["m"]), _newest(o["t"], a["t"]), _newest(o["se"], a["se"])
            o["lo"] = _lowest(o["lo"], a["lo"])
            o["sv"] |= a["sv"]
    return out


def stats_of(acc: Mapping[int, Mapping[str, Any]], have: set[str]) -> BatchStats:
    """``BatchStats`` from ``aggregates`` (``have``: the staging table's columns)."""

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

    def counted(self, chunk: OffsetRange, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """In the task: ``batches`` (the chunk's staging rows) passed on; their aggregates added once all are read."""
        acc: dict[int, dict[str, Any]] = {}
        for b in batches:
            acc = merge_aggregates([acc, aggregates([b], self.ordering)])
            yield b
        self.accumulator.add({astuple(chunk): acc})

    def stats(self, spark: Any, chunks: Sequence[OffsetRange], staging: str, have: set[str]) -> BatchStats | None:
        """In the driver, after the write: the batch's stats, or None (then ``batch_stats`` counts the staged rows)
        unless every chunk reported and their rows are exactly those the staging write committed (its snapshot's
        ``added-records``; nothing read also means nothing committed, and an earlier attempt's rows may remain)."""

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
    ends = [tuple(int(v) for v in g["se"]) for g in groups if g.get("se") is not None]
    return BatchStats(
        partitions={int(g["p"]): PartitionCounts(int(g["p"]), int(g["n"]), int(g["s"]), int(g["e"]),
                                                 tuple(int(v) for v in g["m"]) if g["m"] is not None else None,
                                                 tuple(None if v is None else int(v) for v in g["lo"]),
                                                 tuple(sorted(g["sv"])) if g["m"] is not None and g["sv"] is not None
                                                 else None)
                    for g in groups},
        toast_columns=tuple(sorted({c for g in groups for c in (g["u"] or [])})),
        truncate=max(truncates) if truncates else None,
        snapshot_end=max(ends) if ends else None,
        moves=(sum(g["mo"] for g in groups), sum(g["md"] for g in groups)) if headers else None,
    )
