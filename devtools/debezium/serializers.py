"""Wire formats Debezium uses on Kafka: JsonConverter (with/without schemas) and Confluent Avro.

Each serializer turns a :class:`Record` into ``(key_bytes, value_bytes)``;
``None`` stays ``None`` (tombstone value, truncate key), as on the wire.

Schemas are derived from the :class:`TableSchema` version attached to the
record, exactly as Debezium/Kafka Connect would write them:

* JsonConverter ``schemas.enable=true``: ``{"schema": <Connect schema>, "payload": ...}``;
  Decimal is base64 of the big-endian two's-complement unscaled value.
* Confluent Avro: magic byte 0, 4-byte big-endian schema id, schemaless Avro
  datum. Schemas follow Connect's AvroData (``connect.name``, ``connect.version``,
  decimals as bytes + ``logicalType: decimal`` + ``connect.parameters``,
  optional fields as ``["null", T]`` with default null) and are registered with
  TopicNameStrategy subjects ``<topic>-key`` / ``<topic>-value``.

Schemas are built once per table version and cached (JSON schemas are even
pre-encoded), which keeps serialisation fast enough for benchmark volumes.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any, Protocol

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from .model import SNAPSHOT_ALLOWED, Column, Record, Row, TableSchema, encode_decimal

# ----------------------------------------------------------------------------- Connect (JSON) schemas

_CONNECT_TYPES = {
    "int32": "int32",
    "int64": "int64",
    "string": "string",
    "text": "string",
    "boolean": "boolean",
    "decimal": "bytes",
    "date": "int32",
    "timestamp": "int64",
}


def _connect_field(col: Column) -> dict[str, Any]:
    field: dict[str, Any] = {"type": _CONNECT_TYPES[col.kind], "optional": col.nullable}
    if col.kind == "decimal":
        field["name"] = "org.apache.kafka.connect.data.Decimal"
        field["version"] = 1
        field["parameters"] = {"scale": str(col.scale), "connect.decimal.precision": str(col.precision)}
    elif col.kind == "date":
        field.update(name="io.debezium.time.Date", version=1)
    elif col.kind == "timestamp":
        field.update(name="io.debezium.time.MicroTimestamp", version=1)
    field["field"] = col.name
    return field


def _f(type_: str, name: str, optional: bool = False) -> dict[str, Any]:
    return {"type": type_, "optional": optional, "field": name}


def connect_source_schema(table: TableSchema) -> dict[str, Any]:
    """The ``io.debezium.connector.<connector>.Source`` struct of Debezium 2.7."""
    snapshot = {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": SNAPSHOT_ALLOWED},
        "default": "false",
        "field": "snapshot",
    }
    fields = [_f("string", "version"), _f("string", "connector"), _f("string", "name"), _f("int64", "ts_ms"), snapshot]
    fields += [_f("string", "db"), _f("string", "sequence", True)]
    fields += [_f("int64", "ts_us", True), _f("int64", "ts_ns", True)]
    if table.connector == "postgresql":
        fields += [_f("string", "schema"), _f("string", "table"), _f("int64", "txId", True), _f("int64", "lsn", True)]
        fields += [_f("int64", "xmin", True)]
    else:
        fields += [_f("string", "table", True), _f("int64", "server_id"), _f("string", "gtid", True)]
        fields += [_f("string", "file"), _f("int64", "pos"), _f("int32", "row"), _f("int64", "thread", True)]
        fields += [_f("string", "query", True)]
    name = f"io.debezium.connector.{table.connector}.Source"
    return {"type": "struct", "fields": fields, "optional": False, "name": name, "field": "source"}


def connect_key_schema(table: TableSchema) -> dict[str, Any]:
    fields = [_connect_field(table.column(k)) for k in table.primary_key]
    return {"type": "struct", "fields": fields, "optional": False, "name": f"{table.topic}.Key"}


def connect_value_schema(table: TableSchema) -> dict[str, Any]:
    """The Envelope struct (schema version 2) exactly as JsonConverter writes it."""
    row = [_connect_field(c) for c in table.columns]
    image = {"type": "struct", "fields": row, "optional": True, "name": f"{table.topic}.Value"}
    block = [_f("string", "id"), _f("int64", "total_order"), _f("int64", "data_collection_order")]
    fields = [
        {**image, "field": "before"},
        {**image, "field": "after"},
        connect_source_schema(table),
        {"type": "struct", "fields": block, "optional": True, "name": "event.block", "version": 1,
         "field": "transaction"},
        _f("string", "op"),
        _f("int64", "ts_ms", True),
        _f("int64", "ts_us", True),
        _f("int64", "ts_ns", True),
    ]
    return {"type": "struct", "fields": fields, "optional": False, "name": f"{table.topic}.Envelope", "version": 2}


def _json_row(table: TableSchema, row: Row | None, decimals: list[Column]) -> Row | None:
    if row is None or not decimals:
        return row
    out = dict(row)
    for col in decimals:
        value = out.get(col.name)
        if value is not None:
            out[col.name] = base64.b64encode(encode_decimal(value, col.scale)).decode()
    return out


def json_payload(record: Record) -> dict[str, Any] | None:
    """The envelope as JsonConverter renders it (decimals base64-encoded)."""
    value = record.value
    if value is None:
        return None
    decimals = [c for c in record.table.columns if c.kind == "decimal"]
    if not decimals:
        return value
    before = _json_row(record.table, value["before"], decimals)
    return {**value, "before": before, "after": _json_row(record.table, value["after"], decimals)}


_COMPACT = json.JSONEncoder(separators=(",", ":"))  # reused: json.dumps(separators=...) builds one per call


class RecordSerializer(Protocol):
    def serialize(self, record: Record) -> tuple[bytes | None, bytes | None]: ...


class JsonSerializer:
    """Debezium JsonConverter. ``schemas_enable`` mirrors ``key/value.converter.schemas.enable``."""

    def __init__(self, schemas_enable: bool = True) -> None:
        self.schemas_enable = schemas_enable
        self._cache: dict[int, tuple[TableSchema, bytes, bytes]] = {}

    def _schemas(self, table: TableSchema) -> tuple[bytes, bytes]:
        hit = self._cache.get(id(table))
        if hit is None or hit[0] is not table:
            key = json.dumps(connect_key_schema(table), separators=(",", ":")).encode()
            value = json.dumps(connect_value_schema(table), separators=(",", ":")).encode()
            hit = self._cache[id(table)] = (table, key, value)
        return hit[1], hit[2]

    def _wrap(self, schema: bytes, payload: Any) -> bytes:
        body = _COMPACT.encode(payload).encode()
        if not self.schemas_enable:
            return body
        return b'{"schema":' + schema + b',"payload":' + body + b"}"

    def serialize(self, record: Record) -> tuple[bytes | None, bytes | None]:
        key_schema, value_schema = self._schemas(record.table) if self.schemas_enable else (b"", b"")
        key = None if record.key is None else self._wrap(key_schema, record.key)
        value = None if record.value is None else self._wrap(value_schema, json_payload(record))
        return key, value


# ----------------------------------------------------------------------------- Avro (Confluent AvroConverter)

_AVRO_TYPES = {"int32": "int", "int64": "long", "string": "string", "text": "string", "boolean": "boolean"}


def _avro_type(col: Column) -> Any:
    if col.kind == "decimal":
        return {
            "type": "bytes",
            "scale": col.scale,
            "precision": col.precision,
            "connect.version": 1,
            "connect.parameters": {"scale": str(col.scale), "connect.decimal.precision": str(col.precision)},
            "connect.name": "org.apache.kafka.connect.data.Decimal",
            "logicalType": "decimal",
        }
    if col.kind == "date":
        return {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}
    if col.kind == "timestamp":
        return {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}
    return _AVRO_TYPES[col.kind]


def _avro_field(name: str, type_: Any, optional: bool) -> dict[str, Any]:
    if optional:
        return {"name": name, "type": ["null", type_], "default": None}
    return {"name": name, "type": type_}


def avro_key_schema(table: TableSchema) -> dict[str, Any]:
    fields = [_avro_field(k, _avro_type(table.column(k)), False) for k in table.primary_key]
    name = f"{table.topic}.Key"
    return {"type": "record", "name": "Key", "namespace": table.topic, "fields": fields, "connect.name": name}


def avro_source_schema(table: TableSchema) -> dict[str, Any]:
    types = {"string": "string", "int64": "long", "int32": "int"}
    fields: list[dict[str, Any]] = []
    for f in connect_source_schema(table)["fields"]:
        if f["field"] == "snapshot":
            enum = {"type": "string", "connect.version": 1, "connect.parameters": {"allowed": SNAPSHOT_ALLOWED}}
            enum.update({"connect.default": "false", "connect.name": "io.debezium.data.Enum"})
            fields.append({"name": "snapshot", "type": [enum, "null"], "default": "false"})
        else:
            fields.append(_avro_field(f["field"], types[f["type"]], f["optional"]))
    ns = f"io.debezium.connector.{table.connector}"
    return {"type": "record", "name": "Source", "namespace": ns, "fields": fields, "connect.name": f"{ns}.Source"}


def avro_value_schema(table: TableSchema) -> dict[str, Any]:
    """Envelope schema as Confluent's AvroConverter registers it for Debezium 2.7."""
    value = {
        "type": "record",
        "name": "Value",
        "fields": [_avro_field(c.name, _avro_type(c), c.nullable) for c in table.columns],
        "connect.name": f"{table.topic}.Value",
    }
    block = {
        "type": "record",
        "name": "block",
        "namespace": "event",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "total_order", "type": "long"},
            {"name": "data_collection_order", "type": "long"},
        ],
        "connect.version": 1,
        "connect.name": "event.block",
    }
    fields = [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": avro_source_schema(table)},
        {"name": "transaction", "type": ["null", block], "default": None},
        {"name": "op", "type": "string"},
        _avro_field("ts_ms", "long", True),
        _avro_field("ts_us", "long", True),
        _avro_field("ts_ns", "long", True),
    ]
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": table.topic,
        "fields": fields,
        "connect.version": 2,
        "connect.name": f"{table.topic}.Envelope",
    }


