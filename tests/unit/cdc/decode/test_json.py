"""cdc.decode.json: JsonConverter output with and without the schema envelope, on real Debezium samples."""

from __future__ import annotations

import json
import pickle
from decimal import Decimal

import pyarrow as pa
import pytest

from cdc.common.errors import DecodeError
from cdc.decode.json import JsonDecoder
from cdc.decode.model import CHANGE, TOMBSTONE
from cdc.schema.columns import Column
from tests.unit.cdc.decode import samples


def decoder() -> JsonDecoder:
    return JsonDecoder("topic", samples.PLACEHOLDER)


def to_arrow(rows: list[dict], cols: list[Column]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema([pa.field(c.name, c.arrow_type) for c in cols]))


def test_pg_create_with_full_schema() -> None:
    value = samples.raw("postgresql/pg_doc_create_with_full_schema.json")
    d = decoder()
    cols = d.resolve_columns([(None, value)])
    assert cols == [Column("id", pa.int32(), False), Column("first_name", pa.string(), False),
                    Column("last_name", pa.string(), False), Column("email", pa.string(), False)]
    e = d.bind(cols).decode(None, value)
    assert (e.kind, e.op, e.ts_ms, e.schema_id) == (CHANGE, "c", 1559033904863, None)
    assert e.row == {"id": 1, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"}
    assert e.source["lsn"] == 24023128 and e.source["txId"] == 555 and e.source["snapshot"] is True


def test_pg_3_arrays_and_temporal_exact_values() -> None:
    value = samples.raw("postgresql/pg_real_3.0.0_create_arrays_temporal_with_full_schema.json")
    d = decoder()
    cols = d.resolve_columns([(None, value)])
    types = {c.name: c.arrow_type for c in cols}
    assert types["c_date"] == pa.list_(pa.date32())
    assert types["c_timestamp0"] == pa.list_(pa.timestamp("us"))
    assert types["c_timestamptz"] == pa.list_(pa.timestamp("us", "UTC"))
    assert types["c_time"] == pa.list_(pa.string()) and types["c_time_whtz"] == pa.list_(pa.int64())
    assert types["c_binary"] == pa.list_(pa.binary()) and types["c_uuid"] == pa.list_(pa.string())
    row = d.bind(cols).decode(None, value).row
    assert row["c_date"] == [20118]
    assert row["c_timestamp0"] == [1738224000000000]
    assert row["c_timestamp3"] == [1738224000123000]
    assert row["c_timestamp6"] == [1738224000123456]
    assert row["c_timestamptz"] == [1738224000000000, 1738224000000000]
    assert row["c_uuid"] == ["123e4567-e89b-12d3-a456-426614174000", "987e6543-e21b-45d3-b456-426614174111"]
    assert row["c_json"] == ['{"name": "John"}', '{"name": "Jane"}']
    assert row["c_time"] == ["08:00:00Z", "08:30:00Z"] and row["c_time_whtz"] == [28800000000, 53130000000]
    assert row["c_binary"] == [b"John", b"Jane"]
    table = to_arrow([row], cols)  # Arrow-ready
    assert table.column("c_date").to_pylist() == [[__import__("datetime").date(2025, 1, 30)]]


def test_mysql_all_types_key_value_lines() -> None:
    lines = samples.path("mysql/mysql_real_2.4.0_alltypes_key_value_with_schema.txt").read_text().splitlines()
    docs = [line.encode() for line in lines if line.startswith("{")]
    pairs = list(zip(docs[0::2], docs[1::2]))
    assert len(pairs) == 2
    d = decoder()
    cols = d.resolve_columns(pairs)
    types = {c.name: c.arrow_type for c in cols}
    assert types["_numeric"] == pa.string()  # decimal.handling.mode=string
    assert types["_tinyint"] == pa.int32() and types["_bigint"] == pa.int64() and types["_float"] == pa.float32()
    assert types["_datetime"] == pa.timestamp("us") and types["_timestamp"] == pa.timestamp("us", "UTC")
    assert types["_point"] == types["_geometry"] == pa.struct([("wkb", pa.binary()), ("srid", pa.int32())])
    assert d.key_columns(pairs) == [Column("_id", pa.int32(), False)]
    b = d.bind(cols)
    e = b.decode(*pairs[0])
    r = e.row
    assert e.key == {"_id": 1}
    assert r["_numeric"] == "12345.110" and r["_fixed"] == "123456789876543212345678987654321.110"
    assert r["_date"] == 19439 and r["_year"] == 2023 and r["_time"] == 36803000000
    assert r["_datetime3"] == 1679581805123000 and r["_datetime6"] == 1679581805123456
    assert r["_timestamp"] == 1679554810123456 and r["_timestamp0"] == 1679501400000000
    assert r["_bin"] == b"bytes\x00\x00\x00\x00\x00" and r["_json"] == '{"a": "b"}' and r["_set"] == "a,b"
    assert r["_point"] == {"wkb": bytes.fromhex("0101000000000000000000f03f000000000000f03f"), "srid": None}
    assert (e.source["file"], e.source["pos"], e.source["row"], e.source["gtid"]) == (
        "mysql-bin.000074", 13593, 0, "b8642e5a-af4d-11ed-b484-98f6094952c0:4210576")
    rows = [r, b.decode(*pairs[1]).row]
    assert to_arrow(rows, cols).num_rows == 2


def test_sqlserver_decimal_delete() -> None:
    key = samples.raw("misc/sqlserver_1.6.0_decimal_delete_key.json")
    value = samples.raw("misc/sqlserver_1.6.0_decimal_delete_value.json")
    d = decoder()
    cols = d.resolve_columns([(key, value)])
    assert {c.name: c.arrow_type for c in cols}["sal"] == pa.decimal128(19, 4)
    e = d.bind(cols).decode(key, value)
    assert (e.op, e.key, e.row["sal"], e.row["comm"]) == ("d", {"empno": 11}, Decimal("200000.0000"),
                                                            Decimal("10.0000"))


def test_payload_only_inference_and_decode() -> None:
    lines = samples.path("postgresql/pg_real_1.2.1_replica_identity_full.jsonl").read_bytes().splitlines()
    d = decoder()
    cols = d.resolve_columns([(None, lines[-1]), (None, lines[0])])
    assert cols == [Column("id", pa.int64()), Column("name", pa.string()), Column("description", pa.string()),
                    Column("weight", pa.float64())]
    b = d.bind(cols)
    events = [b.decode(None, line) for line in lines]
    assert [e.op for e in events].count("r") == 9
    assert events[0].row == {"id": 101, "name": "scooter", "description": "Small 2-wheel scooter", "weight": 3.14}
    deleted = [e for e in events if e.op == "d"]
    assert deleted and deleted[0].row["id"] is not None
    assert to_arrow([e.row for e in events], cols).num_rows == len(lines)


def test_payload_only_null_field_uses_existing_type_and_toast() -> None:
    value = samples.raw("postgresql/pg_blog_0.10_update_toast_unavailable_value.json")
    existing = [Column("id", pa.int32(), False), Column("biography", pa.large_string())]
    cols = decoder().resolve_columns([(None, value)], existing)
    assert cols[0] == Column("id", pa.int32(), False)  # existing int32 accepted for JSON ints
    e = decoder().bind(cols).decode(b'{"id": 1004}', value)
    assert e.unavailable == ("biography",) and e.row["biography"] is None and e.key == {"id": 1004}
    doc = json.loads(value)
    doc["after"]["biography"] = None
    cols = decoder().resolve_columns([(None, json.dumps(doc).encode())], existing)
    assert {c.name: c.arrow_type for c in cols}["biography"] == pa.large_string()
    # Scenario 12: without the table's column, an all-null field gets no type (it is not frozen as string).
    assert "biography" not in {c.name for c in decoder().resolve_columns([(None, json.dumps(doc).encode())])}


def test_added_column_and_union_of_samples() -> None:
    def docs(rel: str) -> list[bytes]:
        return [line.encode() for line in samples.after_license(rel).splitlines() if line.startswith("{")]

    old, new = docs("schema-change/mysql_flinkcdc_1.9.7_add_column_before.txt"), docs(
        "schema-change/mysql_flinkcdc_1.9.7_add_column_after.txt")
    d = decoder()
    before_cols = d.resolve_columns([(None, old[-1])])
    cols = d.resolve_columns([(None, new[-1])], before_cols)
    assert [c.name for c in cols] == ["id", "name", "description", "weight", "age"]
    assert cols[-1] == Column("age", pa.int32(), True)
    b = d.bind(cols)
    old_event, new_event = b.decode(None, old[0]), b.decode(None, new[-1])
    assert "age" not in old_event.row and "age" in new_event.row
    assert to_arrow([old_event.row, new_event.row], cols).num_rows == 2


def test_tombstones() -> None:
    b = decoder().bind([Column("id", pa.int32())])
    assert b.decode(b'{"id": 1}', None).kind == TOMBSTONE
    assert b.decode(None, samples.raw("mysql/mysql_tutorial_tombstone_value.json")).kind == TOMBSTONE


@pytest.mark.parametrize("value, reason", [
    (b"\x00\x01garbage", "value is not valid JSON"),
    (b'{"op": "c"', "value is not valid JSON"),
    (b"[1, 2]", "not a Debezium change event"),
    (b'{"hello": "world"}', "no 'op' field"),
])
def test_bad_values(value: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        decoder().bind([]).decode(None, value)


def test_unwrapped_rejected() -> None:
    with pytest.raises(DecodeError, match="unwrap"):
        decoder().decode(None, samples.raw("unwrap-smt/pg_unwrap_addfields_temporal_types.json"))


def test_value_not_fitting_bound_type_names_column() -> None:
    value = samples.raw("postgresql/pg_doc_create_with_full_schema.json")
    with pytest.raises(DecodeError, match="column 'email'.*string does not fit.*int64"):
        decoder().bind([Column("email", pa.int64())]).decode(None, value)
    with pytest.raises(DecodeError, match="key is not valid JSON"):
        decoder().bind([]).decode(b"{", value)


def test_picklable_after_use() -> None:
    value = samples.raw("postgresql/pg_doc_create_with_full_schema.json")
    d = decoder()
    b = d.bind(d.resolve_columns([(None, value)]))
    b.decode(None, value)
    assert pickle.loads(pickle.dumps(b.bind(b._columns or []))).decode(None, value).row["id"] == 1


# ------------------------------------------------------------------------------------------------------------------
# Scenario 8: JSON with schemas — a record carrying a since-dropped column must not be dead-lettered.

_S8_V1 = [("id", "int32", False), ("name", "string", True), ("legacy", "string", True)]
_S8_V2 = [("id", "int32", False), ("name", "string", True)]  # legacy dropped at the source


def _s8_event(cols, row: dict, lsn: int) -> bytes:
    """A JsonConverter PostgreSQL create of ``row``; ``cols``: (name, type, optional) or a Connect field schema."""
    fields = [c if isinstance(c, dict) else {"type": c[1], "optional": c[2], "field": c[0]} for c in cols]
    value = {"type": "struct", "name": "s.public.t.Value", "optional": True, "fields": fields}
    schema = {"type": "struct", "name": "s.public.t.Envelope", "optional": False, "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "struct", "optional": False, "field": "source", "fields": [
            {"type": "string", "optional": False, "field": "connector"},
            {"type": "int64", "optional": True, "field": "lsn"}]},
        {"type": "string", "optional": False, "field": "op"}]}
    payload = {"before": None, "after": row, "source": {"connector": "postgresql", "lsn": lsn}, "op": "c"}
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_scenario8_json_with_schemas_record_carrying_since_dropped_column_is_not_dead_lettered() -> None:
    from cdc.common.errors import UnboundColumns
    from cdc.schema.widening import merge_columns

    old = _s8_event(_S8_V1, {"id": 1, "name": "a", "legacy": "z"}, 10)
    new = _s8_event(_S8_V2, {"id": 2, "name": "b"}, 11)
    d = decoder()
    # The samples (newest record of each range) and the table decide the bound columns: their union.
    assert [c.name for c in d.resolve_columns([(None, old), (None, new)])] == ["id", "name", "legacy"]
    assert [c.name for c in d.resolve_columns([(None, new)], [Column("legacy", pa.string())])] == [
        "legacy", "id", "name"]
    # Samples that only show the newest schema: the older record is not silently cut down to the bound columns,
    # it says which of its own columns are missing (the job widens the batch schema with record_columns).
    cols = d.resolve_columns([(None, new)])
    with pytest.raises(UnboundColumns) as info:
        d.bind(cols).decode(None, old)
    assert "field 'legacy' is not a column of this batch (string in the record)" in str(info.value)
    wider = merge_columns(cols, d.record_columns(None, old, cols) or [])
    assert [c.name for c in wider] == ["id", "name", "legacy"]
    b = d.bind(wider)
    rows = [b.decode(None, old).row, b.decode(None, new).row]
    assert rows == [{"id": 1, "name": "a", "legacy": "z"}, {"id": 2, "name": "b"}]
    assert to_arrow(rows, wider).column("legacy").to_pylist() == ["z", None]  # its value kept; NULL for the new one
    # A null value in the unbound column loses nothing: decoded without it.
    assert d.bind(cols).decode(None, _s8_event(_S8_V1, {"id": 3, "name": "c", "legacy": None}, 12)).row == {
        "id": 3, "name": "c"}
    # allow_field_addition: false (ignore_unknown_fields) keeps documented behaviour: the column is ignored (only
    # bound columns are staged), the record is not an error.
    ignoring = decoder()
    ignoring.ignore_unknown_fields = True
    row = ignoring.bind(cols).decode(None, old).row
    assert {c.name: row.get(c.name) for c in cols} == {"id": 1, "name": "a"}


