"""Decoder for Debezium JsonConverter output, with (``schemas.enable=true``) or without the schema envelope.

With ``{"schema": ..., "payload": ...}`` the per-record Connect schema drives conversion (Decimal base64 → Decimal,
dates, timestamps, ...). Payload-only records carry no types: a column named in the table's ``column_types`` gets
that type (e.g. ``decimal(10,2)`` reads Debezium's base64 ``precise`` decimals exactly); any other column is inferred
from its first non-null value (int → int64, float → float64, bool, str → string, object/array → string holding
compact JSON; an existing table column's type wins when the value fits). A column that is null in every sample gets
no type yet (it is not frozen as string): it is left out until a record has a value for it. Values are coerced to
the bound column types (a JSON type that does not fit raises ``DecodeError`` naming the column).

Every record is decoded with its own schema (embedded, or its own fields when schemaless). A record with a value in
a column the bound columns lack (its schema is older or newer than the samples the batch schema came from, e.g. a
column dropped at the source mid-batch) raises ``UnboundColumns``; ``record_columns`` gives that record's columns,
which the job merges into the batch schema before staging the batch again (``cdc.run``), so no value is dropped.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Sequence

import pyarrow as pa

from cdc.common.errors import DecodeError
from cdc.config.model import COLUMN_TYPE_NAMES, DECIMAL_COLUMN_TYPE
from cdc.decode import flattened, mongodb
from cdc.decode.base import Decoder, Sample
from cdc.decode.connect_types import ConnectField, columns_of, converter, from_connect_json
from cdc.decode.envelope import RowPlan, row_plan, to_event
from cdc.decode.model import TOMBSTONE, Event
from cdc.schema.columns import Column
from cdc.schema.widening import Incompatible, accepts, merge_columns, merge_type

_INFERRED = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string(),
             dict: pa.string(), list: pa.string()}
_DECLARED = {"int": pa.int32(), "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(),
             "boolean": pa.bool_(), "string": pa.string(), "date": pa.date32(), "timestamp": pa.timestamp("us"),
             "timestamptz": pa.timestamp("us", tz="UTC"), "binary": pa.binary()}


def declared_type(spec: str) -> pa.DataType:
    """Arrow type of a ``column_types`` entry (``int``, ``bigint``, ``decimal(10,2)``, ``timestamptz``, ...)."""
    m = DECIMAL_COLUMN_TYPE.match(spec.strip().lower())
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    if spec.strip().lower() in _DECLARED:
        return _DECLARED[spec.strip().lower()]
    raise ValueError(f"column_types: unknown type {spec!r} (one of {', '.join(COLUMN_TYPE_NAMES)}, decimal(p,s))")


class JsonDecoder(Decoder):
    # tables[].envelope: "debezium", or "flattened" (ExtractNewRecordState output; cdc.decode.flattened)
    envelope = "debezium"

    def __init__(self, topic: str, placeholder: str, column_types: Mapping[str, str] | None = None):
        self.topic = topic
        self.placeholder = placeholder
        # Schemaless records only (an embedded schema always decides): declared column → Arrow type.
        self.declared = {name: declared_type(spec) for name, spec in (column_types or {}).items()}
        self._columns: list[Column] | None = None
        self._plans: list[tuple[Any, RowPlan]] = []  # (schema dict or None, plan); newest first, small
        self._key_convs: list[tuple[Any, Any]] = []

    # ------------------------------------------------------------------------------------------------- schema side

    def resolve_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        return merge_columns(existing, self.source_columns(samples, existing))

    def source_columns(self, samples: Sequence[Sample], existing: Sequence[Column] = ()) -> list[Column]:
        existing_types = {c.name: c for c in existing}
        union: dict[str, Column] = {}
        for _, value in samples:
            for col in self._sample_columns(value, existing_types):
                prev = union.get(col.name)
                if prev is None:
                    union[col.name] = col
                    continue
                try:  # same column in several samples: the type holding both, or newest (later sample) wins
                    t = merge_type(prev.arrow_type, col.arrow_type, (col.name,))[0]
                except Incompatible:
                    t = col.arrow_type
                union[col.name] = Column(col.name, t, prev.nullable or col.nullable, col.logical or prev.logical)
        return list(union.values())

    def record_columns(self, key: bytes | None, value: bytes | None,
                       existing: Sequence[Column] = ()) -> list[Column] | None:
        try:
            return self._sample_columns(value, {c.name: c for c in existing}) if value else None
        except DecodeError:
            return None

    def key_columns(self, samples: Sequence[Sample]) -> list[Column]:
        for key, value in reversed(list(samples)):
            doc = _loads(key, "key") if key else None
            if isinstance(doc, dict) and _is_mongodb(value):
                return [Column(mongodb.KEY, pa.string(), False)]  # {"id": "<_id as Extended JSON>"}
            if isinstance(doc, dict) and _has_schema(doc) and isinstance(doc["schema"], dict):
                return columns_of(from_connect_json(doc["schema"]))
            if isinstance(doc, dict):
                payload = doc.get("payload") if _has_schema(doc) else doc
                if isinstance(payload, dict):
                    return [Column(k, _INFERRED.get(type(v), pa.string()), True) for k, v in payload.items()]
        return []

    def _sample_columns(self, value: bytes | None, existing: dict[str, Column]) -> list[Column]:
        return self.payload_columns(_loads(value, "value") if value else None, existing)

    def payload_columns(self, doc: Any, existing: dict[str, Column]) -> list[Column]:
        """The row columns one decoded value shows (a JSON document, or an Avro datum of the same shape)."""
        if not isinstance(doc, dict):
            return []
        if _has_schema(doc):
            struct = self._struct(doc["schema"])
            if struct is not None:
                return columns_of(struct)
            doc = doc["payload"]
            if not isinstance(doc, dict):
                return []
        if self.envelope == "flattened":
            row = flattened.split(doc)[0]
        elif mongodb.is_mongodb(doc):
            try:
                row = mongodb.document_columns(doc)
            except DecodeError:  # the record is a dead letter when decoded; it shows no columns
                return []
        else:
            row = doc.get("after") if doc.get("after") is not None else doc.get("before")
        if not isinstance(row, dict):
            return []
        out = []
        for k, v in row.items():
            if k in self.declared:
                out.append(Column(k, self.declared[k], True))
            elif v is not None:
                out.append(_infer(k, v, existing.get(k)))
            elif k in existing:  # null: the table's type; else no type yet (not frozen as string)
                out.append(existing[k])
        return out

    def bind(self, columns: Sequence[Column]) -> "JsonDecoder":
        bound = copy.copy(self)
        bound._columns, bound._plans, bound._key_convs = list(columns), [], []
        return bound

    # ------------------------------------------------------------------------------------------------- record side

    def decode(self, key: bytes | None, value: bytes | None) -> Event:
        k = self._decode_key(key)
        doc = _loads(value, "value") if value else None
        if doc is None or (isinstance(doc, dict) and _has_schema(doc) and doc["payload"] is None):
            return Event(TOMBSTONE, key=mongodb.tombstone_key(k, self._columns))
        schema = None
        if isinstance(doc, dict) and _has_schema(doc):
            schema, doc = doc["schema"], doc["payload"]
        return self.decode_payload(k, doc, schema)

    def decode_payload(self, k: dict[str, Any] | None, doc: Any, schema: Any = None,
                       schema_id: int | None = None) -> Event:
        """The Event of one decoded, non-null value (``schema``: its Connect schema, None when schemaless)."""
        if self.envelope == "flattened":
            return to_event(flattened.to_envelope(doc), k, self._plan(schema), schema_id)
        if mongodb.is_mongodb(doc):
            return mongodb.event(doc, k, self._plan(schema), schema_id)
        return to_event(doc, k, self._plan(schema), schema_id)

    def _plan(self, schema: Any) -> RowPlan:
        for cached, plan in self._plans:
            if cached is schema or cached == schema:
                return plan
        columns = self._columns if self._columns is not None else self._self_bind(schema)
        struct = self._struct(schema)
        if self._columns is None and struct is None:  # decode() before bind(), schemaless: rows as they are
            plan = RowPlan([], [])
        else:
            plan = row_plan(columns, struct, self.placeholder, json_text=True,
                            ignore_extra=self.ignore_unknown_fields)
        self._plans.insert(0, (schema, plan))
        del self._plans[8:]
        return plan

    def _struct(self, schema: Any) -> ConnectField | None:
        """The Connect struct of the row image of a record's schema (None: schemaless or no row struct)."""
        if not isinstance(schema, dict):
            return None
        if self.envelope == "flattened":
            if schema.get("type") != "struct":
                return None
            return from_connect_json({**schema, "fields": flattened.row_schema_fields(schema.get("fields") or [])},
                                     "after")
        return _row_struct(schema)

    def _self_bind(self, schema: Any) -> list[Column]:
        # decode() before bind(): use the record's own schema (handy in tests and tools).
        struct = self._struct(schema)
        return columns_of(struct) if struct is not None else []

    def _decode_key(self, key: bytes | None) -> dict[str, Any] | None:
        if not key:
            return None
        doc = _loads(key, "key")
        schema = None
        if isinstance(doc, dict) and _has_schema(doc):
            schema, doc = doc["schema"], doc["payload"]
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise DecodeError(f"key is a JSON {type(doc).__name__}, not an object")
        if not isinstance(schema, dict):
            return doc
        for cached, conv in self._key_convs:
            if cached == schema:
                break
        else:
            conv = converter(from_connect_json(schema), json_text=True)
            self._key_convs.insert(0, (schema, conv))
            del self._key_convs[4:]
        try:
            return conv(doc)
        except DecodeError as exc:
            raise DecodeError(f"key: {exc}") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise DecodeError(f"key cannot be converted ({type(exc).__name__}: {exc})") from None


