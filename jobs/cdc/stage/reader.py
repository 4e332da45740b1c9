"""Spark tasks that read one offset chunk each and yield staging rows as Arrow record batches.

A chunk is ``[start, end)`` of one partition. The task assigns the partition at ``start`` (no consumer group, no
Kafka commits) and stops exactly at ``end``: at the first record with offset >= end - 1, or at end-of-partition
past ``end`` (offsets may be missing inside the range: compaction, transaction markers). Memory is bounded by
``ROWS_PER_BATCH`` rows per yielded batch, not by the range.

Every record becomes one staging row: change events with their decoded row image, skipped kinds (tombstones,
op ``m``, transaction markers) with only metadata, and undecodable records as ``__kind = 'error'`` with raw bytes and
the reason (dead letters). With ``on_bad_record: fail`` a bad record fails the task with ``BadRecordError`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from cdc.common.errors import BadRecordError, CdcError, DecodeError, OrderingError, UnboundColumns
from cdc.decode.avro import AvroDecoder
from cdc.decode.avro_batch import stage_avro
from cdc.decode.base import Decoder
from cdc.decode.model import CHANGE, TOMBSTONE
from cdc.kafka.consume import consume_range
from cdc.kafka.offsets import new_consumer
from cdc.kafka.plan import OffsetRange
from cdc.positions.ordering import SNAPSHOT_AT_ONE_POSITION, Ordering
from cdc.positions.regression import server_identity
from cdc.schema.columns import (
    ERROR,
    ERROR_CLASS,
    KAFKA_TS_MS,
    KIND,
    OFFSET,
    OP,
    PARTITION,
    RAW_KEY,
    RAW_VALUE,
    SERVER_ID,
    SNAPSHOT_END,
    SNAPSHOT_END_MARKS,
    SOURCE_TS_MS,
    TOPIC,
    TS_MS,
    UNAVAILABLE,
    Column,
    arrow_schema,
)
from cdc.stage import headers

ROWS_PER_BATCH = 10_000


@dataclass(frozen=True)
class ReadSpec:
    """Everything a task needs; pickled into the Spark closure (no sockets inside)."""

    table: str
    kafka_conf: dict[str, Any]
    decoder: Decoder
    ordering: Ordering
    key: tuple[str, ...]
    row_columns: tuple[Column, ...]
    staging_columns: tuple[Column, ...]
    batch_id: int
    on_bad_record: str = "dead_letter"
    timeout_seconds: float = 60.0
    fast_avro: bool = True  # vectorised Avro decoding where it applies (see cdc.decode.avro_batch)
    max_record_bytes: int = 0  # records whose key + value exceed this are bad records (0: no limit)
    compacted: bool = False  # compacted topic: Kafka tombstones are staged with their key columns (cdc.merge)


class _Rows:
    """Column buffers for one Arrow batch of staging rows."""

    def __init__(self, spec: ReadSpec):
        self.spec = spec
        self.schema = arrow_schema(spec.staging_columns)
        self.names = [c.name for c in spec.staging_columns]
        self.row_names = [c.name for c in spec.row_columns]
        self.reset()

    def reset(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.raw: list[tuple[bytes | None, bytes | None]] = []  # the record's bytes, for rows that turn into errors

    def add(self, values: dict[str, Any], key: bytes | None = None, value: bytes | None = None) -> None:
        self.rows.append(values)
        self.raw.append((key, value))

    def __len__(self) -> int:
        return len(self.rows)

    def to_batch(self) -> pa.RecordBatch:
        """Build the batch; rows whose values do not fit the column types become error rows (found row by row)."""
        try:
            return self._build(self.rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            fixed = [self._check(r, raw) for r, raw in zip(self.rows, self.raw)]
            return self._build(fixed)

    def _build(self, rows: Sequence[dict[str, Any]]) -> pa.RecordBatch:
        arrays = [pa.array([r.get(f.name) for r in rows], type=f.type) for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _check(self, row: dict[str, Any], raw: tuple[bytes | None, bytes | None] = (None, None)) -> dict[str, Any]:
        for f in self.schema:
            try:
                pa.array([row.get(f.name)], type=f.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
                reason = f"column {f.name}: value {row.get(f.name)!r:.80} does not fit type {f.type} ({exc})"
                return _error_row(self.spec, {**row, RAW_KEY: raw[0], RAW_VALUE: raw[1]}, "TypeMismatch",
                                  reason)
        return row


def _error_row(spec: ReadSpec, row: dict[str, Any], error_class: str, reason: str) -> dict[str, Any]:
    if spec.on_bad_record == "fail":
        raise BadRecordError(
            f"table {spec.table}: topic {row[TOPIC]} partition {row[PARTITION]} offset {row[OFFSET]}: "
            f"{reason}. Fix the producer/schema, or set on_bad_record: dead_letter for this table to divert bad "
            "records to the dead-letter table and continue")
    keep = {k: row[k] for k in ("batch_id", TOPIC, PARTITION, OFFSET, KAFKA_TS_MS, RAW_KEY, RAW_VALUE)}
    return {**keep, KIND: "error", ERROR_CLASS: error_class, ERROR: reason[:2000]}


def stage_record(spec: ReadSpec, topic: str, partition: int, offset: int, ts_ms: int | None,
                 key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """One Kafka record → one staging row (pure apart from the decoder's cached registry lookups)."""
    base = {"batch_id": spec.batch_id, TOPIC: topic, PARTITION: partition, OFFSET: offset,
            KAFKA_TS_MS: ts_ms, RAW_KEY: key, RAW_VALUE: value}
    try:
        ev = spec.decoder.decode(key, value)
        if ev.kind != CHANGE:
            row = {**base, KIND: ev.kind, OP: ev.op, RAW_KEY: None, RAW_VALUE: None}
            if ev.kind == TOMBSTONE and spec.compacted and ev.key:
                row.update({k: ev.key.get(k) for k in spec.key})
            return row
        row: dict[str, Any] = {**base, KIND: CHANGE, OP: ev.op, SOURCE_TS_MS: ev.source.get("ts_ms"),
                               TS_MS: ev.ts_ms, SERVER_ID: server_identity(ev.source.get("server_id")),
                               SNAPSHOT_END: ev.op == "r" and ev.source.get("snapshot") in SNAPSHOT_END_MARKS
                               and spec.ordering.kind in SNAPSHOT_AT_ONE_POSITION,
                               UNAVAILABLE: list(ev.unavailable) or None, RAW_KEY: None, RAW_VALUE: None}
        position = spec.ordering.position(ev.source, ev.ts_ms, ev.op, partition, offset)
        row.update(zip(spec.ordering.columns, position))
        if ev.op != "t":
            image = ev.row or {}
            keyvals = ev.key or {}
            for c in spec.row_columns:
                row[c.name] = image.get(c.name)
            for k in spec.key:
                if row.get(k) is None:
                    row[k] = keyvals.get(k)
                if row.get(k) is None:
                    raise DecodeError(f"key field {k!r} is missing or null in the {ev.op!r} event (and in the "
                                      "message key); check primary_key in the pipeline YAML")
        return row
    except (DecodeError, OrderingError) as exc:
        if isinstance(exc, UnboundColumns):  # never fatal here: cdc.run widens the batch schema and stages again
            spec = replace(spec, on_bad_record="dead_letter")
        return _error_row(spec, base, type(exc).__name__, str(exc))


def record_too_large(spec: ReadSpec, topic: str, partition: int, offset: int, ts_ms: int | None,
                     key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """The error row for a record over ``spec.max_record_bytes`` (not decoded: its bytes go to the dead letter)."""
    size = len(key or b"") + len(value or b"")
    if not spec.max_record_bytes or size <= spec.max_record_bytes:
        return None
    base = {"batch_id": spec.batch_id, TOPIC: topic, PARTITION: partition, OFFSET: offset,
            KAFKA_TS_MS: ts_ms, RAW_KEY: key, RAW_VALUE: value}
    return _error_row(spec, base, "RecordTooLarge",
                      f"record of {size} bytes (key + value) exceeds max_record_bytes = {spec.max_record_bytes}; "
                      "raise tables[].max_record_bytes if such rows are legitimate")


def stage_messages(spec: ReadSpec, topic: str, partition: int, msgs: list[tuple[int, int | None, Any, Any]],
                   rows: "_Rows | None" = None) -> Iterator[pa.RecordBatch]:
    """Staging batches for consecutive records of one partition: the vectorised Avro path where it applies
    (``cdc.decode.avro_batch``), the exact per-record path for everything else. Oversized records become
    ``RecordTooLarge`` error rows without being decoded."""
    rows = rows or _Rows(spec)
    if spec.max_record_bytes:
        fits = []
        for m in msgs:
            err = record_too_large(spec, topic, partition, *m)
            if err is None:
                fits.append(m)
            else:
                rows.add(err, m[2], m[3])
        msgs = fits
    left = msgs
    if spec.fast_avro and isinstance(spec.decoder, AvroDecoder) and spec.decoder.vectorised:
        batches, left = stage_avro(spec, topic, partition, msgs, rows.schema)
        yield from batches
    for off, ts, key, value in left:
        rows.add(stage_record(spec, topic, partition, off, ts, key, value), key, value)
    if len(rows):
        yield rows.to_batch()
        rows.reset()


def read_chunk(spec: ReadSpec, chunk: OffsetRange, consumer: Any | None = None) -> Iterator[pa.RecordBatch]:
    """Read ``[chunk.start, chunk.end)`` and yield staging rows in Arrow batches."""

    if chunk.end <= chunk.start:
        return
    own = consumer is None
    consumer = consumer or new_consumer(spec.kafka_conf, **{"auto.offset.reset": "error"})
    rows = _Rows(spec)
    where = f"table {spec.table}: topic {chunk.topic} partition {chunk.partition}"
    try:
        pending: list[tuple[int, int | None, Any, Any]] = []
        moves: dict[int, dict[str, bytes]] = {}  # offset -> PK-move headers (cdc.stage.headers)
        for msgs in consume_range(consumer, chunk.topic, chunk.partition, chunk.start, chunk.end,
                                  spec.timeout_seconds, where):
            for msg in msgs:
                ts_type, ts = msg.timestamp()
                pending.append((msg.offset(), ts if ts_type else None, msg.key(), msg.value()))
                headers.note(moves, msg.offset(), msg.headers())
            if len(pending) >= ROWS_PER_BATCH:
                yield from headers.fill(spec, stage_messages(spec, chunk.topic, chunk.partition, pending, rows), moves)
                pending, moves = [], {}
        if pending:
            yield from headers.fill(spec, stage_messages(spec, chunk.topic, chunk.partition, pending, rows), moves)
    finally:
        if own:
            consumer.close()


def map_chunks(spec: ReadSpec, counted: Callable[[OffsetRange, Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
               | None = None):  # type: ignore[no-untyped-def]
    """The function for ``DataFrame.mapInArrow``: input rows are chunks (topic, partition, start, end). ``counted``
    (``cdc.stage.stats.TaskCounts.counted``) sees each chunk's batches on their way out."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for c in b.to_pylist():
                chunk = OffsetRange(c["topic"], c["partition"], c["start"], c["end"])
                try:
                    out = read_chunk(spec, chunk)
                    yield from (out if counted is None else counted(chunk, out))
                except CdcError as exc:  # re-raised in the driver by class name; see cdc.run.outcome.unwrap_task_error
                    raise RuntimeError(f"[cdc:{type(exc).__name__}] {exc}") from None

    return run