def test_scenario8_json_record_with_a_wider_type_than_the_bound_column_asks_to_widen() -> None:
    """A record whose schema widened a column (int32 -> int64) the samples show narrow: not a dead letter but
    ``UnboundColumns`` (the job widens the batch schema with ``record_columns`` and stages again); a type that is no
    widening stays a ``DecodeError`` naming the column."""
    from cdc.common.errors import UnboundColumns
    from cdc.schema.widening import merge_columns

    def ev(n_type: str, n: object) -> bytes:
        return _s8_event([("id", "int32", False), ("n", n_type, True)], {"id": 1, "n": n}, 10)

    narrow, wide, text = ev("int32", 5), ev("int64", 2**40), ev("string", "x")
    d = decoder()
    cols = d.resolve_columns([(None, narrow)])
    assert [str(c.arrow_type) for c in cols] == ["int32", "int32"]
    with pytest.raises(UnboundColumns, match="'n'.*int64.*int32"):
        d.bind(cols).decode(None, wide)
    wider = merge_columns(cols, d.record_columns(None, wide, cols) or [])
    assert [str(c.arrow_type) for c in wider] == ["int32", "int64"]
    b = d.bind(wider)
    assert [b.decode(None, narrow).row, b.decode(None, wide).row] == [{"id": 1, "n": 5}, {"id": 1, "n": 2**40}]
    with pytest.raises(DecodeError) as info:
        d.bind(cols).decode(None, text)
    assert not isinstance(info.value, UnboundColumns) and "'n'" in str(info.value)


