"""The decoder contract (see ``cdc.decode``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

from cdc.decode.model import Event
from cdc.schema.columns import Column

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
