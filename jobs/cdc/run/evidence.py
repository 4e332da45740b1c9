"""Which records of a batch may decide its table's key, write mode and ordering (``cdc.run.schema``).

A change event with a row image (op c, u, d, r) does: its Kafka key is the table's default primary key, its
connector names the ordering, and on a table configured keyless a change without a key makes it append-only. A
record without a row decides nothing: a Kafka tombstone, a TRUNCATE (Debezium: op ``t``, always a null Kafka key,
though its value schema shows the table's columns), a logical decoding message, a transaction or heartbeat event.

When no sampled record decides, the batch is read (``scan``) up to the first that does. A batch of only records that
decide nothing into a table that does not exist yet creates nothing (``Idle``: committed without a read or a write,
``TableRun.commit_idle``). Its truncates still act: they delete nothing (there is no table), but the newest one's
position is the batch's truncate barrier in the ledger (``truncate_barrier``; ``Ledger.barrier``), so a change older
than it that a later batch brings (another partition, a redelivery) is dropped as truncated, as it would be had the
table existed. Such a batch's truncates are not rows of an append (changelog) table: there was no table to log them to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cdc.common.errors import CdcError
from cdc.decode.base import Decoder, Sample
from cdc.decode.model import CHANGE, Event
from cdc.kafka.consume import consume_range
from cdc.kafka.offsets import new_consumer
from cdc.kafka.plan import OffsetRange
from cdc.positions.ordering import resolve


@dataclass(frozen=True)
class Idle:
    """A batch that decides nothing about a table that does not exist (or, of only tombstones, has no known key):
    per partition its records and those skipped (all but its truncates), and the newest truncate's position (the
    source ordering's, without an epoch: ``cdc.schema.columns.align`` puts it in epoch 0)."""

    records: dict[int, int]
    skipped: dict[int, int]
    barrier: tuple[int, ...] | None = None

    @property
    def truncates(self) -> int:
        return sum(self.records.values()) - sum(self.skipped.values())


class Evidence:
    """Tells the records that decide (``decides``) from those that do not. ``decoder``: the plan's; ``probe``: a
    decoder of the same table used only here, unbound (each record is decoded with its own schema), so telling a
    truncate from a change binds nothing the plan uses. ``unkeyed``: a change without a Kafka key decides too (the
    table's ``primary_key`` is configured, or it may be keyless: no ``primary_key``, write mode append or unset)."""

    def __init__(self, decoder: Decoder, probe: Decoder, unkeyed: bool):
        self.decoder, self.probe, self.unkeyed = decoder, probe, unkeyed

    def event(self, key: bytes | None, value: bytes | None) -> Event | None:
        """The record decoded (None: it cannot be)."""
        try:
            return self.probe.decode(key, value)
        except CdcError:
            return None

    def decides(self, key: bytes | None, value: bytes | None) -> bool:
        """A change with a row image whose schema shows the row's columns, with a Kafka key (or, ``unkeyed``,
        without)."""
        if value is None or (key is None and not self.unkeyed) or not self.decoder.record_columns(key, value):
            return False
        ev = self.event(key, value)
        return ev is not None and is_row_change(ev)


def is_row_change(ev: Event) -> bool:
    return ev.kind == CHANGE and ev.op != "t"


def scan(kafka_conf: Mapping[str, Any], ranges: Sequence[OffsetRange], evidence: Evidence, ordering: Any,
         table: str, timeout: float = 10.0) -> Sample | Idle:
    """Read the ranges (partitions in order) up to the first record that decides, and return it; also the first
    record that cannot be told (undecodable, or a change without a key on a keyed table: the batch is planned from it
    and staged as before, where it is judged). Else the batch's ``Idle``; ``ordering``: ``tables[].ordering`` (for
    the truncates' positions). A partition that stalls for ``timeout`` seconds raises ``KafkaUnavailable`` (the
    answer must be whole)."""
    consumer = new_consumer(kafka_conf, **{"auto.offset.reset": "earliest"})
    records: dict[int, int] = {}
    skipped: dict[int, int] = {}
    truncates: list[Event] = []
    try:
        for r in sorted(ranges, key=lambda r: r.partition):
            where = f"topic {r.topic} partition {r.partition}: looking for a change event with a row"
            for msgs in consume_range(consumer, r.topic, r.partition, r.start, r.end, timeout, where, batch=1000):
                for msg in msgs:
                    k, v = msg.key(), msg.value()
                    ev = None if v is None else evidence.event(k, v)
                    if v is not None and (ev is None or is_row_change(ev)):
                        return k, v
                    records[r.partition] = records.get(r.partition, 0) + 1
                    if ev is not None and ev.kind == CHANGE and ev.op == "t":
                        truncates.append(ev)
                    else:  # a tombstone, a message, a transaction or heartbeat event
                        skipped[r.partition] = skipped.get(r.partition, 0) + 1
    finally:
        consumer.close()
    return Idle(records, skipped, truncate_barrier(truncates, ordering, table))


def truncate_barrier(truncates: Sequence[Event], setting: Any, table: str) -> tuple[int, ...] | None:
    """The newest truncate's source position (``tables[].ordering``, else its connector's ordering)."""
    if not truncates:
        return None
    ordering = resolve(setting, truncates[-1].source.get("connector"), table)
    return max(ordering.values(ev.source, ev.ts_ms, ev.op) for ev in truncates)
