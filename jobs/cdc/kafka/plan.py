"""Offset ranges of a batch: where each partition starts and ends, split into chunks for Spark tasks.

One range type (``OffsetRange``) travels from the plan to the ledger: a batch's ranges, the chunks one Spark task
each reads, and (with their counts, ``cdc.ledger.state.LedgerRange``) the ledger's rows.

Incremental: start = end of the last committed incremental batch (or the low watermark for a new table), end = the
high watermark (see ``cdc.kafka.offsets``) capped at ``max_records_per_partition``. Backfill: explicit start/end
offsets or timestamps per partition. The planner also reads a few of the newest records of each range as *samples*:
they carry the newest embedded schema (JSON) and the connector name (for ``ordering: auto``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from cdc.common.cli_contract import Bounds
from cdc.common.errors import ConfigError, KafkaUnavailable, TerminalError
from cdc.kafka.consume import consume_range, read_raw
from cdc.kafka.offsets import new_consumer, offsets_for_time, partitions, watermarks


@dataclass(frozen=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition of a topic."""

    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def summary(self) -> dict[str, int]:
        """As the job's JSON summary shows it (the topic is the table's)."""
        return {"partition": self.partition, "start": self.start, "end": self.end}


SAMPLE_WINDOWS = (5, 200, 2000)


def cap_ranges(topic: str, starts: Mapping[int, int], ends: Mapping[int, int], max_records: int
               ) -> list[OffsetRange]:
    """Pure: ``[start, min(end, start + max_records))`` per partition."""
    return [OffsetRange(topic, p, starts[p], max(starts[p], min(ends[p], starts[p] + max_records)))
            for p in sorted(ends)]


def split_chunks(ranges: Sequence[OffsetRange], chunk_size: int) -> list[OffsetRange]:
    """Pure: split ranges into chunks of at most ``chunk_size`` offsets (one Spark task each)."""
    out = []
    for r in ranges:
        s = r.start
        while s < r.end:
            out.append(OffsetRange(r.topic, r.partition, s, min(r.end, s + chunk_size)))
            s += chunk_size
    return out


def plan_incremental(kafka_conf: Mapping[str, Any], table: str, topic: str, committed: Mapping[int, int],
                     max_records: int, timeout: float = 10.0) -> list[OffsetRange]:
    consumer = new_consumer(kafka_conf)
    try:
        wm = watermarks(consumer, topic, partitions(consumer, topic, timeout), timeout)
    finally:
        consumer.close()
    gone = sorted(set(committed) - set(wm))
    if gone:
        raise TerminalError(
            f"table {table}: topic {topic} has no partition(s) {gone} any more, but the ledger has a cursor for them "
            "(topic re-created with fewer partitions?). Check the topic, then re-snapshot the source table, or move "
            f"the cursor with `python jobs/ingest.py --config <pipeline.yaml> --table {table} --reset-cursor`")
    starts = {}
    for p, (low, high) in wm.items():
        start = committed.get(p, low)
        if start > high:
            raise TerminalError(
                f"table {table}: topic {topic} partition {p}: the ledger's cursor {start} is beyond the partition's "
                f"high watermark {high} (topic re-created, cluster moved, unclean leader election?); the offsets now "
                f"on the topic are not the ones the cursor counted, and reading on could skip changes. Check the "
                "topic, then either re-snapshot the source table, or move the cursor with "
                f"`python jobs/ingest.py --config <pipeline.yaml> --table {table} --reset-cursor` (restarts the "
                "table's incremental reads at the low watermark; replayed changes older than the table are ignored)")
        if start < low:
            raise TerminalError(
                f"table {table}: topic {topic} partition {p}: offsets {start}..{low - 1} were deleted by retention "
                "before they were ingested, so changes are missing and the table cannot equal the source by reading "
                "on. Ways back: re-snapshot the source table (a Debezium incremental snapshot: the `execute-snapshot` "
                "signal; its reads arrive after the low watermark), or reload it with `python jobs/bootstrap.py "
                f"--config <pipeline.yaml> --table {table} --replace` (a table with a bootstrap section); then accept "
                f"the gap explicitly with `python jobs/ingest.py --config <pipeline.yaml> --table {table} "
                "--reset-cursor` (incremental reads restart at the low watermark). Retention shorter than the "
                "schedule loses changes: raise the topic's retention.ms")
        starts[p] = start
    return cap_ranges(topic, starts, {p: hi for p, (_, hi) in wm.items()}, max_records)


