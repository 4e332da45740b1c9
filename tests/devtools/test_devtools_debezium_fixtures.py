"""Generated events have the shape of real Debezium output (fixtures under /work/shared/fixtures/debezium)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from devtools.debezium import (
    ChangeEventGenerator,
    GeneratorConfig,
    JsonSerializer,
    avro_key_schema,
    avro_value_schema,
    connect_key_schema,
)


def _load(path: Path) -> Any:
    text = path.read_text()
    return json.loads(text[text.index("{") :])  # skips license headers of .avsc dumps


def _fields(struct: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["field"]: f for f in struct["fields"]}


def _without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def _create_event(connector: str, schemas_enable: bool = True) -> dict[str, Any]:
    gen = ChangeEventGenerator(7, GeneratorConfig(connector=connector))  # type: ignore[arg-type]
    gen.snapshot(2)
    (rec,) = gen.insert()
    key, value = JsonSerializer(schemas_enable).serialize(rec)
    assert key is not None and value is not None
    return {"key": json.loads(key), "value": json.loads(value)}


def test_postgres_create_matches_real_3_0_event(fixtures_dir: Path) -> None:
    real = _load(fixtures_dir / "postgresql/pg_real_3.0.0_create_arrays_temporal_with_full_schema.json")
    ours = _create_event("postgresql")["value"]
    assert set(ours) == set(real) == {"schema", "payload"}
    real_fields, our_fields = _fields(real["schema"]), _fields(ours["schema"])
    assert list(our_fields) == list(real_fields)  # before, after, source, transaction, op, ts_ms, ts_us, ts_ns
    for name in ("source", "transaction", "op", "ts_ms", "ts_us", "ts_ns"):
        assert our_fields[name] == real_fields[name], name
    for name in ("before", "after"):
        assert {k: v for k, v in our_fields[name].items() if k != "fields"} == {
            **{k: v for k, v in real_fields[name].items() if k != "fields"},
            "name": "dbserver1.public.customers.Value",
        }
    assert {k: v for k, v in ours["schema"].items() if k != "fields"} == {
        **{k: v for k, v in real["schema"].items() if k != "fields"},
        "name": "dbserver1.public.customers.Envelope",
    }
    # Payload: same keys, same JSON types in the source block, string snapshot, sequence as a JSON-array string.
    assert list(ours["payload"]) == list(real["payload"])
    ours_src, real_src = ours["payload"]["source"], real["payload"]["source"]
    assert list(ours_src) == list(real_src)
    assert {k: type(v) for k, v in ours_src.items()} == {k: type(v) for k, v in real_src.items()}
    assert len(json.loads(ours_src["sequence"])) == 2 and ours["payload"]["op"] == "c"


def test_postgres_create_matches_doc_schema_field_names(fixtures_dir: Path) -> None:
    doc = _load(fixtures_dir / "postgresql/pg_doc_create_with_full_schema.json")
    ours = _create_event("postgresql")["value"]
    doc_src, our_src = _fields(doc["schema"])["source"], _fields(ours["schema"])["source"]
    # The doc's schema forgets `sequence` although its payload carries it; real events have it in both.
    assert set(_fields(doc_src)) | {"sequence"} == set(_fields(our_src))
    assert set(doc["payload"]["source"]) == set(ours["payload"]["source"])
    assert set(_fields(doc["schema"])) <= set(_fields(ours["schema"]))  # doc omits only `transaction`


def test_mysql_event_matches_real_2_7_snapshot_read(fixtures_dir: Path) -> None:
    real = _load(fixtures_dir / "mysql/mysql_real_2.7.0_snapshot_read_value.json")
    real_key = _load(fixtures_dir / "mysql/mysql_real_2.7.0_delete_key.json")
    ours = _create_event("mysql")
    value = ours["value"]
    assert list(_fields(value["schema"])) == list(_fields(real["schema"]))
    real_src, our_src = _fields(real["schema"])["source"], _fields(value["schema"])["source"]
    # 2.7.0.Alpha1 still had mandatory ts_us/ts_ns (later releases, like the PG 3.0 sample, made them optional).
    assert [_without(f, "optional") for f in our_src["fields"]] == [_without(f, "optional") for f in real_src["fields"]]
    assert list(value["payload"]["source"]) == list(real["payload"]["source"])
    assert re.fullmatch(r"mysql-bin\.\d{6}", value["payload"]["source"]["file"])
    assert set(ours["key"]) == {"schema", "payload"}
    assert {k: v for k, v in ours["key"]["schema"].items() if k != "name"} == {
        k: v for k, v in real_key["schema"].items() if k != "name"
    }
    assert ours["key"]["schema"]["name"] == "dbserver1.inventory.customers.Key"


def test_column_schemas_match_real_connect_types(fixtures_dir: Path) -> None:
    sqlserver = _load(fixtures_dir / "misc/sqlserver_1.6.0_decimal_delete_value.json")
    temporal = _load(fixtures_dir / "unwrap-smt/pg_unwrap_addfields_temporal_types.json")
    ours = _fields(_fields(_create_event("postgresql")["value"]["schema"])["after"])
    real_decimal = _fields(_fields(sqlserver["schema"])["before"])["sal"]
    real_date = _fields(temporal["schema"])["c_date"]
    real_micro = _fields(temporal["schema"])["c_timestamp6"]
    assert _without(ours["balance"], "field", "parameters") == _without(real_decimal, "field", "parameters")
    assert set(ours["balance"]["parameters"]) == set(real_decimal["parameters"])
    assert _without(ours["birth_date"], "field") == _without(real_date, "field")
    assert _without(ours["updated_at"], "field", "optional") == _without(real_micro, "field", "optional")


def test_schemas_disabled_is_payload_only(fixtures_dir: Path) -> None:
    lines = (fixtures_dir / "postgresql/pg_real_1.2.1_replica_identity_full.jsonl").read_text().splitlines()
    real = json.loads(lines[0])
    ours = _create_event("postgresql", schemas_enable=False)
    assert ours["key"] == {"id": ours["value"]["after"]["id"]}
    assert set(real) <= set(ours["value"])  # 2.x adds transaction/ts_us/ts_ns
    assert isinstance(ours["value"]["after"]["balance"], (str, type(None)))  # base64 decimal


def test_avro_schemas_match_confluent_dumps(fixtures_dir: Path) -> None:
    real = _load(fixtures_dir / "avro/mysql_value_envelope_customers.avsc")
    gen = ChangeEventGenerator(1, GeneratorConfig(connector="mysql"))
    ours = avro_value_schema(gen.table)
    topic = gen.table.topic
    assert (ours["name"], ours["namespace"], ours["connect.name"]) == ("Envelope", topic, f"{topic}.Envelope")
    real_f, our_f = {f["name"]: f for f in real["fields"]}, {f["name"]: f for f in ours["fields"]}
    assert set(real_f) <= set(our_f)
    assert our_f["transaction"] == real_f["transaction"] and our_f["op"] == real_f["op"]
    assert our_f["after"] == real_f["after"] and our_f["before"]["type"][1]["connect.name"] == f"{topic}.Value"
    real_src = {f["name"]: f for f in real_f["source"]["type"]["fields"]}
    our_src = {f["name"]: f for f in our_f["source"]["type"]["fields"]}
    assert {k: v for k, v in our_src.items() if k not in ("ts_us", "ts_ns")} == real_src
    pg_dump = fixtures_dir / "avro/pg_1.9.7_avro_key_value_schemas_and_avro_json_records.txt"
    pg_key = json.loads(pg_dump.read_text().splitlines()[0].split("^")[0])
    ours_key = avro_key_schema(ChangeEventGenerator(1).table)
    assert set(ours_key) == set(pg_key) and ours_key["name"] == "Key" and ours_key["connect.name"].endswith(".Key")
    assert connect_key_schema(gen.table)["name"] == f"{gen.table.topic}.Key"
    decimal = next(f for f in ours["fields"][0]["type"][1]["fields"] if f["name"] == "balance")["type"][1]
    assert decimal["logicalType"] == "decimal" and decimal["connect.parameters"]["scale"] == "2"
