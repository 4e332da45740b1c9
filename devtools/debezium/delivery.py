"""Delivery imperfections, a reference replay, and Kafka producer helpers.

Kafka + Debezium guarantee per-partition order and at-least-once delivery,
nothing more. The functions here turn a clean generator stream into what a
sink can really see, without touching the records themselves (every record
keeps its original source position, which is what a correct sink orders by):

* :func:`redeliver` - a connector restart re-emits a contiguous window of
  already-sent events (duplicates arrive *after* newer events);
* :func:`interleave` - random merge of partitions (per-partition order kept);
* :func:`move_later` - adversarial: some events arrive later than newer events
  for the same key (stronger than Kafka allows; tests position-based merging).

:func:`replay` is an independent consumer-side oracle: it rebuilds the table
from records alone, ordering by source position, so tests can check that the
generator's own state (``expected_rows``) agrees with what its output says.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

from .model import TOAST_PLACEHOLDER, Record, Row, TableSchema, partition_for
from .serializers import RecordSerializer


def redeliver(records: Sequence[Record], rng: random.Random, restarts: int = 1, max_window: int = 20) -> list[Record]:
    """Simulate ``restarts`` connector restarts: after a random cut, re-emit the preceding window."""
    out = list(records)
    for _ in range(restarts):
        if len(out) < 2:
            break
        cut = rng.randrange(1, len(out))
        window = out[max(0, cut - rng.randint(1, max_window)) : cut]
        out[cut:cut] = window
    return out


def interleave(records: Sequence[Record], rng: random.Random) -> list[Record]:
    """A random global order that keeps each partition's order (what a multi-partition reader sees)."""
    queues: dict[int, list[Record]] = {}
    for rec in records:
        queues.setdefault(rec.partition, []).append(rec)
    heads = {p: 0 for p in queues}
    out: list[Record] = []
    live = [p for p in queues if queues[p]]
    while live:
        p = rng.choice(live)
        out.append(queues[p][heads[p]])
        heads[p] += 1
        if heads[p] == len(queues[p]):
            live.remove(p)
    return out


def move_later(
    records: Sequence[Record], rng: random.Random, fraction: float = 0.05, max_shift: int = 50
) -> list[Record]:
    """Move a ``fraction`` of records up to ``max_shift`` places later (positions unchanged)."""
    out = list(records)
    for i in sorted(rng.sample(range(len(out)), int(len(out) * fraction)), reverse=True):
        rec = out.pop(i)
        out.insert(min(len(out), i + rng.randint(1, max_shift)), rec)
    return out


def compact_deletes(records: Sequence[Record], rng: random.Random, fraction: float = 0.7) -> list[Record]:
    """Drop delete events that their tombstone directly follows, as Kafka log compaction may
    (``cleanup.policy=compact`` keeps only a key's newest record: the tombstone). Deletes of a primary-key change
    (a create at the same position) are kept: the create's unchanged TOAST values come from them."""
    creates_at = {r.position for r in records if r.op == "c"}
    out: list[Record] = []
    for i, r in enumerate(records):
        nxt = records[i + 1] if i + 1 < len(records) else None
        if (r.op == "d" and r.position not in creates_at and nxt is not None and nxt.is_tombstone
                and nxt.key == r.key and nxt.partition == r.partition and rng.random() < fraction):
            continue
        out.append(r)
    return out