def plan_backfill(kafka_conf: Mapping[str, Any], topic: str, bounds: Bounds, timeout: float = 10.0
                  ) -> list[OffsetRange]:
    """Full backfill range per partition (the caller cuts it into batches with ``cap_ranges``)."""
    consumer = new_consumer(kafka_conf)
    try:
        parts = partitions(consumer, topic, timeout)
        missing = sorted((set(bounds.start_offsets) | set(bounds.end_offsets)) - set(parts))
        if missing:  # silently dropped, the backfill would read the whole partition range the flag meant to bound
            flag = "--start-offsets" if missing[0] in bounds.start_offsets else "--end-offsets"
            raise ConfigError(f"{flag}: topic {topic} has no partition {missing[0]} (its partitions: "
                              f"{', '.join(map(str, sorted(parts)))}); fix the offsets")
        wm = watermarks(consumer, topic, parts, timeout)
        starts = {p: wm[p][0] for p in parts}
        ends = {p: wm[p][1] for p in parts}
        if bounds.start_ts_ms is not None:
            for p, off in offsets_for_time(consumer, topic, parts, bounds.start_ts_ms, timeout).items():
                starts[p] = ends[p] if off is None else off
        if bounds.end_ts_ms is not None:
            for p, off in offsets_for_time(consumer, topic, parts, bounds.end_ts_ms, timeout).items():
                ends[p] = ends[p] if off is None else off
        starts.update({p: o for p, o in bounds.start_offsets.items() if p in starts})
        ends.update({p: o for p, o in bounds.end_offsets.items() if p in ends})
    finally:
        consumer.close()
    out = []
    for p in parts:
        lo, hi = wm[p]
        s, e = max(starts[p], lo), min(ends[p], hi)
        out.append(OffsetRange(topic, p, s, max(s, e)))
    return out


def read_samples(kafka_conf: Mapping[str, Any], ranges: Sequence[OffsetRange],
                 want: int = 1, timeout: float = 10.0,
                 usable: Callable[[bytes | None, bytes | None], bool] | None = None
                 ) -> list[tuple[bytes | None, bytes | None]]:
    """Newest records with a value (newest last) from each non-empty range, looking back further as needed.

    ``usable`` (e.g. "the decoder can read its schema") skips bad records, so one corrupt record at the end of a range
    becomes a dead letter instead of failing the whole batch's schema resolution. When no record of a partition is
    usable, its newest records are returned anyway (the decoder then reports the problem)."""
    from confluent_kafka import TopicPartition


    samples: list[tuple[bytes | None, bytes | None]] = []
    consumer = new_consumer(kafka_conf, **{"auto.offset.reset": "earliest"})
    try:
        for r in ranges:
            if r.size == 0:
                continue
            found: list[tuple[bytes | None, bytes | None]] = []
            # Newest first (they carry the newest schema); as a last resort the oldest records of the range.
            windows = [(max(r.start, r.end - w), r.end) for w in SAMPLE_WINDOWS]
            windows.append((r.start, min(r.end, r.start + SAMPLE_WINDOWS[-1])))
            for start, end in windows:
                recs = read_raw(consumer, TopicPartition(r.topic, r.partition, start), end, timeout)
                found = [(k, v) for k, v in recs if v is not None]
                good = [(k, v) for k, v in found if usable is None or usable(k, v)]
                if good or start == r.start:
                    found = good or found
                    break
            samples.extend(found[-want:])
    finally:
        consumer.close()
    return samples


@dataclass(frozen=True)
class ValueScan:
    """What ``first_value`` found: the first record with a value (None: the ranges hold only null values, i.e. Kafka
    tombstones) and, when there is none, the records read per partition."""

    sample: tuple[bytes | None, bytes | None] | None
    records: dict[int, int]


def first_value(kafka_conf: Mapping[str, Any], ranges: Sequence[OffsetRange], timeout: float = 10.0) -> ValueScan:
    """Read the ranges (partitions in order) up to the first record with a value. For a batch whose samples
    (``read_samples``: its newest and oldest records) show only tombstones; a partition that stalls for ``timeout``
    seconds raises ``KafkaUnavailable`` (the answer must be whole)."""
    consumer = new_consumer(kafka_conf, **{"auto.offset.reset": "earliest"})
    records: dict[int, int] = {}
    try:
        for r in sorted(ranges, key=lambda r: r.partition):
            where = f"topic {r.topic} partition {r.partition}: looking for a record with a value"
            for msgs in consume_range(consumer, r.topic, r.partition, r.start, r.end, timeout, where, batch=1000):
                for msg in msgs:
                    if msg.value() is not None:
                        return ValueScan((msg.key(), msg.value()), {})
                records[r.partition] = records.get(r.partition, 0) + len(msgs)
    finally:
        consumer.close()
    return ValueScan(None, records)


SCAN_LIMIT = 200_000  # records per batch the driver may read to locate a schema change (error path only)


def find_first(kafka_conf: Mapping[str, Any], ranges: Sequence[OffsetRange],
               match: Callable[[bytes | None, bytes | None], bool], limit: int = SCAN_LIMIT,
               timeout: float = 10.0) -> tuple[int, int] | None:
    """``(partition, offset)`` of the first record of the ranges (partitions in order) for which ``match(key,
    value)`` is true; None if none is found within ``limit`` records (a partition that stalls for ``timeout``
    seconds is skipped)."""

    consumer = new_consumer(kafka_conf, **{"auto.offset.reset": "earliest"})
    left = limit
    try:
        for r in sorted(ranges, key=lambda r: r.partition):
            where = f"topic {r.topic} partition {r.partition}: locating a record"
            try:
                for msgs in consume_range(consumer, r.topic, r.partition, r.start, r.end, timeout, where,
                                          stall="stop", batch=1000):
                    for msg in msgs[:left]:
                        if match(msg.key(), msg.value()):
                            return r.partition, msg.offset()
                    left -= len(msgs)
                    if left <= 0:
                        return None
            except KafkaUnavailable:  # best effort: this only names the record in an error message
                continue
    finally:
        consumer.close()
    return None