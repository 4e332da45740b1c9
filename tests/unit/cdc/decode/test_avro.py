"""cdc.decode.avro: Confluent wire format, writer→reader resolution, Connect semantics, registry errors."""

from __future__ import annotations

import json
import pickle
import socket
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from cdc.common.errors import DecodeError, SchemaRegistryUnavailable
from cdc.decode.avro import AvroDecoder, RegistrySource, StaticSource
from cdc.decode.model import CHANGE, TOMBSTONE
from cdc.schema.columns import Column
from tests.unit.cdc.decode import samples
from tests.unit.cdc.decode.samples import wire

TOPIC = "t"


def pg_decoder() -> tuple[AvroDecoder, list[tuple[bytes, bytes | None]], StaticSource]:
    key_schema, value_schema, records = samples.pg_avro_dump()
    src = StaticSource({1: key_schema, 2: value_schema}, {f"{TOPIC}-key": [1], f"{TOPIC}-value": [2]})
    encoded = [(wire(key_schema, 1, k), None if v is None else wire(value_schema, 2, v)) for k, v in records]
    return AvroDecoder(TOPIC, {}, samples.PLACEHOLDER, source=src), encoded, src


def test_pg_dump_variable_scale_decimal_snapshot_update_delete_tombstone() -> None:
    d, records, _ = pg_decoder()
    cols = d.resolve_columns([])
    assert cols == [Column("order_id", pa.int32(), False), Column("order_date", pa.int64()),
                    Column("customer_name", pa.string()),
                    Column("price", pa.decimal128(38, 10), True, "io.debezium.data.VariableScaleDecimal"),
                    Column("product_id", pa.int32()), Column("order_status", pa.int32())]
    assert d.key_columns([]) == [Column("order_id", pa.int32(), False)]
    b = d.bind(cols)
    events = [b.decode(k, v) for k, v in records]
    first = events[0]
    assert (first.kind, first.op, first.key, first.schema_id, first.ts_ms) == (CHANGE, "r", {"order_id": 1}, 2,
                                                                               1685975424096)
    assert first.row == {"order_id": 1, "order_date": 1558430840000, "customer_name": "Bob",
                         "price": Decimal("10.5"), "product_id": 1, "order_status": 1}
    assert str(first.row["price"]) == "10.5000000000"
    assert first.source == {"version": "1.9.7.Final", "connector": "postgresql", "name": "postgres",
                            "ts_ms": 1685975423896, "snapshot": "true", "db": "mydb", "sequence": '[null,"23911624"]',
                            "schema": "public", "table": "orders", "txId": 490, "lsn": 23911624, "xmin": None}
    assert [e.source["snapshot"] for e in events[:3]] == ["true", "true", "last"]
    assert events[3].op == "u" and events[3].row["product_id"] == 3
    delete = events[4]
    assert delete.op == "d" and delete.row["order_id"] == 1 and delete.row["customer_name"] is None
    assert events[5].kind == TOMBSTONE and events[5].key == {"order_id": 1}
    table = pa.Table.from_pylist([e.row for e in events[:5]],
                                 schema=pa.schema([pa.field(c.name, c.arrow_type) for c in cols]))
    assert table.column("price").to_pylist()[0] == Decimal("10.5000000000")


def item_schemas() -> tuple[dict, dict]:
    v1 = json.loads(samples.after_license("avro/mysql_value_envelope_item_v1_old.avsc"))
    v2 = json.loads(samples.after_license("avro/mysql_value_envelope_item_v2_new_columns_added.avsc"))
    return v1, v2


ITEM_ROW = {"id": b"\x01\x02", "account_id": 7, "title": "t", "query": None, "request_query_id": None, "page": None,
            "request_page_id": None, "source_rank_id": None, "property_id": None,
            "created": "2023-03-23T07:00:10.123456Z", "created_by": 1, "updated": "2023-03-23T08:00:10+01:00",
            "updated_by": 2, "version_id": None, "related_urls": '["u"]', "assignee": None, "status": "TO_DO",
            "tags": None, "deleted": False, "profile_id": None}