def test_scenario8_schemaless_record_with_a_field_the_samples_lack_is_not_silently_dropped() -> None:
    from cdc.common.errors import UnboundColumns

    def ev(row: dict) -> bytes:
        return json.dumps({"before": None, "after": row, "source": {"connector": "postgresql", "lsn": 1},
                           "op": "c", "ts_ms": 1}).encode()

    old, new = ev({"id": 1, "legacy": 7}), ev({"id": 2})
    d = decoder()
    cols = d.resolve_columns([(None, new)])
    assert [c.name for c in cols] == ["id"]
    with pytest.raises(UnboundColumns, match="'legacy'"):
        d.bind(cols).decode(None, old)
    assert d.record_columns(None, old, cols) == [Column("id", pa.int64()), Column("legacy", pa.int64())]


# ------------------------------------------------------------------------------------------------------------------
# Scenario 12: schemaless JSON corrupts decimals (and freezes all-null columns as string).

def _schemaless(row: dict | None, op: str = "c", before: dict | None = None) -> bytes:
    return json.dumps({"before": before, "after": row, "source": {"connector": "postgresql", "lsn": 5},
                       "op": op, "ts_ms": 1}).encode()


def test_scenario12_schemaless_json_declared_decimal_decodes_debezium_precise_base64() -> None:
    from tests.scenarios.typed_events import decimal_b64

    assert decimal_b64("5.00", 2) == "AfQ="
    d = JsonDecoder("topic", samples.PLACEHOLDER, column_types={"price": "decimal(10,2)", "qty": "int"})
    sample = _schemaless({"id": 1, "price": "AfQ=", "qty": 3})
    cols = d.resolve_columns([(None, sample)])
    assert cols == [Column("id", pa.int64()), Column("price", pa.decimal128(10, 2)), Column("qty", pa.int32())]
    b = d.bind(cols)
    values = {
        "AfQ=": Decimal("5.00"),  # precise: base64 of the unscaled two's complement
        decimal_b64("-12345678.91", 2): Decimal("-12345678.91"),
        decimal_b64("0", 2): Decimal("0.00"),
        "12.30": Decimal("12.30"),  # decimal.handling.mode=string
        "-7": Decimal("-7.00"),
        12.5: Decimal("12.50"),  # decimal.handling.mode=double
        3: Decimal("3.00"),
    }
    got = {v: b.decode(None, _schemaless({"id": 1, "price": v, "qty": 1})).row["price"] for v in values}
    assert got == values
    assert to_arrow([b.decode(None, sample).row], cols).column("price").to_pylist() == [Decimal("5.00")]
    with pytest.raises(DecodeError, match="column 'price'"):
        b.decode(None, _schemaless({"id": 1, "price": decimal_b64("123456789.00", 2)}))  # 11 digits > precision 10
    with pytest.raises(DecodeError, match="column 'price'"):
        b.decode(None, _schemaless({"id": 1, "price": "1.234"}))  # more fractional digits than the scale: never rounded
    with pytest.raises(DecodeError, match="column 'price'"):
        b.decode(None, _schemaless({"id": 1, "price": "not a number!"}))
    # Undeclared: inference as before (base64 text stays the string it is; documented risk).
    assert {c.name: c.arrow_type for c in decoder().resolve_columns([(None, sample)])}["price"] == pa.string()


