"""Decoders: Kafka record bytes → ``Event`` (pure functions plus a cached schema-registry lookup).

Contract (implemented by ``AvroDecoder`` in ``avro.py`` and ``JsonDecoder`` in ``json.py``)::

    decoder = make_decoder(settings, topic)                 # on the driver
    cols = decoder.resolve_columns(samples)                  # batch schema of the row image (list[Column])
    key_cols = decoder.key_columns(samples)                  # fields of the Kafka message key (list[Column])
    # ... decoder is pickled into Spark tasks (it must not hold sockets; clients are created lazily) ...
    event = decoder.decode(key_bytes, value_bytes)           # Event, or raises cdc.errors.DecodeError

``samples`` are ``(key_bytes, value_bytes)`` of the newest records of the batch's ranges (the last record of each
partition range), read by the planner; Avro ignores them and asks the registry for the subject's latest schema.
``resolve_columns`` also takes ``existing``: the target table's current columns, so columns dropped at the source are
kept (the batch schema is the union, existing order first, new columns appended).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

from cdc.decode.model import Column, Event

Sample = tuple[bytes | None, bytes | None]


class Decoder(ABC):
    """Decodes the records of one topic."""

    topic: str
    # Source fields that are not columns of the batch: dropped silently when True (allow_field_addition: false),
    # else such a field with a value is a DecodeError (the schema changed after the batch schema was resolved).
    ignore_unknown_fields: bool = False

    @abstractmethod
    def resolve_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        """Columns of the row image for this batch (newest source schema ∪ existing target columns)."""

    def source_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        """The newest source schema's row columns, not merged with ``existing`` (only used as inference hints)."""
        return self.resolve_columns(samples, ())

    def record_columns(self, key: bytes | None, value: bytes | None,
                       existing: Sequence[Column] = ()) -> list[Column] | None:
        """Row columns of one record's own (writer) schema, None when unknown (locates schema changes)."""
        return None

    @abstractmethod
    def key_columns(self, samples: Sequence[Sample]) -> list[Column]:
        """Columns of the Kafka message key (the default primary key)."""

    @abstractmethod
    def bind(self, columns: Sequence[Column]) -> "Decoder":
        """A copy that decodes rows into exactly these columns (call before shipping to tasks)."""

    @abstractmethod
    def decode(self, key: bytes | None, value: bytes | None) -> Event:
        """Decode one record. Raises ``DecodeError`` with a reason for bad input."""


__all__ = ["Column", "Decoder", "Event", "Sample"]
