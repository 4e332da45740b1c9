"""Avro (Confluent AvroConverter) records of the shapes that are not a relational Debezium envelope.

* ``FlattenedAvroDecoder`` (``tables[].envelope: flattened``): records flattened by ExtractNewRecordState. The value
  schema is the row's own fields plus the SMT's added ``__`` fields; the row struct is the schema without them, and
  each datum becomes the Debezium envelope with ``cdc.decode.flattened.to_envelope`` (exactly as in format json).
* ``MongoAvroDecoder``: MongoDB change events, whose ``after``/``before`` are JSON text (``io.debezium.data.Json``)
  and whose key is ``{id: string}``. The registry knows no row schema, so columns come from the sampled documents
  like for schemaless JSON: the datum (a dict of the same shape as the JSON payload) goes through the JSON decoder's
  own code (``JsonDecoder.payload_columns`` / ``decode_payload``, ``cdc.decode.mongodb``), so rows are identical to
  format json's.
* ``AvroByConnector`` (what ``make_decoder`` returns for ``envelope: debezium``): the plain ``AvroDecoder``, or
  ``MongoAvroDecoder`` when the subject's newest value schema is a MongoDB envelope (``is_mongodb_schema``);
  decided once, on the driver, at the first schema-side call, and ``bind`` returns the chosen decoder itself.

Both decoders are decoded record by record: ``FlattenedAvroDecoder.vectorised`` is False, so ``cdc.stage.reader`` never
hands its records to the vectorised path (which reads ``op``/``source``/``before``/``after`` columns), and
``MongoAvroDecoder`` is no ``AvroDecoder`` (documents are JSON text: parsing them is per record anyway).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pyarrow as pa

from cdc.common.errors import DecodeError
from cdc.decode import flattened, mongodb
from cdc.decode.avro import AvroDecoder, not_avro
from cdc.decode.base import Decoder, Sample
from cdc.decode.connect_types import ConnectField, from_avro
from cdc.decode.envelope import RowPlan, to_event
from cdc.decode.json import JsonDecoder
from cdc.decode.model import TOMBSTONE, Event
from cdc.schema.columns import Column

# the Source struct's Connect name (the connector has always named it "mongo"; "mongodb" accepted too)
MONGODB_SOURCES = frozenset({"io.debezium.connector.mongo.Source", "io.debezium.connector.mongodb.Source"})
JSON_DOCUMENT = "io.debezium.data.Json"


class FlattenedAvroDecoder(AvroDecoder):
    """``envelope: flattened`` with ``format: avro``."""

    vectorised = False

    def row_struct(self, envelope: ConnectField) -> ConnectField | None:
        return flattened.row_struct(envelope)

    def event(self, datum: Any, key: dict[str, Any] | None, rows: RowPlan, sid: int) -> Event:
        return to_event(flattened.to_envelope(datum), key, rows, sid)


class MongoAvroDecoder(JsonDecoder):
    """MongoDB events in Avro: the Avro side reads datums and keys, the JSON decoder's code maps documents."""

    def __init__(self, avro: AvroDecoder, column_types: Mapping[str, str] | None = None):
        super().__init__(avro.topic, avro.placeholder, column_types)
        self.avro = avro

    def key_columns(self, samples: Sequence[Sample]) -> list[Column]:
        return [Column(mongodb.KEY, pa.string(), False)]  # {"id": "<_id as Extended JSON>"}

    def _sample_columns(self, value: bytes | None, existing: dict[str, Column]) -> list[Column]:
        if value is None:
            return []
        try:
            datum = self.avro.read_value(value)[1]
        except DecodeError:  # the record is a dead letter when decoded; it shows no columns
            return []
        return self.payload_columns(datum, existing)

    def bind(self, columns: Sequence[Column]) -> "MongoAvroDecoder":
        bound = super().bind(columns)
        bound.avro = self.avro.bind([])  # the reader schema is fixed on the driver, like AvroDecoder.bind
        return bound

    def decode(self, key: bytes | None, value: bytes | None) -> Event:
        k = self.avro._decode_key(key)
        if value is None:  # a tombstone's key in the row's terms ({"_id": ...}), for compacted topics
            return Event(TOMBSTONE, key=mongodb.key(k) if k is not None else None)
        sid, datum, _ = self.avro.read_value(value)
        if not mongodb.is_mongodb(datum):
            raise DecodeError(f"schema id {sid}: not a MongoDB change event (source.connector is not 'mongodb') on a "
                              "topic whose newest value schema is the MongoDB connector's")
        return self.decode_payload(k, datum, None, sid)