def test_scenario12_schemaless_declared_types() -> None:
    from cdc.config.model import COLUMN_TYPE_NAMES
    from cdc.decode.json import _DECLARED
    from tests.scenarios.typed_events import decimal_b64

    assert set(_DECLARED) == set(COLUMN_TYPE_NAMES)
    types_ = {"a": "int", "b": "bigint", "c": "double", "d": "boolean", "e": "string", "f": "date",
              "g": "timestamp", "h": "timestamptz", "i": "binary", "j": "decimal(38, 0)"}
    d = JsonDecoder("topic", samples.PLACEHOLDER, column_types=types_)
    row = {"id": 1, "a": 1, "b": 2**40, "c": 1, "d": True, "e": 5, "f": 19439, "g": 1679581805123456,
           "h": "2023-03-23T07:00:10.123456Z", "i": "AAE=", "j": decimal_b64("12345678901234567890", 0)}
    cols = d.resolve_columns([(None, _schemaless(row))])
    assert {c.name: c.arrow_type for c in cols} == {
        "id": pa.int64(), "a": pa.int32(), "b": pa.int64(), "c": pa.float64(), "d": pa.bool_(), "e": pa.string(),
        "f": pa.date32(), "g": pa.timestamp("us"), "h": pa.timestamp("us", "UTC"), "i": pa.binary(),
        "j": pa.decimal128(38, 0)}
    r = d.bind(cols).decode(None, _schemaless(row)).row
    assert r == {"id": 1, "a": 1, "b": 2**40, "c": 1.0, "d": True, "e": "5", "f": 19439, "g": 1679581805123456,
                 "h": 1679554810123456, "i": b"\x00\x01", "j": Decimal("12345678901234567890")}
    assert to_arrow([r], cols).num_rows == 1
    # decimal.handling.mode=string: a signed or fractional number is never base64; a digits-only text whose length
    # is a multiple of 4 is (read as precise: the documented scale-0 ambiguity)
    b = d.bind(cols)
    assert b.decode(None, _schemaless({"id": 1, "j": "-12345678901234567890"})).row["j"] == Decimal(
        "-12345678901234567890")
    assert b.decode(None, _schemaless({"id": 1, "j": "123"})).row["j"] == Decimal("123")
    with pytest.raises(ValueError, match="column_types"):
        JsonDecoder("topic", samples.PLACEHOLDER, column_types={"x": "varchar"})


