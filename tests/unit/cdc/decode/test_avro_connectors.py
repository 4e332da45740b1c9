"""Connectors in Avro: the same events staged from JsonConverter and from AvroConverter records are identical.

MongoDB (documents as JSON text) and flattened (ExtractNewRecordState) records are decoded per record in Avro; SQL
Server and Oracle events take the vectorised path, which must stage exactly what the per-record path stages. JSON
records are the ``schemas.enable=true`` shape; their Avro twins are made by Connect's AvroData rules
(``connect_avro``) and registered in the real test schema registry (``devtools.registry``). Real samples:
../shared/fixtures/debezium/misc (SQL Server 1.6.0 delete) and unwrap-smt (flattened PostgreSQL snapshot row).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pyarrow as pa
import pytest

from cdc.config.load import parse_config
from cdc.decode.avro import AvroDecoder
from cdc.decode.avro_batch import stage_avro
from cdc.decode.avro_connectors import AvroByConnector, FlattenedAvroDecoder, MongoAvroDecoder, is_mongodb_schema
from cdc.decode.factory import make_decoder
from cdc.positions.ordering import Ordering
from cdc.schema.columns import RAW_KEY, RAW_VALUE, arrow_schema, staging_columns
from cdc.stage.reader import ReadSpec, stage_messages
from devtools.registry import LocalSchemaRegistry
from tests.integration import events
from tests.unit.cdc.decode.avro_history import first_difference
from tests.unit.cdc.decode.connect_avro import AvroWire, avro_schema
from tests.unit.cdc.decode.connector_events import MONGO_ENVELOPE, MONGO_SOURCE, flat, flat_schema, mongo
from tests.unit.cdc.decode.samples import load

_topics = itertools.count()


@pytest.fixture(scope="module")
def registry():
    with LocalSchemaRegistry() as r:
        yield r


def _cfg(fmt: str, topic: str, registry_url: str | None = None, **table: Any):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "x:1"}, "format": fmt,
                         **({"schema_registry": {"url": registry_url}} if registry_url else {}),
                         "catalog": {"warehouse": "/tmp/w"}, "tables": [{"topic": topic, "target": "a.b", **table}]})


def stage(cfg, records, ordering: Ordering, key: tuple[str, ...], fast: bool = True):
    """(bound decoder, staging rows without the raw bytes columns) of ``records`` as the job stages them."""
    msgs = [(i, 1_700_000_000_000 + i, k, v) for i, (k, v) in enumerate(records)]
    dec = make_decoder(cfg, cfg.tables[0])
    cols = dec.resolve_columns([(k, v) for _, _, k, v in msgs], [])
    bound = dec.bind(cols)
    spec = ReadSpec("a.b", {}, bound, ordering, key, tuple(cols), tuple(staging_columns(cols, ordering.columns)), 7,
                    fast_avro=fast)
    table = pa.Table.from_batches(list(stage_messages(spec, cfg.tables[0].topic, 0, msgs)),
                                  arrow_schema(spec.staging_columns)).sort_by("__offset")
    return bound, cols, table.drop_columns([RAW_KEY, RAW_VALUE])


def json_and_avro(registry, records, ordering, key, **table):
    """Stage JSON ``records`` and their Avro twins; (json decoder, avro decoder, json rows, avro rows)."""
    topic = f"conn{next(_topics)}.inventory.customers"
    wire = AvroWire(registry.url, topic)
    avro_records = [wire.record(k, v) for k, v in records]
    jdec, jcols, jrows = stage(_cfg("json", topic, **table), records, ordering, key)
    adec, acols, arows = stage(_cfg("avro", topic, registry.url, **table), avro_records, ordering, key)
    assert [(c.name, c.arrow_type) for c in acols] == [(c.name, c.arrow_type) for c in jcols]
    assert arows.num_rows == len(records)
    assert arows.equals(jrows), first_difference(arows, jrows)
    return jdec, adec, jrows, arows


# ---------------------------------------------------------------------------------------------------------- MongoDB

DOC = {"_id": {"$numberLong": "1004"}, "first_name": "Anne", "email": "annek@noanswer.org",
       "visits": {"$numberInt": "3"}, "address": {"city": "Oslo", "zip": "0150"}, "tags": ["a", "b"],
       "since": {"$date": 1558965508000}, "score": {"$numberDouble": "1.5"}, "bio": "__debezium_unavailable_value"}

MONGO_EVENTS = [
    mongo("r", "1004", DOC, ts_s=100, ord=1),
    mongo("c", '{"$oid": "596e275826f08b2730779e1f"}',
          {"_id": {"$oid": "596e275826f08b2730779e1f"}, "first_name": "Bo", "nested": {"a": [1, {"b": None}]}},
          ts_s=101, ord=1),
    # update with the full document (capture.mode change_streams_update_full)
    mongo("u", "1004", {**DOC, "first_name": "Anne Marie"}, ts_s=102, ord=1, updated={"first_name": "Anne Marie"}),
    # update without it (change_streams): the set fields, the removed ones NULL, every other column keeps its value
    mongo("u", "1004", ts_s=103, ord=2, updated={"visits": {"$numberInt": "4"}, "email": "a@b.c"}, removed=["tags"]),
    # refused: a nested path, truncated arrays, nothing at all (dead letters naming capture.mode)
    mongo("u", "1004", ts_s=104, ord=1, updated={"address.city": "Bergen"}),
    mongo("u", "1004", ts_s=104, ord=2, updated={}, truncated=[{"field": "tags", "size": 1}]),
    mongo("u", "1004", ts_s=104, ord=3),
    mongo("d", '{"$oid": "596e275826f08b2730779e1f"}', ts_s=105, ord=1),
    mongo("tombstone", '{"$oid": "596e275826f08b2730779e1f"}'),
]


def test_mongodb_avro_stages_exactly_what_json_stages(registry):
    jdec, adec, _, rows = json_and_avro(registry, MONGO_EVENTS, Ordering("mongodb"), ("_id",))
    assert isinstance(adec, MongoAvroDecoder) and not isinstance(adec, AvroDecoder)  # per record, explicitly
    by = rows.to_pylist()
    assert [r["__kind"] for r in by] == ["change"] * 4 + ["error"] * 3 + ["change", "tombstone"]
    assert by[0]["_id"] == "1004" and by[0]["visits"] == 3 and by[0]["address"] == '{"city":"Oslo","zip":"0150"}'
    assert by[0]["tags"] == '["a","b"]' and by[0]["since"] == "2019-05-27T13:58:28Z" and by[0]["score"] == 1.5
    assert by[0]["bio"] is None and by[0]["__unavailable"] == ["bio"]  # the placeholder text, as in JSON
    assert by[1]["_id"] == '{"$oid": "596e275826f08b2730779e1f"}' and by[1]["nested"] == '{"a":[1,{"b":null}]}'
    assert by[2]["first_name"] == "Anne Marie" and by[2]["__unavailable"] == ["bio"]
    partial = by[3]
    assert (partial["visits"], partial["email"], partial["tags"]) == (4, "a@b.c", None)
    assert set(partial["__unavailable"]) == {c.name for c in jdec._columns} - {"_id", "visits", "email", "tags"}
    assert "address.city" in by[4]["__error"] and "truncatedArrays" in by[5]["__error"]
    assert "capture.mode" in by[6]["__error"]
    assert by[7]["__op"] == "d" and by[7]["_id"] == '{"$oid": "596e275826f08b2730779e1f"}'
    assert (by[3]["__oplog_ts_sec"], by[3]["__oplog_ord"]) == (103, 2)


def test_mongodb_avro_matches_schemaless_json_too_and_keys_tombstones_by_id(registry):
    schemaless = [mongo(*a[:2], **{**a[2], "schema": False}) for a in [
        ("r", "1004", {"doc": DOC, "ts_s": 100}), ("u", "1004", {"ts_s": 101, "updated": {"first_name": "X"}}),
        ("tombstone", "1004", {})]]
    topic = f"conn{next(_topics)}.inventory.customers"
    wire = AvroWire(registry.url, topic)
    with_schema = [mongo(*a[:2], **a[2]) for a in [
        ("r", "1004", {"doc": DOC, "ts_s": 100}), ("u", "1004", {"ts_s": 101, "updated": {"first_name": "X"}}),
        ("tombstone", "1004", {})]]
    _, _, jrows = stage(_cfg("json", topic), schemaless, Ordering("mongodb"), ("_id",))
    adec, _, arows = stage(_cfg("avro", topic, registry.url), [wire.record(k, v) for k, v in with_schema],
                           Ordering("mongodb"), ("_id",))
    assert arows.equals(jrows), first_difference(arows, jrows)
    tomb = adec.decode(*wire.record(*with_schema[2]))
    assert tomb.kind == "tombstone" and tomb.key == {"_id": "1004"}  # deletes its row on compacted topics


def test_mongodb_envelopes_are_recognised_by_the_source_struct_or_the_json_document():
    """Debezium names the MongoDB Source struct io.debezium.connector.mongo.Source (MongoDbSourceInfoStructMaker)."""
    assert is_mongodb_schema(json.dumps(avro_schema(MONGO_ENVELOPE)))
    renamed = {**MONGO_SOURCE, "name": "io.debezium.connector.mongodb.Source"}
    assert is_mongodb_schema(json.dumps(avro_schema({**MONGO_ENVELOPE, "fields": [
        renamed if f["field"] == "source" else f for f in MONGO_ENVELOPE["fields"]]})))
    unnamed = {**MONGO_SOURCE, "name": "x.Source"}
    assert is_mongodb_schema(json.dumps(avro_schema({**MONGO_ENVELOPE, "fields": [
        unnamed if f["field"] == "source" else f for f in MONGO_ENVELOPE["fields"]]})))  # after: Json text
    relational = json.loads(events.sqlserver("c", 1, {"id": 1, "name": "a", "bio": None}, "0000002d:00000a40:0003",
                                             None)[1])["schema"]
    assert not is_mongodb_schema(json.dumps(avro_schema(relational)))
    assert not is_mongodb_schema(json.dumps(avro_schema(flat_schema())))


# ------------------------------------------------------------------------------------------------------ flattened

def test_flattened_avro_stages_exactly_what_json_stages(registry):
    row = {"id": 1, "name": "a", "born": 19000, "amount": "ARY=", "bio": "__debezium_unavailable_value"}  # 2.78
    recs = [flat("r", 1, {**row, "bio": "x"}, 100), flat("c", 2, {**row, "id": 2}, 110, commit=105),
            flat("u", 1, {**row, "name": "a2"}, 120, commit=115), flat("d", 2, {**row, "id": 2}, 130, commit=125),
            flat("d", 2, None, 130),  # the tombstone after it (drop.tombstones=false)
            flat("u", 1, {**row, "loyalty": 3}, 140, commit=135,  # a column added at the source
                 extra=[{"type": "int64", "optional": True, "field": "loyalty"}])]
    _, adec, _, rows = json_and_avro(registry, recs, Ordering("postgresql"), ("id",), envelope="flattened")
    assert isinstance(adec, FlattenedAvroDecoder) and adec.vectorised is False
    by = rows.to_pylist()
    assert [(r["__kind"], r["__op"]) for r in by] == [("change", "r"), ("change", "c"), ("change", "u"),
                                                      ("change", "d"), ("tombstone", None), ("change", "u")]
    assert str(by[0]["amount"]) == "2.78" and by[0]["born"].isoformat() == "2022-01-08"
    assert by[2]["__unavailable"] == ["bio"] and by[5]["loyalty"] == 3
    assert (by[2]["__last_commit_lsn"], by[2]["__lsn"]) == (115, 120)
    assert "__deleted" not in rows.column_names and "__source_sequence" not in rows.column_names


def test_real_flattened_snapshot_row_in_avro(registry):
    doc = load("unwrap-smt/pg_unwrap_addfields_rewrite_orders.json")
    raw = json.dumps(doc).encode()
    key = json.dumps({"schema": {"type": "struct", "name": "testc.inventory.orders.Key", "optional": False,
                                 "fields": [{"type": "int32", "optional": False, "field": "id"}]},
                      "payload": {"id": 10003}}).encode()
    _, _, _, rows = json_and_avro(registry, [(key, raw)], Ordering("postgresql"), ("id",), envelope="flattened")
    r = rows.to_pylist()[0]
    assert (r["id"], r["purchaser"], r["quantity"], r["product_id"], r["__op"]) == (10003, 1002, 2, 106, "r")
    assert (r["__last_commit_lsn"], r["__lsn"]) == (33832959, 33832960)


def test_flattened_is_accepted_with_avro_and_routed_per_record():
    cfg = _cfg("avro", "a.b.c", "http://r:8081", envelope="flattened")
    dec = make_decoder(cfg, cfg.tables[0])
    assert isinstance(dec, FlattenedAvroDecoder) and not dec.vectorised
    cfg = _cfg("avro", "a.b.c", "http://r:8081")
    assert isinstance(make_decoder(cfg, cfg.tables[0]), AvroByConnector)


# ------------------------------------------------------------------------------------- SQL Server and Oracle (fast)

def fast_and_slow(registry, records, kind: str, key=("id",)):
    topic = f"conn{next(_topics)}.dbo.customers"
    wire = AvroWire(registry.url, topic)
    avro_records = [wire.record(k, v) for k, v in records]
    cfg = _cfg("avro", topic, registry.url)
    out = {fast: stage(cfg, avro_records, Ordering(kind), key, fast)[2] for fast in (True, False)}
    assert out[True].equals(out[False]), first_difference(out[True], out[False])
    _, jcols, jrows = stage(_cfg("json", topic), records, Ordering(kind), key)
    assert out[True].equals(jrows), first_difference(out[True], jrows)
    dec = make_decoder(cfg, cfg.tables[0])
    cols = dec.resolve_columns([], [])
    spec = ReadSpec("a.b", {}, dec.bind(cols), Ordering(kind), key, tuple(cols),
                    tuple(staging_columns(cols, Ordering(kind).columns)), 7)
    msgs = [(i, 1_700_000_000_000 + i, k, v) for i, (k, v) in enumerate(avro_records)]
    batches, left = stage_avro(spec, topic, 0, msgs, arrow_schema(spec.staging_columns))
    return out[True], sum(b.num_rows for b in batches), [m[0] for m in left]


def test_sqlserver_avro_takes_the_fast_path_with_the_per_record_positions(registry):
    ss = events.sqlserver
    recs = [ss("r", 1, {"id": 1, "name": "snap", "bio": None}, "0000002d:00000a40:0003", None, None),
            ss("c", 2, {"id": 2, "name": "b", "bio": "__debezium_unavailable_value"}, "0000002e:00000010:0002",
               "0000002e:00000008:0004"),
            ss("u", 1, {"id": 1, "name": "v2", "bio": None}, "ffffffff:ffffffff:ffff", "0000002e:00000008:0005", 7),
            ss("d", 2, {"id": 2, "name": "b", "bio": None}, "0000002f:00000010:0002", "0000002f:00000008:0001"),
            ss("u", 1, {"id": 1, "name": "bad", "bio": None}, "not-an-lsn", None)]
    rows, fast, left = fast_and_slow(registry, recs, "sqlserver")
    assert fast == 4 and left == [4]  # the bad LSN goes back: the per-record path names it
    by = rows.to_pylist()
    assert [(r["__commit_lsn_vlf"], r["__commit_lsn_pos"], r["__change_lsn_vlf"], r["__change_lsn_pos"],
             r["__event_serial_no"]) for r in by[:3]] == [
        (0x2D, 0xA40 << 16 | 3, 0, 0, 0), (0x2E, 0x10 << 16 | 2, 0x2E, 0x8 << 16 | 4, 1),
        (0xFFFFFFFF, 0xFFFFFFFF << 16 | 0xFFFF, 0x2E, 0x8 << 16 | 5, 7)]
    assert by[1]["__unavailable"] == ["bio"] and by[4]["__kind"] == "error" and "not-an-lsn" in by[4]["__error"]


def test_real_sqlserver_delete_with_decimals_in_avro(registry):
    key = load("misc/sqlserver_1.6.0_decimal_delete_key.json")
    value = load("misc/sqlserver_1.6.0_decimal_delete_value.json")
    rec = (json.dumps(key).encode(), json.dumps(value).encode())
    rows, fast, left = fast_and_slow(registry, [rec], "sqlserver", key=("empno",))
    assert fast == 1 and left == []
    r = rows.to_pylist()[0]
    assert (r["__op"], r["empno"], str(r["sal"]), str(r["comm"])) == ("d", 11, "200000.0000", "10.0000")
    assert (r["__commit_lsn_vlf"], r["__commit_lsn_pos"], r["__change_lsn_pos"], r["__event_serial_no"]) == (
        0x3A, 0x2F50 << 16 | 5, 0x2F50 << 16 | 2, 1)


def test_oracle_avro_takes_the_fast_path_with_scns_wider_than_63_bits(registry):
    big = 2**64 + 10
    recs = [events.oracle("r", 1, {"id": 1, "name": "snap", "bio": None}, 5000, None),
            events.oracle("u", 1, {"id": 1, "name": "v2", "bio": None}, 4990, 5010),
            events.oracle("u", 1, {"id": 1, "name": "big", "bio": None}, big, big + 1),
            events.oracle("d", 1, {"id": 1, "name": "big", "bio": None}, -3, None)]
    rows, fast, left = fast_and_slow(registry, recs, "oracle")
    assert fast == 3 and left == [3]
    by = rows.to_pylist()
    assert [(r["__commit_scn_hi"], r["__commit_scn_lo"], r["__scn_hi"], r["__scn_lo"]) for r in by[:3]] == [
        (0, 5000, 0, 5000), (0, 5010, 0, 4990), (*divmod(big + 1, 10**18), *divmod(big, 10**18))]
    assert by[3]["__kind"] == "error" and "SCN" in by[3]["__error"]
