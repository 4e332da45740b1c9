"""Data model shared by the decoders (pure Python; no Spark, no Kafka).

A decoder turns one Kafka record (key bytes, value bytes) into an ``Event``. Values in ``Event.row`` and
``Event.key`` are *Arrow-ready*: each value fits ``pa.array([...], type=column.arrow_type)`` for the batch's
columns (see ``cdc.decode.connect_types`` for the Debezium/Connect → Arrow mapping):

==========================  =========================================================
Arrow type                  Python value
==========================  =========================================================
int32 / int64               int
float32 / float64           float
bool                        bool
string                      str
binary                      bytes
decimal128(p, s)            decimal.Decimal with exactly s digits after the point
date32                      int (days since 1970-01-01)
timestamp('us')             int (microseconds since epoch, no zone: wall clock)
timestamp('us', 'UTC')      int (microseconds since epoch, UTC)
list<T>                     list of T values
struct<...>                 dict
==========================  =========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Event kinds. Only CHANGE events are merged; the others are counted as skipped.
CHANGE = "change"  # a Debezium change event: op in c, u, d, r, t
TOMBSTONE = "tombstone"  # Kafka record with a null value (follows a delete, for log compaction)
MESSAGE = "message"  # op "m": logical decoding message (pg_logical_emit_message)
TRANSACTION = "tx"  # transaction boundary event (BEGIN / END) on a transaction metadata topic
SKIPPED_KINDS = (TOMBSTONE, MESSAGE, TRANSACTION)

CHANGE_OPS = ("c", "u", "d", "r", "t")


@dataclass
class Event:
    """One decoded Kafka record."""

    kind: str
    op: str | None = None
    # Row image: ``after`` for c/u/r, ``before`` for d, None for t and for skipped kinds. Keys are column names of the
    # batch schema; columns missing from the record's writer schema are absent (the reader fills None).
    row: dict[str, Any] | None = None
    # Decoded message key (None when the Kafka key is null, e.g. truncate events).
    key: dict[str, Any] | None = None
    # The Debezium ``source`` block, values as decoded (lsn, file, pos, row, connector, ts_ms, snapshot, ...).
    source: dict[str, Any] = field(default_factory=dict)
    # Envelope ``ts_ms`` (when Debezium processed the event).
    ts_ms: int | None = None
    # Columns whose value was the unavailable-value placeholder (unchanged TOAST); their row value is None.
    unavailable: tuple[str, ...] = ()
    # Confluent schema id of the value (Avro), None for JSON.
    schema_id: int | None = None