def test_scenario12_schemaless_all_null_column_gets_no_type_until_a_value_is_seen() -> None:
    d = decoder()
    nulls = _schemaless({"id": 1, "bio": None})
    assert [c.name for c in d.resolve_columns([(None, nulls)])] == ["id"]  # not frozen as string
    later = _schemaless({"id": 2, "bio": 42})
    assert {c.name: c.arrow_type for c in d.resolve_columns([(None, nulls), (None, later)])}["bio"] == pa.int64()
    # the table has it: its type; declared: the declared type
    assert d.resolve_columns([(None, nulls)], [Column("bio", pa.large_string())])[0] == Column("bio",
                                                                                                pa.large_string())
    declared = JsonDecoder("topic", samples.PLACEHOLDER, column_types={"bio": "decimal(5,1)"})
    assert declared.resolve_columns([(None, nulls)])[1] == Column("bio", pa.decimal128(5, 1))
    # the all-null column decodes to nothing; a later non-null value in it is not silently dropped
    cols = d.resolve_columns([(None, nulls)])
    assert d.bind(cols).decode(None, nulls).row == {"id": 1}
    from cdc.common.errors import UnboundColumns

    with pytest.raises(UnboundColumns, match="'bio'"):
        d.bind(cols).decode(None, later)


def test_scenario8_unbound_record_is_staged_as_an_error_row_even_with_on_bad_record_fail() -> None:
    """The reader never fails a task for UnboundColumns (cdc.run widens the batch schema and stages again)."""
    from cdc.positions.ordering import resolve
    from cdc.schema.columns import staging_columns
    from cdc.stage.reader import ReadSpec, stage_record

    old = _s8_event(_S8_V1, {"id": 1, "name": "a", "legacy": "z"}, 10)
    d = decoder()
    cols = d.resolve_columns([(None, _s8_event(_S8_V2, {"id": 2, "name": "b"}, 11))])
    ordering = resolve("auto", "postgresql", "ns.t")
    spec = ReadSpec(table="ns.t", kafka_conf={}, decoder=d.bind(cols), ordering=ordering, key=("id",),
                    row_columns=tuple(cols), staging_columns=tuple(staging_columns(cols, ordering.columns)),
                    batch_id=1, on_bad_record="fail")
    row = stage_record(spec, "topic", 0, 7, None, None, old)
    assert (row["__kind"], row["__error_class"], row["__raw_value"]) == ("error", "UnboundColumns", old)
    assert "field 'legacy' is not a column of this batch" in row["__error"]


