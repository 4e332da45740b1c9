"""Access to the shared Debezium samples (<repo>/../shared/fixtures/debezium; never copied into the repo)."""

from __future__ import annotations

import io
import json
import re
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest

FIXTURES = Path(__file__).resolve().parents[4].parent / "shared" / "fixtures" / "debezium"
PLACEHOLDER = "__debezium_unavailable_value"


def path(rel: str) -> Path:
    p = FIXTURES / rel
    if not p.exists():
        pytest.skip(f"Debezium fixture {rel} not available at {FIXTURES}")
    return p


def raw(rel: str) -> bytes:
    return path(rel).read_bytes()


def load(rel: str) -> Any:
    return json.loads(path(rel).read_text())


def relaxed(rel: str) -> list[Any]:
    """The JSON documents of a verbatim doc block: '{ ... }' → null, trailing commas dropped, several docs allowed."""
    text = path(rel).read_text()
    text = re.sub(r"\{\s*\.\.\.\s*\}", "null", text)
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    docs, pos, dec = [], 0, json.JSONDecoder()
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        doc, pos = dec.raw_decode(text, pos)
        docs.append(doc)


def after_license(rel: str) -> str:
    """Text after a leading /* ... */ license comment."""
    text = path(rel).read_text()
    return text[text.index("*/") + 2:] if text.lstrip().startswith("/*") else text


def wire(schema: Any, schema_id: int, datum: Any) -> bytes:
    """Confluent wire format: magic 0, 4-byte big-endian schema id, schemaless Avro datum."""
    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def avro_json_to_python(o: Any) -> Any:
    """Avro-JSON encoding (RisingWave dump) → plain datum: unwrap union branches, bytes strings → latin-1 bytes."""
    if isinstance(o, dict):
        if len(o) == 1 and "." in next(iter(o)):
            return avro_json_to_python(next(iter(o.values())))
        if set(o) == {"scale", "value"}:
            return {"scale": o["scale"], "value": o["value"].encode("latin-1")}
        return {k: avro_json_to_python(v) for k, v in o.items()}
    return o


def pg_avro_dump() -> tuple[dict, dict, list[tuple[dict, dict | None]]]:
    """(key schema, value schema, [(key, value or None)]) of the PostgreSQL 1.9.7 Avro dump."""
    lines = path("avro/pg_1.9.7_avro_key_value_schemas_and_avro_json_records.txt").read_text().splitlines()
    key_schema, value_schema = (json.loads(x) for x in lines[0].split("^"))
    records = []
    for line in lines[1:]:
        k, v = line.split("^")
        records.append((json.loads(k), avro_json_to_python(json.loads(v)) if v else None))
    return key_schema, value_schema, records
