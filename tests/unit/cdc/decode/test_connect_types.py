"""cdc.types: Connect/Debezium → Arrow mapping and converters."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from cdc.common.errors import DecodeError
from cdc.decode.connect_types import (
    GEOMETRY_TYPE,
    ConnectField,
    arrow_type,
    converter,
    days_from_civil,
    from_avro,
    from_connect_json,
    identity,
    parse_zoned_timestamp,
)
from tests.unit.cdc.decode import samples

US = 1_000_000


def f(type_: str, name: str | None = None, **params: str) -> ConnectField:
    return ConnectField(type_, name, params)


@pytest.mark.parametrize("type_, expected", [
    ("int8", pa.int32()), ("int16", pa.int32()), ("int32", pa.int32()), ("int64", pa.int64()),
    ("float32", pa.float32()), ("float", pa.float32()), ("float64", pa.float64()), ("double", pa.float64()),
    ("boolean", pa.bool_()), ("string", pa.string()), ("bytes", pa.binary()),
])
def test_primitives(type_: str, expected: pa.DataType) -> None:
    assert arrow_type(f(type_)) == expected


@pytest.mark.parametrize("type_, name, expected", [
    ("int32", "io.debezium.time.Date", pa.date32()),
    ("int32", "org.apache.kafka.connect.data.Date", pa.date32()),
    ("int32", "io.debezium.time.Time", pa.int64()),
    ("int64", "io.debezium.time.MicroTime", pa.int64()),
    ("int64", "io.debezium.time.NanoTime", pa.int64()),
    ("int32", "org.apache.kafka.connect.data.Time", pa.int64()),
    ("int64", "io.debezium.time.Timestamp", pa.timestamp("us")),
    ("int64", "io.debezium.time.MicroTimestamp", pa.timestamp("us")),
    ("int64", "io.debezium.time.NanoTimestamp", pa.timestamp("us")),
    ("int64", "org.apache.kafka.connect.data.Timestamp", pa.timestamp("us")),
    ("string", "io.debezium.time.ZonedTimestamp", pa.timestamp("us", tz="UTC")),
    ("string", "io.debezium.time.ZonedTime", pa.string()),
    ("int32", "io.debezium.time.Year", pa.int32()),
    ("string", "io.debezium.data.Json", pa.string()),
    ("string", "io.debezium.data.Uuid", pa.string()),
    ("string", "io.debezium.data.Enum", pa.string()),
    ("string", "io.debezium.data.EnumSet", pa.string()),
    ("string", "io.debezium.data.Xml", pa.string()),
    ("string", "io.debezium.data.Ltree", pa.string()),
    ("bytes", "io.debezium.data.Bits", pa.binary()),
    ("struct", "io.debezium.data.VariableScaleDecimal", pa.decimal128(38, 10)),
    ("struct", "io.debezium.data.geometry.Geometry", GEOMETRY_TYPE),
    ("struct", "io.debezium.data.geometry.Point", GEOMETRY_TYPE),
])
def test_semantic_types(type_: str, name: str, expected: pa.DataType) -> None:
    assert arrow_type(f(type_, name)) == expected


def test_decimal_type_precision_default_and_cap() -> None:
    d = "org.apache.kafka.connect.data.Decimal"
    assert arrow_type(f("bytes", d, scale="2", **{"connect.decimal.precision": "10"})) == pa.decimal128(10, 2)
    assert arrow_type(f("bytes", d, scale="3")) == pa.decimal128(38, 3)
    assert arrow_type(f("bytes", d, scale="2", **{"connect.decimal.precision": "64"})) == pa.decimal128(38, 2)


def test_decimal_from_json_base64_sqlserver_sample() -> None:
    doc = samples.load("misc/sqlserver_1.6.0_decimal_delete_value.json")
    before = from_connect_json(doc["schema"]["fields"][0])
    sal = before.child("sal")
    assert arrow_type(sal) == pa.decimal128(19, 4)
    row = doc["payload"]["before"]
    assert converter(sal)(row["sal"]) == Decimal("200000.0000")
    assert str(converter(sal)(row["sal"])) == "200000.0000"
    assert converter(before.child("comm"))(row["comm"]) == Decimal("10.0000")


def test_decimal_two_complement_avro_decimal_and_overflow() -> None:
    conv = converter(f("bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
                       **{"connect.decimal.precision": "4"}))
    assert str(conv((-123).to_bytes(2, "big", signed=True))) == "-1.23"
    assert str(conv(Decimal("12.34"))) == "12.34"
    assert str(conv(Decimal("1.5"))) == "1.50"  # rescaled exactly
    with pytest.raises(DecodeError, match="fractional"):
        conv(Decimal("1.234"))
    with pytest.raises(DecodeError, match="does not fit"):
        conv((12345).to_bytes(2, "big", signed=True))  # 123.45 needs precision 5


def test_variable_scale_decimal() -> None:
    vsd = f("struct", "io.debezium.data.VariableScaleDecimal")
    conv = converter(vsd)
    assert conv({"scale": 1, "value": b"i"}) == Decimal("10.5")
    assert str(conv({"scale": 1, "value": b"i"})) == "10.5000000000"
    assert str(conv({"scale": 0, "value": "AQ=="})) == "1.0000000000"  # JSON: base64
    assert str(conv({"scale": 12, "value": (1200).to_bytes(2, "big")})) == "1.2E-9"  # trailing zeros drop exactly
    with pytest.raises(DecodeError, match="more than 10 fractional digits"):
        conv({"scale": 12, "value": (1234).to_bytes(2, "big")})
    with pytest.raises(DecodeError, match="does not fit"):
        conv({"scale": 0, "value": (10**29).to_bytes(13, "big")})
    # target precision/scale can be passed in
    assert arrow_type(vsd, variable_scale=(20, 4)) == pa.decimal128(20, 4)
    assert str(converter(vsd, variable_scale=(20, 4))({"scale": 1, "value": b"i"})) == "10.5000"


def test_temporal_converters_exact() -> None:
    assert converter(f("int32", "io.debezium.time.Date")) is identity
    assert converter(f("int32", "io.debezium.time.Time"))(36_803_000) == 36_803_000_000
    assert converter(f("int64", "io.debezium.time.MicroTime"))(36_803_000_000) == 36_803_000_000
    assert converter(f("int64", "io.debezium.time.NanoTime"))(36_803_000_000_999) == 36_803_000_000
    assert converter(f("int32", "org.apache.kafka.connect.data.Time"))(1) == 1000
    assert converter(f("int64", "io.debezium.time.Timestamp"))(1679581805123) == 1679581805123000
    assert converter(f("int64", "org.apache.kafka.connect.data.Timestamp"))(-1) == -1000
    nano = converter(f("int64", "io.debezium.time.NanoTimestamp"))
    assert nano(1748996736150018999) == 1748996736150018
    assert nano(-1) == -1  # floored: 1969-12-31T23:59:59.999999
    with pytest.raises(DecodeError, match="overflows"):
        converter(f("int64", "io.debezium.time.Timestamp"))(9223372036825200000)  # PG infinity sentinel


@pytest.mark.parametrize("text, expected", [
    ("2025-01-30T08:00:00.000000Z", 1738224000 * US),
    ("2023-03-22T16:10:00Z", 1679501400 * US),
    ("2023-03-23T07:00:10.123456Z", 1679554810 * US + 123456),
    ("2023-03-23T08:00:10.123456789+01:00", 1679554810 * US + 123456),
    ("2023-03-23T01:30:10.1-05:30", 1679554810 * US + 100000),
    ("1969-12-31T23:59:59.999999Z", -1),
    ("1970-01-01T00:00:00Z", 0),
    ("-0043-03-15T12:00:00.000001Z", -63517780799999999),  # PostgreSQL's 0044-03-15 12:00:00.000001+00 BC
    # PostgreSQL timestamptz ±infinity: the µs sentinels Debezium sends for timestamp ±infinity (MicroTimestamp)
    ("infinity", 9223372036825200000),
    ("-infinity", -9223372036832400000),
])
def test_zoned_timestamp(text: str, expected: int) -> None:
    assert parse_zoned_timestamp(text) == expected


def test_zoned_timestamp_beyond_int64_micros_is_a_decode_error() -> None:
    """PostgreSQL's last timestamptz (year 294276) does not fit an int64 µs timestamp: a DecodeError naming it,
    not an overflow further down (Debezium 3.6.1 sends '+294276-12-31T23:59:59.999999Z')."""
    with pytest.raises(DecodeError, match="outside the int64 microsecond range"):
        parse_zoned_timestamp("+294276-12-31T23:59:59.999999Z")
    assert parse_zoned_timestamp("+294247-01-10T04:00:54.775807Z") == 2**63 - 1


@pytest.mark.parametrize("bad", ["Infinity", "+infinity", "2023-03-23T07:00:10", "2023-13-01T00:00:00Z", ""])
def test_zoned_timestamp_rejects(bad: str) -> None:
    with pytest.raises(DecodeError):
        parse_zoned_timestamp(bad)


def test_days_from_civil_matches_datetime() -> None:
    for d in (dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(2000, 2, 29), dt.date(2025, 1, 30),
              dt.date(9999, 12, 31)):
        assert days_from_civil(d.year, d.month, d.day) == (d - dt.date(1970, 1, 1)).days


@pytest.mark.parametrize("year", [0, -1, -43, -399, -400, -401, -4712, -100000, 10000, 294247])
@pytest.mark.parametrize("month, day", [(1, 1), (2, 28), (3, 1), (12, 31)])
def test_days_from_civil_outside_datetimes_years(year: int, month: int, day: int) -> None:
    """Years before 1 (BC: PostgreSQL's 44 BC is year -43) and after 9999, which only the exact parser reads: the
    Gregorian calendar repeats every 400 years (146097 days), so a shift into datetime's range is the oracle."""
    cycles = (year - 2000) // 400
    shifted = (dt.date(year - 400 * cycles, month, day) - dt.date(1970, 1, 1)).days
    assert days_from_civil(year, month, day) == shifted + 146097 * cycles


def test_geometry_array_map_struct() -> None:
    geo = converter(f("struct", "io.debezium.data.geometry.Point"))
    assert geo({"x": 1.0, "y": 1.0, "wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": None}) == {
        "wkb": bytes.fromhex("0101000000000000000000f03f000000000000f03f"), "srid": None}
    arr = ConnectField("array", items=f("int64", "io.debezium.time.Timestamp"))
    assert arrow_type(arr) == pa.list_(pa.timestamp("us"))
    assert converter(arr)([1, None]) == [1000, None]
    m = ConnectField("map", keys=f("string"), values=f("bytes"))
    assert arrow_type(m) == pa.map_(pa.string(), pa.binary())
    assert converter(m)({"a": "AQ==", "b": None}) == {"a": b"\x01", "b": None}
    s = ConnectField("struct", fields=(ConnectField("int32", "io.debezium.time.Date", field_name="d"),
                                       ConnectField("bytes", field_name="b")))
    assert arrow_type(s) == pa.struct([("d", pa.date32()), ("b", pa.binary())])
    assert converter(s)({"d": 3, "b": "AQ=="}) == {"d": 3, "b": b"\x01"}
    assert pa.array([converter(s)({"d": 3, "b": None})], type=arrow_type(s)).to_pylist() == [
        {"d": dt.date(1970, 1, 4), "b": None}]


def test_from_avro_customers_envelope() -> None:
    schema = json.loads(samples.path("avro/mysql_value_envelope_customers.avsc").read_text())
    env = from_avro(schema)
    after = env.child("after")
    assert after is not None and after.type == "struct" and after.optional
    assert [c.field_name for c in after.fields] == [c.field_name for c in env.child("before").fields]
    source = env.child("source")
    assert source.child("snapshot").name == "io.debezium.data.Enum"
    assert arrow_type(env.child("ts_ms")) == pa.int64()


def test_from_avro_connect_annotations() -> None:
    key_schema, value_schema, _ = samples.pg_avro_dump()
    value = from_avro(value_schema).child("after")
    assert arrow_type(value.child("price")) == pa.decimal128(38, 10)
    assert value.child("order_status").type == "int16"
    assert from_avro(key_schema).child("order_id").optional is False
    dec = from_avro({"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 2,
                     "connect.name": "org.apache.kafka.connect.data.Decimal",
                     "connect.parameters": {"scale": "2"}})
    assert arrow_type(dec) == pa.decimal128(38, 2)
    assert arrow_type(from_avro({"type": "int", "logicalType": "date"})) == pa.date32()
    assert arrow_type(from_avro({"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"})) == \
        pa.timestamp("us")
    with pytest.raises(DecodeError, match="union"):
        from_avro(["null", "int", "string"], "x")