def test_the_json_converters_special_floats_are_numbers_not_dead_letters() -> None:
    """Kafka's JsonConverter writes a double or float ±Infinity / NaN as the strings "Infinity", "-Infinity",
    "NaN" (seen from Debezium 3.6 on PostgreSQL): they decode to the floats, in columns and arrays (keys take the
    same converter); any other string in a float column stays a decode error."""
    import math

    cols = [("id", "int32", False), ("score", "double", True), ("ratio", "float", True),
            {"type": "array", "items": {"type": "double", "optional": True}, "optional": True, "field": "xs"}]

    def event(row: dict) -> bytes:
        return _s8_event(cols, row, 7)

    d = decoder()
    special = event({"id": 1, "score": "Infinity", "ratio": "-Infinity", "xs": ["NaN", 1.5, None, "-Infinity"]})
    b = d.bind(d.resolve_columns([(None, special)]))
    row = b.decode(None, special).row
    assert row["score"] == math.inf and row["ratio"] == -math.inf
    assert math.isnan(row["xs"][0]) and row["xs"][1:] == [1.5, None, -math.inf]
    assert b.decode(None, event({"id": 2, "score": 2.5, "ratio": None, "xs": []})).row["score"] == 2.5
    with pytest.raises(DecodeError, match="score"):
        b.decode(None, event({"id": 3, "score": "lots", "ratio": None, "xs": None}))
    schemaless = JsonDecoder("topic", samples.PLACEHOLDER, column_types={"score": "double"})
    raw = _schemaless({"id": 1, "score": "NaN"})
    assert math.isnan(schemaless.bind(schemaless.resolve_columns([(None, raw)])).decode(None, raw).row["score"])


