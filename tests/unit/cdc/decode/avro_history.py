"""Hand-built Debezium Avro schema histories, staged through both Avro paths (vectorised and per-record).

Schemas go through the real test schema registry (``devtools.registry``); messages are Confluent wire format
(offset, timestamp, key, value) tuples as the Kafka reader hands them to ``cdc.stage.reader.stage_messages``. The batch
columns are planned the way the job plans them (``cdc.schema.evolution.plan`` of the table's existing columns and the
subject's newest schema), so columns dropped at the source are still bound.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any, Sequence

import fastavro
import pyarrow as pa
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from cdc.config.load import parse_config
from cdc.decode.factory import make_decoder
from cdc.positions.ordering import Ordering
from cdc.schema import evolution
from cdc.schema.columns import Column, arrow_schema, staging_columns
from cdc.stage.reader import ReadSpec, stage_messages

PLACEHOLDER = "__debezium_unavailable_value"
Message = tuple[int, int | None, bytes | None, bytes | None]

PG_SOURCE: dict[str, Any] = {
    "type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "version", "type": "string"}, {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
        {"name": "snapshot", "type": [{"type": "string", "connect.version": 1,
                                       "connect.parameters": {"allowed": "true,last,false,incremental"},
                                       "connect.default": "false", "connect.name": "io.debezium.data.Enum"},
                                      "null"], "default": "false"},
        {"name": "db", "type": "string"}, {"name": "schema", "type": "string"}, {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
    ],
    "connect.name": "io.debezium.connector.postgresql.Source",
}


def envelope(namespace: str, row_fields: Sequence[dict[str, Any]], source: dict[str, Any] = PG_SOURCE) -> dict:
    """A Debezium envelope as the AvroConverter registers it: ``before`` defines ``Value``, ``after`` names it."""
    value = {"type": "record", "name": "Value", "fields": list(row_fields), "connect.name": f"{namespace}.Value"}
    return {"type": "record", "name": "Envelope", "namespace": namespace, "connect.name": f"{namespace}.Envelope",
            "fields": [{"name": "before", "type": ["null", value], "default": None},
                       {"name": "after", "type": ["null", "Value"], "default": None},
                       {"name": "source", "type": source},
                       {"name": "op", "type": "string"},
                       {"name": "ts_ms", "type": ["null", "long"], "default": None}]}


def key_schema(namespace: str, id_type: Any = "long") -> dict:
    return {"type": "record", "name": "Key", "namespace": namespace, "fields": [{"name": "id", "type": id_type}]}


def register(url: str, subject: str, schema: dict) -> int:
    return SchemaRegistryClient({"url": url}).register_schema(subject, Schema(json.dumps(schema), "AVRO"))


def wire(schema_id: int, parsed: Any, datum: Any) -> bytes:
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, parsed, datum)
    return buf.getvalue()


def pg_source(lsn: int | None, ts_ms: int = 1_700_000_000_000, snapshot: str = "false") -> dict[str, Any]:
    return {"version": "2.7.0.Final", "connector": "postgresql", "name": "db", "ts_ms": ts_ms, "snapshot": snapshot,
            "db": "inventory", "schema": "public", "table": "t", "txId": 7, "lsn": lsn}


def bound_columns(url: str, topic: str, existing: Sequence[Column] = (), allow_field_addition: bool = True,
                  ) -> tuple[Any, list[Column]]:
    """(unbound decoder, the batch's row columns) exactly as ``cdc.run`` plans them."""
    cfg = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": "avro",
                        "schema_registry": {"url": url}, "catalog": {"warehouse": "/tmp/w"},
                        "tables": [{"topic": topic, "target": "a.b",
                                    "allow_field_addition": allow_field_addition}]})
    dec = make_decoder(cfg, cfg.tables[0])
    return dec, evolution.plan(list(existing), dec.source_columns([], existing), allow_field_addition).columns


def stage_both(url: str, topic: str, msgs: Sequence[Message], existing: Sequence[Column] = (),
               connector: str = "postgresql", allow_field_addition: bool = True,
               key: tuple[str, ...] = ("id",)) -> dict[bool, pa.Table]:
    """The staging rows of ``msgs``, by the vectorised path (True) and by the per-record path only (False)."""
    dec, cols = bound_columns(url, topic, existing, allow_field_addition)
    ordering = Ordering(connector)
    out = {}
    for fast in (True, False):
        spec = ReadSpec("a.b", {}, dec.bind(cols), ordering, key, tuple(cols),
                        tuple(staging_columns(cols, ordering.columns)), 7, fast_avro=fast)
        batches = list(stage_messages(spec, topic, 0, list(msgs)))
        out[fast] = pa.Table.from_batches(batches, arrow_schema(spec.staging_columns)).sort_by("__offset")
    return out


def fast_share(url: str, topic: str, msgs: Sequence[Message], existing: Sequence[Column] = (),
               connector: str = "postgresql") -> tuple[int, int]:
    """(records staged by the vectorised path, records handed back to the per-record path)."""
    from cdc.decode.avro_batch import stage_avro

    dec, cols = bound_columns(url, topic, existing)
    ordering = Ordering(connector)
    spec = ReadSpec("a.b", {}, dec.bind(cols), ordering, ("id",), tuple(cols),
                    tuple(staging_columns(cols, ordering.columns)), 7, fast_avro=True)
    batches, left = stage_avro(spec, topic, 0, list(msgs), arrow_schema(spec.staging_columns))
    return sum(b.num_rows for b in batches), len(left)


def first_difference(a: pa.Table, b: pa.Table) -> str:
    if a.num_rows != b.num_rows:
        return f"rows {a.num_rows} != {b.num_rows}"
    for name in a.column_names:
        x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
        for i, (u, v) in enumerate(zip(x, y)):
            if u != v:
                return f"column {name} row {i} (offset {a.column('__offset')[i]}): fast={u!r} slow={v!r}"
    return "schemas differ: " + str(a.schema) + " vs " + str(b.schema)