def is_mongodb_schema(text: str) -> bool:
    """Is this Avro value schema (registry text) a Debezium MongoDB envelope? Its ``source`` struct is the MongoDB
    connector's, or its ``after`` is a JSON document as text (no relational connector sends that)."""
    try:
        node = from_avro(json.loads(text))
    except (ValueError, DecodeError):
        return False
    if node.type != "struct":
        return False
    source, after = node.child("source"), node.child("after")
    return ((source is not None and source.name in MONGODB_SOURCES)
            or (after is not None and after.type == "string" and after.name == JSON_DOCUMENT))


class AvroByConnector(Decoder):
    """``format: avro``, ``envelope: debezium``: the relational Avro decoder, or the MongoDB one (see module doc)."""

    def __init__(self, avro: AvroDecoder, column_types: Mapping[str, str] | None = None):
        self.avro = avro
        self.topic = avro.topic
        self.column_types = dict(column_types or {})
        self._impl: Decoder | None = None

    @property  # type: ignore[override]
    def ignore_unknown_fields(self) -> bool:
        return self.avro.ignore_unknown_fields

    @ignore_unknown_fields.setter
    def ignore_unknown_fields(self, value: bool) -> None:
        self.avro.ignore_unknown_fields = value
        if self._impl is not None:
            self._impl.ignore_unknown_fields = value

    def chosen(self) -> Decoder:
        """The decoder for this topic (asks the registry for the value subject's newest schema once)."""
        if self._impl is None:
            _, text = self.avro._latest(self.avro.value_subject)
            if is_mongodb_schema(text):
                impl = MongoAvroDecoder(self.avro, self.column_types)
                impl.ignore_unknown_fields = self.avro.ignore_unknown_fields
                self._impl = impl
            else:
                self._impl = self.avro
        return self._impl

    def resolve_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        return self.chosen().resolve_columns(samples, existing)

    def source_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        try:
            impl = self.chosen()
        except DecodeError as exc:  # JSON records on a format: avro topic say so (cdc.decode.avro.not_avro)
            raise not_avro(exc, self.avro.topic, samples) from None
        return impl.source_columns(samples, existing)

    def record_columns(self, key: bytes | None, value: bytes | None,
                       existing: Sequence[Column] = ()) -> list[Column] | None:
        try:
            impl = self.chosen()
        except DecodeError:  # no value subject yet: the record's own writer schema
            impl = self.avro
        return impl.record_columns(key, value, existing)

    def key_columns(self, samples: Sequence[Sample]) -> list[Column]:
        return self.chosen().key_columns(samples)

    def bind(self, columns: Sequence[Column]) -> Decoder:
        return self.chosen().bind(columns)

    def decode(self, key: bytes | None, value: bytes | None) -> Event:
        return self.chosen().decode(key, value)

    def __getattr__(self, name: str) -> Any:  # value_subject, source, placeholder ... of the Avro decoder
        if name.startswith("_") or name == "avro":
            raise AttributeError(name)
        return getattr(self.avro, name)


__all__ = ["AvroByConnector", "FlattenedAvroDecoder", "MongoAvroDecoder", "MONGODB_SOURCES", "is_mongodb_schema"]