class AvroSerializer:
    """Confluent wire-format Avro; registers each table version's schemas on first use.

    ``topic`` overrides the subject prefix (default: the record's Debezium topic).
    """

    def __init__(self, client: SchemaRegistryClient, topic: str | None = None) -> None:
        self.client = client
        self.topic = topic
        self._cache: dict[int, tuple[TableSchema, bytes, Any, bytes, Any]] = {}

    def schema_ids(self, table: TableSchema) -> tuple[int, int]:
        """(key id, value id) for a table version, registering the schemas if needed."""
        header_key, _, header_value, _ = self._entry(table)
        return struct.unpack(">I", header_key[1:])[0], struct.unpack(">I", header_value[1:])[0]

    def _entry(self, table: TableSchema) -> tuple[bytes, Any, bytes, Any]:
        hit = self._cache.get(id(table))
        if hit is None or hit[0] is not table:
            topic = self.topic or table.topic
            parts = []
            for suffix, schema in (("key", avro_key_schema(table)), ("value", avro_value_schema(table))):
                schema_id = self.client.register_schema(f"{topic}-{suffix}", Schema(json.dumps(schema), "AVRO"))
                parts += [b"\x00" + struct.pack(">I", schema_id), fastavro.parse_schema(schema)]
            hit = self._cache[id(table)] = (table, *parts)
        return hit[1], hit[2], hit[3], hit[4]

    @staticmethod
    def _encode(header: bytes, parsed: Any, datum: Any) -> bytes:
        buf = io.BytesIO()
        buf.write(header)
        fastavro.schemaless_writer(buf, parsed, datum)
        return buf.getvalue()

    def serialize(self, record: Record) -> tuple[bytes | None, bytes | None]:
        key_header, key_schema, value_header, value_schema = self._entry(record.table)
        key = None if record.key is None else self._encode(key_header, key_schema, record.key)
        value = None if record.value is None else self._encode(value_header, value_schema, record.value)
        return key, value