def replay(records: Iterable[Record]) -> dict[Any, Row]:
    """Rebuild the final table from records only (the reference sink).

    Rules: order by source position (stable, so duplicates are idempotent);
    ``c``/``r``/``u`` upsert ``after`` (TOAST placeholders keep the previous
    value: of the key itself, or for the ``c`` of a primary-key change, of the key deleted at the same position);
    ``d`` removes the key; ``t`` empties the table; tombstones are no-ops;
    columns added by a schema change read as null in rows written before it.
    A record older than the last one applied for its key is ignored, which
    also absorbs redeliveries.
    """
    state: dict[Any, Row] = {}
    last_pos: dict[Any, tuple[int, ...]] = {}
    deleted_at: dict[tuple[int, ...], Row] = {}  # position → the row a delete there removed (PK changes)
    newest: TableSchema | None = None
    for rec in sorted((r for r in records if r.value is not None), key=lambda r: r.position):
        if newest is None or rec.table.version > newest.version:
            newest = rec.table
        op = rec.value["op"]  # type: ignore[index]
        if op == "t":
            state.clear()
            continue
        pk = rec.table.pk_of(rec.key)  # type: ignore[arg-type]
        if pk in last_pos and last_pos[pk] > rec.position:
            continue
        last_pos[pk] = rec.position
        if op == "d":
            gone = state.pop(pk, None)
            if gone is not None:
                deleted_at[rec.position] = gone
            continue
        after = dict(rec.value["after"])  # type: ignore[index]
        previous = state.get(pk) or (deleted_at.get(rec.position, {}) if op == "c" else {})
        for name, value in after.items():
            if value == TOAST_PLACEHOLDER:
                after[name] = previous.get(name)
        state[pk] = after
    if newest is not None:  # rows untouched since an ADD COLUMN read the new column as null
        names = [c.name for c in newest.columns]
        state = {pk: {n: row.get(n) for n in names} for pk, row in state.items()}
    return state


def _producer(bootstrap: str, extra: dict[str, Any] | None) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": "none",
        "acks": "all",
        # Without idempotence a retry can reorder a partition; Debezium's producer is ordered too.
        "max.in.flight.requests.per.connection": 1,
    }
    conf.update(extra or {})
    return Producer(conf)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    serializer: RecordSerializer,
    partitions: int | None = None,
    config: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> int:
    """Serialise and produce records with explicit partitions; flush and fail loudly on any delivery error.

    ``partitions`` re-hashes keys for a topic whose partition count differs
    from the generator's (truncate still goes to 0). Returns the count produced.
    """
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = _producer(bootstrap, config)
    count = 0
    for rec in records:
        key, value = serializer.serialize(rec)
        partition = rec.partition if partitions is None else partition_for(rec.key, partitions)
        headers = [(name, serializer.serialize(Record(k, None, rec.partition, rec.table, rec.position))[0])
                   for name, k in rec.headers] or None  # header keys serialised like message keys
        _produce_one(producer, topic, key, value, partition, on_delivery, headers)
        count += 1
    if producer.flush(timeout) != 0:
        raise TimeoutError(f"{len(producer)} messages still undelivered after {timeout}s")
    if errors:
        raise KafkaException(f"{len(errors)} delivery errors, first: {errors[0]}")
    return count


def _produce_one(
    producer: Producer, topic: str, key: bytes | None, value: bytes | None, partition: int, cb: Any = None,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, partition=partition, on_delivery=cb, headers=headers)
            return
        except BufferError:  # local queue full: let librdkafka drain
            producer.poll(0.05)


def produce_fast(
    bootstrap: str,
    topic: str,
    items: Iterable[tuple[bytes | None, bytes | None, int]],
    config: dict[str, Any] | None = None,
    timeout: float = 120.0,
) -> tuple[int, float]:
    """Benchmark path: produce pre-serialised ``(key, value, partition)`` tuples in a tight loop.

    No per-message callback: a delivery failure surfaces as a failed flush
    (with the client errors seen). Returns (count, seconds). Pre-serialise outside the timed
    region, e.g. ``items = [(*ser.serialize(r), r.partition) for r in records]``.
    """
    errors: list[str] = []
    conf = {"linger.ms": 100, "error_cb": lambda err: errors.append(str(err)), **(config or {})}
    producer = _producer(bootstrap, conf)
    produce_ = producer.produce
    start = time.perf_counter()
    count = 0
    for key, value, partition in items:
        try:
            produce_(topic, value, key, partition)
        except BufferError:
            _produce_one(producer, topic, key, value, partition)
        count += 1
        if count & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(timeout)
    elapsed = time.perf_counter() - start
    if remaining:
        raise TimeoutError(f"{remaining} messages undelivered after {timeout}s; client errors: {errors[:3]}")
    return count, elapsed