def _is_mongodb(value: bytes | None) -> bool:
    try:
        doc = _loads(value, "value") if value else None
    except DecodeError:
        return False
    if isinstance(doc, dict) and _has_schema(doc):
        doc = doc["payload"]
    return mongodb.is_mongodb(doc)


def _loads(data: bytes | None, what: str) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        if data is not None and len(data) >= 5 and data[:2] == b"\0\0":  # magic 0 and a schema id < 2^24
            raise DecodeError(f"{what} is not JSON: this is Confluent Avro (magic byte 0, schema id "
                              f"{int.from_bytes(data[1:5], 'big')}): set format: avro (and schema_registry.url)") from None
        raise DecodeError(f"{what} is not valid JSON: {exc}") from None


def _has_schema(doc: dict[str, Any]) -> bool:
    return "payload" in doc and "schema" in doc and len(doc) == 2


def _row_struct(schema: dict[str, Any]) -> ConnectField | None:
    """The Connect struct of the envelope's after (or before) image, None if the schema has neither."""
    if schema.get("type") != "struct":
        return None
    for f in schema.get("fields") or ():
        if f.get("field") in ("after", "before") and f.get("type") == "struct":
            return from_connect_json(f, f["field"])
    return None


def _infer(name: str, v: Any, existing: Column | None) -> Column:
    """Schemaless non-null sample value → column; an existing column's type wins whenever the value fits it."""
    t = _INFERRED.get(type(v), pa.string())
    if existing is not None:
        et = existing.arrow_type
        if accepts(et, t):
            return existing
        if type(v) is int and (pa.types.is_floating(et) or pa.types.is_decimal(et)
                               or et == pa.int32() and -(2**31) <= v < 2**31):
            return existing
    return Column(name, t, True)


__all__ = ["JsonDecoder"]