ITEM_SOURCE = {"version": "1.9", "connector": "mysql", "name": "db", "ts_ms": 1, "snapshot": "false", "db": "inv",
               "sequence": None, "table": "item", "server_id": 1, "gtid": None, "file": "mysql-bin.000003",
               "pos": 154, "row": 0, "thread": 7, "query": None}


def item_envelope(row: dict[str, Any], op: str = "c") -> dict[str, Any]:
    return {"before": None, "after": row, "source": ITEM_SOURCE, "op": op, "ts_ms": 2, "transaction": None}


def test_v1_datum_resolved_to_v2_reader_gets_new_column_defaults() -> None:
    v1, v2 = item_schemas()
    src = StaticSource({10: v1, 11: v2}, {f"{TOPIC}-value": [10, 11]})
    d = AvroDecoder(TOPIC, {}, samples.PLACEHOLDER, source=src)
    old_cols = [Column(c, pa.int32()) for c in ("account_id",)]
    cols = d.resolve_columns([], old_cols)
    names = [c.name for c in cols]
    assert names[0] == "account_id" and names[-4:] == ["notes", "search_engine_id", "locale_id", "language_id"]
    types = {c.name: c.arrow_type for c in cols}
    assert types["created"] == pa.timestamp("us", "UTC") and types["id"] == pa.binary()
    assert all(c.nullable for c in cols)  # added to an existing table: optional
    b = d.bind(cols)
    e = b.decode(None, wire(v1, 10, item_envelope(ITEM_ROW)))
    assert e.schema_id == 10
    assert e.row["notes"] is None and e.row["locale_id"] is None and "language_id" in e.row
    assert e.row["created"] == 1679554810123456 and e.row["updated"] == 1679554810000000
    assert e.row["id"] == b"\x01\x02" and e.row["related_urls"] == '["u"]' and e.row["status"] == "TO_DO"
    assert (e.source["file"], e.source["pos"], e.source["row"]) == ("mysql-bin.000003", 154, 0)
    e2 = b.decode(None, wire(v2, 11, item_envelope({**ITEM_ROW, "locale_id": 5, "notes": "{}"})))
    assert (e2.row["locale_id"], e2.row["notes"]) == (5, "{}")
    pa.Table.from_pylist([e.row, e2.row], schema=pa.schema([pa.field(c.name, c.arrow_type) for c in cols]))


def test_toast_placeholder_in_avro_string_and_bytes() -> None:
    v1, _ = item_schemas()
    src = StaticSource({10: v1}, {f"{TOPIC}-value": [10]})
    b = AvroDecoder(TOPIC, {}, "__ph", source=src)
    b = b.bind(b.resolve_columns([]))
    e = b.decode(None, wire(v1, 10, item_envelope({**ITEM_ROW, "title": "__ph", "profile_id": b"__ph"}, "u")))
    assert e.unavailable == ("title", "profile_id") and e.row["title"] is None and e.row["profile_id"] is None


CONNECT_SCHEMA = {
    "type": "record", "name": "Envelope", "namespace": "s.public.t", "fields": [
        {"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": ["null", {"type": "bytes", "scale": 2, "precision": 10, "connect.version": 1,
                                                 "connect.parameters": {"scale": "2",
                                                                        "connect.decimal.precision": "10"},
                                                 "connect.name": "org.apache.kafka.connect.data.Decimal",
                                                 "logicalType": "decimal"}], "default": None},
            {"name": "day", "type": ["null", {"type": "int", "connect.version": 1,
                                              "connect.name": "org.apache.kafka.connect.data.Date",
                                              "logicalType": "date"}], "default": None},
            {"name": "at", "type": ["null", {"type": "long", "connect.version": 1,
                                             "connect.name": "org.apache.kafka.connect.data.Timestamp",
                                             "logicalType": "timestamp-millis"}], "default": None},
            {"name": "micro", "type": ["null", {"type": "long", "connect.version": 1,
                                                "connect.name": "io.debezium.time.MicroTimestamp"}], "default": None},
            {"name": "nano_time", "type": ["null", {"type": "long", "connect.name": "io.debezium.time.NanoTime"}],
             "default": None},
            {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
            {"name": "attrs", "type": ["null", {"type": "map", "values": "long"}], "default": None},
            {"name": "geo", "type": ["null", {"type": "record", "name": "Geometry",
                                              "namespace": "io.debezium.data.geometry",
                                              "fields": [{"name": "wkb", "type": "bytes"},
                                                         {"name": "srid", "type": ["null", "int"], "default": None}],
                                              "connect.name": "io.debezium.data.geometry.Geometry"}], "default": None},
        ], "connect.name": "s.public.t.Value"}], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "connector", "type": "string"}, {"name": "lsn", "type": ["null", "long"], "default": None}]}},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ]}
