"""The one loop that reads an offset range of one partition (the Spark reader, planner samples, error-path scans).

``[start, end)`` is read from an assigned partition (no consumer group, no commits) and ends exactly at ``end``: after
the record at ``end - 1``, at the first record at or after ``end``, or at end-of-partition at or after ``end`` (offsets
may be missing inside the range: compaction, transaction markers). ``eof_ends``: end-of-partition anywhere ends the
range (small reads whose records are known to be there). A read that makes no progress for ``timeout`` seconds raises
``KafkaUnavailable`` (``stall="raise"``) or just stops (``stall="stop"``, best-effort scans).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

from cdc.common.errors import KafkaUnavailable


def read_raw(consumer: Any, tp: Any, end: int, timeout: float) -> list[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of the records of one partition from ``tp.offset`` up to ``end`` (small ranges only)."""
    where = f"topic {tp.topic} partition {tp.partition}: reading samples"
    return [(m.key(), m.value()) for msgs in consume_range(consumer, tp.topic, tp.partition, tp.offset, end, timeout,
                                                            where, eof_ends=True, batch=1000) for m in msgs]


CONSUME_BATCH = 5_000


def consume_range(consumer: Any, topic: str, partition: int, start: int, end: int, timeout: float, where: str,
                  *, eof_ends: bool = False, stall: str = "raise", batch: int = CONSUME_BATCH) -> Iterator[list[Any]]:
    """Yield the data messages of ``[start, end)`` in offset order, one list per fetch (see the module doc)."""
    from confluent_kafka import KafkaError, TopicPartition

    if end <= start:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        position, last_progress, done = start, time.monotonic(), False
        while not done:
            # Ask for no more than the range still holds: consume() waits out its timeout until it has as many
            # messages as asked for, so asking for a full batch made every short read wait 0.5 s at its end.
            msgs = consumer.consume(max(1, min(batch, end - position)), 0.5)
            if not msgs and time.monotonic() - last_progress > timeout:
                if stall == "stop":
                    return
                raise KafkaUnavailable(f"{where}: no records between offset {position} and {end} for {timeout:.0f}s "
                                       "(broker down or records deleted by retention?); rerun when the broker is "
                                       "healthy")
            out = []
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if eof_ends or msg.offset() >= end:
                            done = True
                            break
                        continue
                    if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        raise KafkaUnavailable(f"{where}: offset {position} is out of range (deleted by retention?)"
                                               "; the range can no longer be read")
                    raise KafkaUnavailable(f"{where} offset {position}: {err.str()}")
                off = msg.offset()
                if off >= end:
                    done = True
                    break
                last_progress, position = time.monotonic(), off + 1
                out.append(msg)
                if off >= end - 1:
                    done = True
                    break
            if out:
                yield out
    finally:
        consumer.unassign()