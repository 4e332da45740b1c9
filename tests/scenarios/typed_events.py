"""Debezium events with arbitrary column schemas, as the JsonConverter or the Confluent AvroConverter writes them.

JSON: ``json_event(fields, row)`` with Connect field schemas (``{"type": "bytes", "name": "...Decimal", ...}``).
Avro: ``avro_envelope(value_fields)`` builds a PostgreSQL-style Envelope schema, ``register`` puts it in the schema
registry and ``avro_event`` encodes a datum in the Confluent wire format (magic 0, 4-byte schema id, fastavro datum).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from decimal import Decimal
from typing import Any

import fastavro

PG_SOURCE_JSON = {"type": "struct", "name": "io.debezium.connector.postgresql.Source", "optional": False, "fields": [
    {"type": "string", "optional": False, "field": "connector"}, {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": False, "field": "ts_ms"}]}


def decimal_b64(value: str, scale: int) -> str:
    """JsonConverter encoding of a Connect Decimal: base64 of the big-endian two's-complement unscaled value."""
    n = int(Decimal(value).scaleb(scale))
    return base64.b64encode(n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)).decode()


def json_event(fields: list[dict[str, Any]], row: dict[str, Any], lsn: int, op: str = "c") -> tuple[None, bytes]:
    """A PostgreSQL change event with ``schemas.enable=true`` (``fields``: the row's Connect field schemas)."""
    value_struct = {"type": "struct", "name": "s.public.t.Value", "optional": True, "fields": fields}
    schema = {"type": "struct", "name": "s.public.t.Envelope", "optional": False, "fields": [
        {**value_struct, "field": "before"}, {**value_struct, "field": "after"}, {**PG_SOURCE_JSON, "field": "source"},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}
    src = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000 + lsn}
    payload = {"before": row if op == "d" else None, "after": None if op == "d" else row, "source": src, "op": op,
               "ts_ms": src["ts_ms"] + 1}
    return None, json.dumps({"schema": schema, "payload": payload}).encode()


def avro_envelope(value_fields: list[dict[str, Any]], ns: str = "s.public.t") -> dict[str, Any]:
    """A Debezium (PostgreSQL) Envelope Avro schema whose before/after record has ``value_fields``."""
    return {"type": "record", "name": "Envelope", "namespace": ns, "connect.name": f"{ns}.Envelope", "fields": [
        {"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": value_fields,
                                             "connect.name": f"{ns}.Value"}], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
                                    "fields": [{"name": "connector", "type": "string"},
                                               {"name": "lsn", "type": ["null", "long"], "default": None},
                                               {"name": "ts_ms", "type": "long"}]}},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}


def opt(name: str, type_: Any) -> dict[str, Any]:
    """An optional Avro field (``["null", type]``, default null), as Debezium writes nullable columns."""
    return {"name": name, "type": ["null", type_], "default": None}


def avro_decimal(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "scale": scale, "precision": precision, "connect.version": 1,
            "connect.parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
            "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}


def register(registry: Any, subject: str, schema: dict[str, Any]) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient(registry.client_config)
    return client.register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def wire(schema: dict[str, Any], schema_id: int, datum: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def avro_event(schema: dict[str, Any], schema_id: int, row: dict[str, Any], lsn: int, op: str = "c",
               key: bytes | None = None) -> tuple[bytes | None, bytes]:
    src = {"connector": "postgresql", "lsn": lsn, "ts_ms": 1700000000000 + lsn}
    datum = {"before": row if op == "d" else None, "after": None if op == "d" else row, "source": src, "op": op,
             "ts_ms": src["ts_ms"] + 1}
    return key, wire(schema, schema_id, datum)