@pytest.mark.parametrize(("op", "mark", "end"), [("r", "last", True), ("r", "last_in_data_collection", True),
                                                  ("r", "first", False), ("r", "true", False),
                                                  ("r", "incremental", False), ("u", "false", False)])
def test_the_read_that_ends_a_snapshot_is_staged_as_its_end(op: str, mark: str, end: bool) -> None:
    """``__snapshot_end``: a read whose ``source.snapshot`` is ``last`` / ``last_in_data_collection`` (an initial or
    blocking snapshot's end, after which ``cdc.merge.apply`` deletes the rows the snapshot did not read); never an
    incremental snapshot's read, a first read or a streamed change."""
    from cdc.positions.ordering import resolve
    from cdc.schema.columns import SNAPSHOT_END, staging_columns
    from cdc.stage.reader import ReadSpec, stage_record

    value = json.dumps({"before": None, "after": {"id": 1}, "op": op, "ts_ms": 5, "source": {
        "connector": "postgresql", "lsn": 100, "sequence": json.dumps([None, "100"]), "snapshot": mark,
        "ts_ms": 4}}).encode()
    d = decoder()
    cols = d.resolve_columns([(None, value)])
    ordering = resolve("auto", "postgresql", "ns.t")
    spec = ReadSpec(table="ns.t", kafka_conf={}, decoder=d.bind(cols), ordering=ordering, key=("id",),
                    row_columns=tuple(cols), staging_columns=tuple(staging_columns(cols, ordering.columns)),
                    batch_id=1)
    row = stage_record(spec, "topic", 0, 7, None, None, value)
    assert (row["__kind"], row[SNAPSHOT_END]) == ("change", end)



def test_a_snapshot_end_is_not_staged_where_reads_carry_positions_of_their_own() -> None:
    """MongoDB's snapshot reads (and an explicit ordering's) carry positions of their own: a barrier just before the
    last read would delete the snapshot's earlier reads, so their end is not staged as one."""
    from cdc.positions.ordering import resolve
    from cdc.schema.columns import SNAPSHOT_END, staging_columns
    from cdc.stage.reader import ReadSpec, stage_record

    value = json.dumps({"before": None, "after": {"id": 1}, "op": "r", "ts_ms": 5, "source": {
        "connector": "postgresql", "lsn": 100, "snapshot": "last", "ts_ms": 4}}).encode()
    d = decoder()
    cols = d.resolve_columns([(None, value)])
    ordering = resolve(["source.lsn"], "postgresql", "ns.t")
    spec = ReadSpec(table="ns.t", kafka_conf={}, decoder=d.bind(cols), ordering=ordering, key=("id",),
                    row_columns=tuple(cols), staging_columns=tuple(staging_columns(cols, ordering.columns)),
                    batch_id=1)
    assert stage_record(spec, "topic", 0, 7, None, None, value)[SNAPSHOT_END] is False
