"""MongoDB events through the JSON decoder.

No real MongoDB sample is in ../shared/fixtures/debezium; the events below follow the MongoDB connector chapter of
Debezium's documentation (documentation/modules/ROOT/pages/connectors/mongodb.adoc: create/update/delete examples,
key ``{"id": "1004"}``, ``after`` as Extended JSON text, ``updateDescription`` for change streams, ``patch`` for
the 1.x oplog connector)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdc.common.errors import DecodeError
from cdc.decode.json import JsonDecoder
from cdc.decode.mongodb import unwrap
from cdc.positions.ordering import resolve

SOURCE = {"version": "2.5.0.Final", "connector": "mongodb", "name": "fulfillment", "ts_ms": 1558965508000,
          "snapshot": "false", "db": "inventory", "rs": "rs0", "collection": "customers", "ord": 31}
KEY_SCHEMA = {"type": "struct", "name": "fulfillment.inventory.customers.Key", "optional": False,
              "fields": [{"field": "id", "type": "string", "optional": False}]}
DOC = ('{"_id": {"$numberLong": "1004"},"first_name": "Anne","last_name": "Kretchmar","email": "annek@noanswer.org",'
       '"visits": {"$numberInt": "3"},"address": {"city": "Oslo","zip": "0150"},"tags": ["a", "b"],'
       '"since": {"$date": 1558965508000}}')


def key(id_text: str, schema: bool = True) -> bytes:
    payload = {"id": id_text}
    return json.dumps({"schema": KEY_SCHEMA, "payload": payload} if schema else payload).encode()


def value(op: str, schema: bool = True, **fields) -> bytes:
    payload = {"before": None, "after": None, "source": {**SOURCE, **fields.pop("source", {})}, "op": op,
               "ts_ms": 1558965515240, **fields}
    if not schema:
        return json.dumps(payload).encode()
    json_field = {"type": "string", "optional": True, "name": "io.debezium.data.Json", "version": 1}
    return json.dumps({"schema": {"type": "struct", "name": "fulfillment.inventory.customers.Envelope", "fields": [
        {**json_field, "field": "before"}, {**json_field, "field": "after"},
        {"type": "struct", "optional": False, "field": "source", "fields": []},
        {"type": "string", "optional": True, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]},
        "payload": payload}).encode()


def bound(samples):
    dec = JsonDecoder("fulfillment.inventory.customers", "__debezium_unavailable_value")
    cols = dec.resolve_columns(samples)
    return dec.bind(cols), cols, dec.key_columns(samples)


@pytest.mark.parametrize("schema", [True, False])
def test_mongodb_create_maps_top_level_fields_to_columns_and_the_key_to_id(schema):
    rec = (key("1004", schema), value("c", schema, after=DOC))
    dec, cols, key_cols = bound([rec])
    assert [(c.name, c.arrow_type) for c in key_cols] == [("_id", pa.string())]
    types = {c.name: c.arrow_type for c in cols}
    assert types == {"_id": pa.string(), "first_name": pa.string(), "last_name": pa.string(), "email": pa.string(),
                     "visits": pa.int64(), "address": pa.string(), "tags": pa.string(), "since": pa.string()}
    ev = dec.decode(*rec)
    assert ev.op == "c" and ev.key == {"_id": "1004"} and ev.unavailable == ()
    assert ev.row == {"_id": "1004", "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org",
                      "visits": 3, "address": '{"city":"Oslo","zip":"0150"}', "tags": '["a","b"]',
                      "since": "2019-05-27T13:58:28Z"}
    assert resolve("auto", ev.source["connector"], "t").values(ev.source, ev.ts_ms, ev.op) == (1558965508, 31)


def test_mongodb_objectid_key_is_the_key_text_and_the_row_agrees():
    oid = '{"$oid": "596e275826f08b2730779e1f"}'
    doc = '{"_id": {"$oid": "596e275826f08b2730779e1f"}, "name": "x"}'
    rec = (key(oid), value("c", after=doc))
    dec, _, _ = bound([rec])
    ev = dec.decode(*rec)
    assert ev.key == {"_id": oid} and ev.row["_id"] == oid
    deleted = dec.decode(key(oid), value("d"))
    assert deleted.op == "d" and deleted.row == {"_id": oid}


def test_mongodb_update_with_full_document_replaces_the_row():
    dec, _, _ = bound([(key("1004"), value("c", after=DOC))])
    ev = dec.decode(key("1004"), value("u", after=DOC.replace('"Anne"', '"Anne Marie"'), updateDescription={
        "removedFields": None, "updatedFields": '{"first_name": "Anne Marie"}', "truncatedArrays": None}))
    assert ev.row["first_name"] == "Anne Marie" and ev.row["email"] == "annek@noanswer.org"
    assert ev.unavailable == ()


def test_mongodb_update_without_full_document_sets_the_changed_fields_and_keeps_the_others():
    dec, cols, _ = bound([(key("1004"), value("c", after=DOC))])
    ev = dec.decode(key("1004"), value("u", updateDescription={
        "removedFields": ["email"], "updatedFields": '{"first_name": "Anne Marie", "visits": {"$numberInt": "4"}}',
        "truncatedArrays": None}))
    assert ev.op == "u"
    assert {k: v for k, v in ev.row.items() if v is not None or k == "email"} == {
        "_id": "1004", "first_name": "Anne Marie", "visits": 4, "email": None}
    # every other column keeps its stored value (the unchanged-TOAST rule of cdc.merge)
    assert set(ev.unavailable) == {c.name for c in cols} - {"_id", "first_name", "visits", "email"}


def test_mongodb_oplog_patch_set_and_unset_are_applied_replacements_too():
    dec, cols, _ = bound([(key("1004"), value("c", after=DOC))])
    ev = dec.decode(key("1004"), value("u", patch='{"$v": 1, "$set": {"first_name": "Anne Marie"}, '
                                                  '"$unset": {"tags": true}}',
                                       filter='{"_id": {"$numberLong": "1004"}}'))
    assert ev.row["first_name"] == "Anne Marie" and ev.row["tags"] is None
    assert set(ev.unavailable) == {c.name for c in cols} - {"_id", "first_name", "tags"}
    replaced = dec.decode(key("1004"), value("u", patch='{"first_name": "New", "last_name": "Doc"}'))
    assert replaced.row["first_name"] == "New" and replaced.unavailable == ()  # a full replacement document


@pytest.mark.parametrize("fields, match", [
    ({"updateDescription": {"updatedFields": '{"address.city": "Bergen"}'}}, "nested field 'address.city'"),
    ({"updateDescription": {"updatedFields": "{}", "truncatedArrays": [{"field": "tags", "newSize": 1}]}},
     "truncatedArrays"),
    ({"patch": '{"$v": 2, "diff": {"u": {"first_name": "x"}}}'}, r"\$v: 2"),
    ({"patch": '{"$inc": {"visits": 1}}'}, r"\$inc"),
    ({}, "capture.mode"),
])
def test_mongodb_partial_updates_that_cannot_be_applied_are_refused_clearly(fields, match):
    dec, _, _ = bound([(key("1004"), value("c", after=DOC))])
    with pytest.raises(DecodeError, match=match):
        dec.decode(key("1004"), value("u", **fields))


def test_extended_json_scalars_unwrap():
    assert unwrap({"$numberLong": "9007199254740993"}) == 9007199254740993
    assert unwrap({"$numberDouble": "1.5"}) == 1.5
    assert unwrap({"$numberDecimal": "1.10"}) == "1.10"
    assert unwrap({"$date": {"$numberLong": "-1000"}}) == "1969-12-31T23:59:59Z"
    assert unwrap({"$date": "2020-01-01T00:00:00Z"}) == "2020-01-01T00:00:00Z"
    assert unwrap({"city": "Oslo"}) == {"city": "Oslo"}


def test_mongodb_event_outside_the_mongodb_decoders_is_refused_clearly():
    from cdc.decode.envelope import row_plan, to_event

    payload = json.loads(value("c", schema=False, after=DOC))
    with pytest.raises(DecodeError, match="not the MongoDB connector's"):
        to_event(payload, {"id": "1004"}, row_plan([], None, "__debezium_unavailable_value"))


@pytest.mark.parametrize("schema", [True, False])
def test_mongodb_tombstone_key_is_the_id_column_so_compacted_topics_delete_the_row(schema):
    dec, _, _ = bound([(key("1004", schema), value("c", schema, after=DOC))])
    tomb = dec.decode(key("1004", schema), None)
    assert tomb.kind == "tombstone" and tomb.key == {"_id": "1004"}