KEY_SCHEMA = {"type": "record", "name": "Key", "namespace": "s.public.t", "fields": [{"name": "id", "type": "long"}]}


def connect_decoder() -> AvroDecoder:
    src = StaticSource({1: KEY_SCHEMA, 2: CONNECT_SCHEMA}, {f"{TOPIC}-key": [1], f"{TOPIC}-value": [2]})
    d = AvroDecoder(TOPIC, {}, samples.PLACEHOLDER, source=src)
    return d.bind(d.resolve_columns([]))


def test_connect_logical_types_exact() -> None:
    b = connect_decoder()
    assert {c.name: c.arrow_type for c in b._columns or []} == {
        "id": pa.int64(), "amount": pa.decimal128(10, 2), "day": pa.date32(), "at": pa.timestamp("us"),
        "micro": pa.timestamp("us"), "nano_time": pa.int64(), "tags": pa.list_(pa.string()),
        "attrs": pa.map_(pa.string(), pa.int64()),
        "geo": pa.struct([("wkb", pa.binary()), ("srid", pa.int32())])}
    row = {"id": 5, "amount": Decimal("12.34"), "day": 19439, "at": 1679581805123, "micro": 1679581805123456,
           "nano_time": 36803000000999, "tags": ["a"], "attrs": {"k": 1}, "geo": {"wkb": b"\x01", "srid": 4326}}
    value = wire(CONNECT_SCHEMA, 2, {"before": None, "after": row, "source": {"connector": "postgresql", "lsn": 9},
                                     "op": "c", "ts_ms": 3})
    e = b.decode(wire(KEY_SCHEMA, 1, {"id": 5}), value)
    assert e.key == {"id": 5}
    assert e.row == {"id": 5, "amount": Decimal("12.34"), "day": 19439, "at": 1679581805123000,
                     "micro": 1679581805123456, "nano_time": 36803000000, "tags": ["a"], "attrs": {"k": 1},
                     "geo": {"wkb": b"\x01", "srid": 4326}}
    assert str(e.row["amount"]) == "12.34"


def test_wire_format_errors() -> None:
    b = connect_decoder()
    good = wire(CONNECT_SCHEMA, 2, {"before": None, "after": {"id": 1}, "source": {"connector": "pg"}, "op": "c"})
    with pytest.raises(DecodeError, match="unknown magic byte 0x01"):
        b.decode(None, b"\x01" + good[1:])
    with pytest.raises(DecodeError, match="too short"):
        b.decode(None, b"\x00\x00")
    with pytest.raises(DecodeError, match="unknown schema id 99"):
        b.decode(None, b"\x00\x00\x00\x00\x63" + good[5:])
    with pytest.raises(DecodeError, match="corrupt Avro value"):
        b.decode(None, good[:-3])
    with pytest.raises(DecodeError, match="trailing bytes"):
        b.decode(None, good + b"\x00\x00")
    with pytest.raises(DecodeError, match="corrupt Avro key"):
        b.decode(b"\x00\x00\x00\x00\x01", good)


def test_newer_schema_id_refreshes_latest_once() -> None:
    v1, v2 = item_schemas()
    src = StaticSource({10: v1, 11: v2}, {f"{TOPIC}-value": [10]})
    d = AvroDecoder(TOPIC, {}, samples.PLACEHOLDER, source=src)
    cols = d.resolve_columns([])
    b = d.bind(cols)
    with pytest.raises(DecodeError, match="newer than the latest version"):  # id 11 not a version of the subject
        b.decode(None, wire(v2, 11, item_envelope(ITEM_ROW)))
    src.subjects[f"{TOPIC}-value"].append(11)  # registered after the batch started
    b = d.bind(cols)  # bound to the v1 columns; the reader is still v1 until the refresh
    e = b.decode(None, wire(v2, 11, item_envelope(ITEM_ROW)))  # new columns all null: no data lost
    assert e.row["account_id"] == 7
    with pytest.raises(DecodeError, match="'locale_id' is not a column of this batch"):
        b.decode(None, wire(v2, 11, item_envelope({**ITEM_ROW, "locale_id": 1})))


