"""JsonConverter records → the same records as Confluent's AvroConverter writes them (test helper).

``avro_schema`` maps a Kafka Connect schema (the ``schema`` of a ``schemas.enable=true`` JsonConverter record) the
way Connect's ``AvroData`` does: structs → records named after the Connect name (``connect.name`` kept), optional
fields → ``["null", T]`` with default null, Connect names/versions/parameters → ``connect.*`` properties, Decimal →
``bytes`` with ``logicalType: decimal``; a struct name seen twice (``before``/``after``) is a reference the second
time. ``avro_datum`` turns the JSON payload into the datum (base64 decimals → ``Decimal``). ``AvroWire`` registers
the schemas (TopicNameStrategy subjects) in a schema registry and encodes Confluent wire-format messages.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import struct
from decimal import Decimal
from typing import Any

import fastavro
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

_PRIMITIVES = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float32": "float",
               "float64": "double", "boolean": "boolean", "string": "string", "bytes": "bytes"}
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def avro_schema(connect: dict[str, Any]) -> dict[str, Any]:
    """The Avro schema of a Connect schema (top level: a record)."""
    return _node(connect, set(), "ConnectDefault")


def _node(s: dict[str, Any], defined: set[str], fallback: str) -> Any:
    t = s["type"]
    if t == "struct":
        full = s.get("name") or fallback
        if full in defined:
            return full
        defined.add(full)
        ns, _, name = full.rpartition(".")
        fields = []
        for f in s.get("fields") or ():
            inner = _node(f, defined, f"{full}_{f['field']}")
            if f.get("optional", True):
                fields.append({"name": f["field"], "type": ["null", inner], "default": None})
            else:
                fields.append({"name": f["field"], "type": inner})
        out: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if ns:
            out["namespace"] = ns
        if s.get("name"):
            out["connect.name"] = s["name"]
        return out
    if t == "array":
        return {"type": "array", "items": _node(s["items"], defined, fallback)}
    if t == "map":
        return {"type": "map", "values": _node(s["values"], defined, fallback)}
    out = {"type": _PRIMITIVES[t]}
    if s.get("name") == DECIMAL:
        params = s.get("parameters") or {}
        out.update({"logicalType": "decimal", "scale": int(params.get("scale", 0)),
                    "precision": int(params.get("connect.decimal.precision", 38))})
    if s.get("version") is not None:
        out["connect.version"] = s["version"]
    if s.get("parameters"):
        out["connect.parameters"] = dict(s["parameters"])
    if s.get("name"):
        out["connect.name"] = s["name"]
    if s.get("default") is not None:
        out["connect.default"] = s["default"]
    return out if len(out) > 1 else out["type"]


def avro_datum(connect: dict[str, Any], payload: Any) -> Any:
    """The Avro datum of a JsonConverter payload (base64 decimals → Decimal)."""
    if payload is None:
        return None
    t = connect["type"]
    if t == "struct":
        return {f["field"]: avro_datum(f, payload.get(f["field"])) for f in connect.get("fields") or ()}
    if t == "array":
        return [avro_datum(connect["items"], v) for v in payload]
    if connect.get("name") == DECIMAL:
        scale = int((connect.get("parameters") or {}).get("scale", 0))
        return Decimal(int.from_bytes(base64.b64decode(payload), "big", signed=True)).scaleb(-scale)
    if t == "bytes" and isinstance(payload, str):
        return base64.b64decode(payload)
    return payload


class AvroWire:
    """Registers Connect schemas as Avro under ``<topic>-key`` / ``<topic>-value`` and encodes messages."""

    def __init__(self, registry_url: str, topic: str):
        self.client = SchemaRegistryClient({"url": registry_url})
        self.topic = topic
        self._ids: dict[tuple[str, str], tuple[int, Any]] = {}

    def encode(self, what: str, connect: dict[str, Any], payload: Any) -> bytes | None:
        if payload is None:
            return None
        text = json.dumps(avro_schema(connect))
        hit = self._ids.get((what, text))
        if hit is None:
            sid = self.client.register_schema(f"{self.topic}-{what}", Schema(text, "AVRO"))
            hit = self._ids[(what, text)] = (sid, fastavro.parse_schema(copy.deepcopy(json.loads(text))))
        buf = io.BytesIO()
        buf.write(struct.pack(">bI", 0, hit[0]))
        fastavro.schemaless_writer(buf, hit[1], avro_datum(connect, payload))
        return buf.getvalue()

    def record(self, key: bytes | None, value: bytes | None) -> tuple[bytes | None, bytes | None]:
        """A JsonConverter record (``schemas.enable=true`` key and value bytes) → the AvroConverter record."""
        out = []
        for what, data in (("key", key), ("value", value)):
            doc = json.loads(data) if data else None
            out.append(None if doc is None else self.encode(what, doc["schema"], doc["payload"]))
        return out[0], out[1]
