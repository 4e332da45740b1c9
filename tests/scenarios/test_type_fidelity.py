"""Exact type mapping end to end: Debezium JSON and Avro events → broker → job → Iceberg, read back through Spark.

Real samples where they exist (PostgreSQL 3.0.0 arrays/temporal, MySQL 2.4.0 all types, PostgreSQL 1.9.7 Avro with
VariableScaleDecimal), plus one event per format carrying every mapped Debezium/Connect semantic type.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import pytest

from tests.scenarios.typed_events import (
    avro_decimal,
    avro_envelope,
    avro_event,
    decimal_b64,
    json_event,
    opt,
    register,
    wire,
)
from tests.unit.cdc.decode import samples

pytestmark = pytest.mark.integration

UTC = dt.timezone.utc


def types(spark, table: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(table).schema.fields}


def by_key(spark, table: str, key: str) -> dict:
    return {r[key]: r.asDict() for r in spark.table(table).collect()}


def micros(spark, table: str, key: str, expr: str) -> dict:
    """Timestamps WITH zone compared as exact µs since the epoch (independent of Python's local zone)."""
    return {r[0]: r[1] for r in spark.sql(f"SELECT {key}, {expr} FROM {table}").collect()}


def epoch_us(*args) -> int:
    return (dt.datetime(*args, tzinfo=UTC) - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


def test_postgres_3_arrays_and_temporal_sample(make_pipe, spark):
    p = make_pipe(primary_key=["c_id"])
    p.send((None, samples.raw("postgresql/pg_real_3.0.0_create_arrays_temporal_with_full_schema.json")))
    assert p.run()["inserted"] == 1
    t = types(spark, p.target)
    assert (t["c_integer"], t["c_uuid"], t["c_json"], t["c_date"]) == ("array<int>", "array<string>", "array<string>",
                                                                        "array<date>")
    assert t["c_timestamp0"] == t["c_timestamp6"] == "array<timestamp_ntz>"  # Timestamp/MicroTimestamp: wall clock
    assert t["c_timestamptz"] == "array<timestamp>"  # ZonedTimestamp: an instant
    assert (t["c_time"], t["c_time_whtz"], t["c_binary"]) == ("array<string>", "array<bigint>", "array<binary>")
    r = by_key(spark, p.target, "c_id")[1]
    assert r["c_integer"] == [10, 20] and r["c_text"] == ["Hello", "World"]
    assert r["c_uuid"] == ["123e4567-e89b-12d3-a456-426614174000", "987e6543-e21b-45d3-b456-426614174111"]
    assert r["c_jsonb"] == ['{"role": "admin"}', '{"role": "user"}']
    assert r["c_date"] == [dt.date(2025, 1, 30)]
    base = dt.datetime(2025, 1, 30, 8, 0, 0)
    expected_us = {0: 0, 1: 100000, 2: 120000, 3: 123000, 4: 123400, 5: 123450, 6: 123456}
    for i, us in expected_us.items():
        assert r[f"c_timestamp{i}"] == [base + dt.timedelta(microseconds=us)], i
    assert micros(spark, p.target, "c_id", "transform(c_timestamptz, x -> unix_micros(x))")[1] == [
        1738224000000000, 1738224000000000]
    assert r["c_time"] == ["08:00:00Z", "08:30:00Z"]  # ZonedTime: kept as the ISO string
    assert r["c_time_whtz"] == [28800000000, 53130000000]  # MicroTime: µs since midnight
    assert [bytes(b) for b in r["c_binary"]] == [b"John", b"Jane"]


def test_mysql_2_4_all_types_sample(make_pipe, spark):
    lines = samples.path("mysql/mysql_real_2.4.0_alltypes_key_value_with_schema.txt").read_text().splitlines()
    docs = [line.encode() for line in lines if line.startswith("{")]
    p = make_pipe()  # primary key from the message key schema (_id)
    p.send(*zip(docs[0::2], docs[1::2]))
    assert p.run()["inserted"] == 2
    t = types(spark, p.target)
    assert (t["_tinyint"], t["_smallint"], t["_bigint"], t["_float"], t["_double"]) == (
        "int", "int", "bigint", "float", "double")
    assert (t["_numeric"], t["_date"], t["_time"], t["_year"]) == ("string", "date", "bigint", "int")
    assert (t["_datetime6"], t["_timestamp"], t["_bin"], t["_boolean"]) == ("timestamp_ntz", "timestamp", "binary",
                                                                             "boolean")
    assert t["_point"] == t["_geometry"] == "struct<wkb:binary,srid:int>"
    r = by_key(spark, p.target, "_id")[1]
    assert (r["_tinyint"], r["_smallint_unsigned"], r["_bigint_unsigned"], r["_float"], r["_double"]) == (
        1, 2000, 20000000000, 1.5, 1.000011)
    assert r["_numeric"] == "12345.110" and r["_fixed"] == "123456789876543212345678987654321.110"  # mode string
    assert r["_date"] == dt.date(2023, 3, 23) and r["_year"] == 2023 and r["_time"] == 36803000000
    assert r["_datetime"] == dt.datetime(2023, 3, 23, 14, 30, 5)
    assert r["_datetime3"] == dt.datetime(2023, 3, 23, 14, 30, 5, 123000)
    assert r["_datetime6"] == dt.datetime(2023, 3, 23, 14, 30, 5, 123456)
    ts = micros(spark, p.target, "_id", "struct(unix_micros(_timestamp), unix_micros(_timestamp0))")[1]
    assert tuple(ts) == (1679554810123456, 1679501400000000)
    assert bytes(r["_bin"]) == b"bytes\x00\x00\x00\x00\x00" and r["_json"] == '{"a": "b"}'
    assert (r["_enum"], r["_set"], r["_boolean"], r["_bool"]) == ("value1", "a,b", True, False)
    assert bytes(r["_point"]["wkb"]) == bytes.fromhex("0101000000000000000000f03f000000000000f03f")
    assert r["_point"]["srid"] is None


def test_postgres_avro_variable_scale_decimal_sample(make_pipe, registry, spark):
    key_schema, value_schema, records = samples.pg_avro_dump()
    p = make_pipe(fmt="avro", schema_registry=registry.client_config)
    kid = register(registry, f"{p.topic}-key", key_schema)
    vid = register(registry, f"{p.topic}-value", value_schema)
    p.send(*[(wire(key_schema, kid, k), None if v is None else wire(value_schema, vid, v)) for k, v in records])
    s = p.run()
    assert (s["dead_letters"], s["events_skipped"]) == (0, 1)  # the tombstone
    t = types(spark, p.target)
    assert (t["price"], t["order_status"], t["order_id"]) == ("decimal(38,10)", "int", "int")
    rows = by_key(spark, p.target, "order_id")
    assert 1 not in rows  # deleted
    prices = {k: r["price"] for k, r in rows.items()}
    assert all(isinstance(v, Decimal) and v.as_tuple().exponent == -10 for v in prices.values())
    raw = [v["after"] for _, v in records if v and v.get("after")]
    for k, r in rows.items():
        last = [a for a in raw if a["order_id"] == k][-1]
        unscaled = int.from_bytes(last["price"]["value"], "big", signed=True)
        assert r["price"] == Decimal(unscaled).scaleb(-last["price"]["scale"]), k  # exact


# One event per format with every mapped semantic type. Expected values are exact.
WKB = bytes.fromhex("0101000000000000000000f03f000000000000f03f")
ROW = {
    "id": 1, "d": 19439, "t_ms": 36803123, "t_us": 36803123456, "ts_ms": 1679581805123, "ts_us": 1679581805123456,
    "ts_ns": 1679581805123456789, "ts_neg": -1, "tz": "2023-03-23T07:00:10.123456789+01:00",
    "amount": Decimal("12345678.9012"), "vsd": (3, 123456), "js": '{"a": [1, 2]}',
    "uid": "123e4567-e89b-12d3-a456-426614174000", "en": "b", "raw": b"\x00\xffbin", "tiny": -128, "small": 32767,
    "tags": ["x", None, "z"], "nums": [2**40, -1], "geo": {"wkb": WKB, "srid": 4326}, "f32": 1.5, "f64": 0.1,
    "flag": True,
}
EXPECTED_TYPES = {
    "id": "bigint", "d": "date", "t_ms": "bigint", "t_us": "bigint", "ts_ms": "timestamp_ntz",
    "ts_us": "timestamp_ntz", "ts_ns": "timestamp_ntz", "ts_neg": "timestamp_ntz", "tz": "timestamp",
    "amount": "decimal(12,4)", "vsd": "decimal(38,10)", "js": "string", "uid": "string", "en": "string",
    "raw": "binary", "tiny": "int", "small": "int", "tags": "array<string>", "nums": "array<bigint>",
    "geo": "struct<wkb:binary,srid:int>", "f32": "float", "f64": "double", "flag": "boolean",
}
EXPECTED = {
    "d": dt.date(2023, 3, 23), "t_ms": 36803123000, "t_us": 36803123456,
    "ts_ms": dt.datetime(2023, 3, 23, 14, 30, 5, 123000), "ts_us": dt.datetime(2023, 3, 23, 14, 30, 5, 123456),
    "ts_ns": dt.datetime(2023, 3, 23, 14, 30, 5, 123456),  # nanoseconds floored to µs
    "ts_neg": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),  # -1 ns floors to -1 µs (not truncated to 0)
    "amount": Decimal("12345678.9012"), "vsd": Decimal("123.4560000000"), "js": '{"a": [1, 2]}',
    "uid": "123e4567-e89b-12d3-a456-426614174000", "en": "b", "raw": b"\x00\xffbin", "tiny": -128, "small": 32767,
    "tags": ["x", None, "z"], "nums": [2**40, -1], "f32": 1.5, "f64": 0.1, "flag": True,
}


def _json_event() -> tuple:
    def f(field, type_, name=None, **extra):
        return {"type": type_, "optional": field != "id", "field": field, **({"name": name} if name else {}), **extra}

    fields = [
        f("id", "int64"), f("d", "int32", "io.debezium.time.Date"), f("t_ms", "int32", "io.debezium.time.Time"),
        f("t_us", "int64", "io.debezium.time.MicroTime"), f("ts_ms", "int64", "io.debezium.time.Timestamp"),
        f("ts_us", "int64", "io.debezium.time.MicroTimestamp"), f("ts_ns", "int64", "io.debezium.time.NanoTimestamp"),
        f("ts_neg", "int64", "io.debezium.time.NanoTimestamp"), f("tz", "string", "io.debezium.time.ZonedTimestamp"),
        f("amount", "bytes", "org.apache.kafka.connect.data.Decimal",
          parameters={"scale": "4", "connect.decimal.precision": "12"}),
        f("vsd", "struct", "io.debezium.data.VariableScaleDecimal",
          fields=[{"type": "int32", "optional": False, "field": "scale"},
                  {"type": "bytes", "optional": False, "field": "value"}]),
        f("js", "string", "io.debezium.data.Json"), f("uid", "string", "io.debezium.data.Uuid"),
        f("en", "string", "io.debezium.data.Enum", parameters={"allowed": "a,b"}), f("raw", "bytes"),
        f("tiny", "int8"), f("small", "int16"), f("tags", "array", items={"type": "string", "optional": True}),
        f("nums", "array", items={"type": "int64", "optional": True}),
        f("geo", "struct", "io.debezium.data.geometry.Geometry",
          fields=[{"type": "bytes", "optional": False, "field": "wkb"},
                  {"type": "int32", "optional": True, "field": "srid"}]),
        f("f32", "float"), f("f64", "double"), f("flag", "boolean"),
    ]
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    scale, unscaled = ROW["vsd"]
    row = {**ROW, "amount": decimal_b64(str(ROW["amount"]), 4),
           "vsd": {"scale": scale, "value": b64(unscaled.to_bytes(3, "big", signed=True))}, "raw": b64(ROW["raw"]),
           "geo": {"wkb": b64(WKB), "srid": 4326}}
    json.dumps(row)
    return json_event(fields, row, 10)


def _avro_schema() -> dict:
    def named(type_, name, **extra):
        return {"type": type_, "connect.version": 1, "connect.name": name, **extra}

    return avro_envelope([
        {"name": "id", "type": "long"},
        opt("d", named("int", "io.debezium.time.Date", logicalType="date")),
        opt("t_ms", named("int", "io.debezium.time.Time", logicalType="time-millis")),
        opt("t_us", named("long", "io.debezium.time.MicroTime", logicalType="time-micros")),
        opt("ts_ms", named("long", "io.debezium.time.Timestamp", logicalType="timestamp-millis")),
        opt("ts_us", named("long", "io.debezium.time.MicroTimestamp", logicalType="timestamp-micros")),
        opt("ts_ns", named("long", "io.debezium.time.NanoTimestamp")),
        opt("ts_neg", named("long", "io.debezium.time.NanoTimestamp")),
        opt("tz", named("string", "io.debezium.time.ZonedTimestamp")),
        opt("amount", avro_decimal(12, 4)),
        opt("vsd", {"type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data",
                    "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
                    "connect.doc": "Variable scaled decimal", "connect.version": 1,
                    "connect.name": "io.debezium.data.VariableScaleDecimal"}),
        opt("js", named("string", "io.debezium.data.Json")),
        opt("uid", named("string", "io.debezium.data.Uuid")),
        opt("en", named("string", "io.debezium.data.Enum", **{"connect.parameters": {"allowed": "a,b"}})),
        opt("raw", "bytes"),
        opt("tiny", {"type": "int", "connect.type": "int8"}),
        opt("small", {"type": "int", "connect.type": "int16"}),
        opt("tags", {"type": "array", "items": ["null", "string"]}),
        opt("nums", {"type": "array", "items": ["null", "long"]}),
        opt("geo", {"type": "record", "name": "Geometry", "namespace": "io.debezium.data.geometry",
                    "fields": [{"name": "wkb", "type": "bytes"}, {"name": "srid", "type": ["null", "int"],
                                                                   "default": None}],
                    "connect.name": "io.debezium.data.geometry.Geometry"}),
        opt("f32", "float"), opt("f64", "double"), opt("flag", "boolean"),
    ])


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_every_semantic_type_exact(fmt, make_pipe, registry, spark):
    if fmt == "json":
        p = make_pipe(primary_key=["id"])
        p.send(_json_event())
    else:
        p = make_pipe(fmt="avro", schema_registry=registry.client_config, primary_key=["id"])
        schema = _avro_schema()
        sid = register(registry, f"{p.topic}-value", schema)
        scale, unscaled = ROW["vsd"]
        p.send(avro_event(schema, sid, {**ROW, "vsd": {"scale": scale,
                                                        "value": unscaled.to_bytes(3, "big", signed=True)}}, 10))
    s = p.run()
    assert (s["inserted"], s["dead_letters"]) == (1, 0)
    t = types(spark, p.target)
    assert {k: t[k] for k in EXPECTED_TYPES} == EXPECTED_TYPES
    r = by_key(spark, p.target, "id")[1]
    got = {k: (bytes(r[k]) if isinstance(r[k], (bytes, bytearray)) else r[k]) for k in EXPECTED}
    assert got == EXPECTED
    assert str(r["amount"]) == "12345678.9012" and str(r["vsd"]) == "123.4560000000"
    assert (bytes(r["geo"]["wkb"]), r["geo"]["srid"]) == (WKB, 4326)
    # ZonedTimestamp with +01:00 and nanoseconds → the exact instant in µs (06:00:10.123456 UTC)
    assert micros(spark, p.target, "id", "unix_micros(tz)")[1] == epoch_us(2023, 3, 23, 6, 0, 10, 123456)