def test_pickled_decoder_keeps_schema_texts_not_clients() -> None:
    d, records, src = pg_decoder()
    b = d.bind(d.resolve_columns([]))
    b.decode(*records[0])
    calls = src.calls
    clone = pickle.loads(pickle.dumps(b))
    assert clone.decode(*records[1]).row["customer_name"] == "Alice"
    assert src.calls == calls  # the pickled copy carries its own StaticSource; texts came along anyway
    reg = RegistrySource({"url": "http://user:secret@127.0.0.1:1"})
    reg._client = object()
    state = pickle.loads(pickle.dumps(reg)).__dict__
    assert state["_client"] is None and "secret" not in reg.where


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_registry_unreachable_is_retryable() -> None:
    d = AvroDecoder(TOPIC, {"url": f"http://127.0.0.1:{_free_port()}", "max.retries": 0}, samples.PLACEHOLDER)
    with pytest.raises(SchemaRegistryUnavailable, match="unreachable"):
        d.resolve_columns([])
    with pytest.raises(SchemaRegistryUnavailable):
        d.bind([]).decode(None, b"\x00\x00\x00\x00\x07abc")


def test_with_local_schema_registry() -> None:
    registry_mod = pytest.importorskip("devtools.registry")
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    key_schema, value_schema, records = samples.pg_avro_dump()
    with registry_mod.LocalSchemaRegistry() as registry:
        client = SchemaRegistryClient(registry.client_config)
        kid = client.register_schema(f"{TOPIC}-key", Schema(json.dumps(key_schema), "AVRO"))
        vid = client.register_schema(f"{TOPIC}-value", Schema(json.dumps(value_schema), "AVRO"))
        d = AvroDecoder(TOPIC, registry.client_config, samples.PLACEHOLDER)
        assert d.key_columns([]) == [Column("order_id", pa.int32(), False)]
        b = pickle.loads(pickle.dumps(d.bind(d.resolve_columns([]))))  # as shipped to a Spark task
        events = [b.decode(wire(key_schema, kid, k), None if v is None else wire(value_schema, vid, v))
                  for k, v in records]
        assert events[0].row["price"] == Decimal("10.5") and events[-1].kind == TOMBSTONE
        with pytest.raises(DecodeError, match="unknown schema id 4242"):
            b.decode(None, b"\x00\x00\x00\x10\x92" + b"\x00")
        missing = AvroDecoder("nope", registry.client_config, samples.PLACEHOLDER)
        with pytest.raises(DecodeError, match="subject 'nope-value' not found"):
            missing.resolve_columns([])
        assert missing.key_columns([]) == []


def test_sources_of_one_registry_share_a_client_and_still_see_each_new_version() -> None:
    """``shared_client``: one HTTP client (and TLS context) per process and registry settings, not one per table;
    ``latest`` still asks the registry each time (a version registered meanwhile is seen, as by a new client)."""
    registry_mod = pytest.importorskip("devtools.registry")
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    _, value_schema, _ = samples.pg_avro_dump()
    newer = {**value_schema, "doc": "v2"}
    with registry_mod.LocalSchemaRegistry() as registry:
        writer = SchemaRegistryClient(registry.client_config)
        v1 = writer.register_schema(f"{TOPIC}-value", Schema(json.dumps(value_schema), "AVRO"))
        a, b = RegistrySource(registry.client_config), RegistrySource(dict(registry.client_config))
        assert a.latest(f"{TOPIC}-value")[0] == v1
        assert b.latest(f"{TOPIC}-value")[0] == v1 and a._client is b._client
        v2 = writer.register_schema(f"{TOPIC}-value", Schema(json.dumps(newer), "AVRO"))
        assert v2 != v1 and a.latest(f"{TOPIC}-value")[0] == v2 and b.latest(f"{TOPIC}-value")[0] == v2
        other = RegistrySource({**registry.client_config, "timeout": 7})
        other.schema(v1)
        assert other._client is not a._client  # other settings, another client
