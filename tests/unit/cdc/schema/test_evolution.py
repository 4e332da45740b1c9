"""cdc.evolution: table columns vs batch source columns → row columns, ALTERs, or an incompatible change."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc.common.errors import SchemaEvolutionError
from cdc.schema.columns import Column
from cdc.schema.evolution import evolution_error, offends, plan, sql_type, table_changes
from cdc.schema.widening import ADD, WIDEN, Change, Incompatible, merge_type

I32, I64, F32, F64, S = pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string()
TABLE = [Column("id", I64, False), Column("qty", I32), Column("price", pa.decimal128(10, 2)), Column("w", F32),
         Column("note", S)]


def test_new_table_takes_the_source_as_is() -> None:
    src = [Column("id", I32, False), Column("name", S, False)]
    assert plan([], src) == plan([], src, allow_field_addition=False)
    assert plan([], src).columns == src and plan([], src).changes == []


def test_same_schema_no_changes() -> None:
    p = plan(TABLE, TABLE)
    assert p.columns == TABLE and p.changes == [] and p.ignored == []


def test_safe_widenings_become_alters_in_table_order() -> None:
    src = [Column("note", S), Column("w", F64), Column("price", pa.decimal128(12, 2)), Column("qty", I64),
           Column("id", I64, False)]
    p = plan(TABLE, src)
    assert [c.name for c in p.columns] == ["id", "qty", "price", "w", "note"]  # never reordered
    assert [c.arrow_type for c in p.columns] == [I64, I64, pa.decimal128(12, 2), F64, S]
    assert p.changes == [Change(WIDEN, ("qty",), I64, I32), Change(WIDEN, ("price",), pa.decimal128(12, 2),
                                                                      pa.decimal128(10, 2)),
                         Change(WIDEN, ("w",), F64, F32)]


def test_narrower_source_fits_and_keeps_the_table_type() -> None:
    src = [Column("id", I32, False), Column("qty", I32), Column("price", pa.decimal128(8, 2)), Column("w", F32),
           Column("note", pa.large_string())]
    p = plan(TABLE, src)
    assert [c.arrow_type for c in p.columns] == [c.arrow_type for c in TABLE] and p.changes == []


def test_added_and_dropped_columns() -> None:
    src = [Column("id", I64, False), Column("note", S), Column("extra", pa.timestamp("us"), False),
           Column("tags", pa.list_(S))]
    p = plan(TABLE, src)
    assert [c.name for c in p.columns] == ["id", "qty", "price", "w", "note", "extra", "tags"]
    by = {c.name: c for c in p.columns}
    assert by["qty"].nullable and by["price"].nullable  # dropped upstream: kept, nullable
    assert by["extra"].nullable  # added to an existing table: older rows read NULL
    assert p.changes == [Change(ADD, ("extra",), pa.timestamp("us")), Change(ADD, ("tags",), pa.list_(S))]
    off = plan(TABLE, src, allow_field_addition=False)
    assert [c.name for c in off.columns] == ["id", "qty", "price", "w", "note"]
    assert off.changes == [] and off.ignored == ["extra", "tags"]


@pytest.mark.parametrize("old, new, column", [
    (I32, S, "qty"), (S, I64, "note"),  # string <-> number
    (pa.decimal128(10, 2), pa.decimal128(10, 3), "price"),  # scale change
    (pa.decimal128(10, 2), pa.decimal128(12, 4), "price"),
    (I64, F64, "id"), (F64, I64, "w"),
    (pa.date32(), pa.timestamp("us"), "d"),
    (pa.timestamp("us"), pa.timestamp("us", "UTC"), "ts"),  # timestamp <-> timestamptz
    (pa.binary(), S, "b"),
    (pa.list_(I32), pa.list_(S), "xs.element"),
    (pa.map_(S, I32), pa.map_(I32, I32), "m.key"),
    (pa.struct([("a", I32)]), pa.struct([("a", S)]), "s.a"),
    (I32, pa.list_(I32), "x"),
])
def test_incompatible(old: pa.DataType, new: pa.DataType, column: str) -> None:
    top = column.split(".")[0]
    with pytest.raises(Incompatible) as info:
        plan([Column(top, old)], [Column(top, new)])
    assert (info.value.column, info.value.top, info.value.old, info.value.new)[:2] == (column, top)


def test_nested_widening_and_struct_field_addition() -> None:
    t, ch = merge_type(pa.list_(I32), pa.list_(I64), ("xs",))
    assert t == pa.list_(I64) and ch == [Change(WIDEN, ("xs", "element"), I64, I32)]
    t, ch = merge_type(pa.map_(S, F32), pa.map_(S, F64), ("m",))
    assert t == pa.map_(S, F64) and ch == [Change(WIDEN, ("m", "value"), F64, F32)]
    t, ch = merge_type(pa.struct([("a", I32)]), pa.struct([("a", I64), ("b", S)]), ("s",))
    assert t == pa.struct([("a", I64), ("b", S)])
    assert ch == [Change(WIDEN, ("s", "a"), I64, I32), Change(ADD, ("s", "b"), S)]
    assert ch[1].column == "s.b"
    t, ch = merge_type(pa.struct([("a", I32)]), pa.struct([("a", I32), ("b", S)]), ("s",), add_fields=False)
    assert t == pa.struct([("a", I32)]) and ch == []
    t, ch = merge_type(pa.list_(pa.field("element", I64)), pa.list_(I32), ("xs",))  # Spark's list naming
    assert ch == []


def test_table_changes_never_drop_or_narrow() -> None:
    wanted = [Column("id", I64), Column("qty", I64), Column("new", S)]
    assert table_changes(TABLE, wanted) == [Change(WIDEN, ("qty",), I64, I32), Change(ADD, ("new",), S)]
    assert table_changes(TABLE, [Column("id", I32)]) == []
    with pytest.raises(Incompatible):
        table_changes(TABLE, [Column("qty", S)])


def test_error_names_table_column_types_and_offset() -> None:
    exc = Incompatible("qty", I32, S)
    err = evolution_error("inv.items", "db.inv.items", exc, (2, 41))
    assert isinstance(err, SchemaEvolutionError) and err.exit_code == 2
    msg = str(err)
    for part in ("inv.items", "'qty'", "int → string", "partition 2 offset 41", "nothing was written"):
        assert part in msg
    assert (err.table, err.column, err.offset, err.partition) == ("inv.items", "qty", 41, 2)
    assert "not located" in str(evolution_error("t", "topic", exc, None))


def test_offends_checks_one_records_own_type() -> None:
    exc = Incompatible("qty", I32, S)
    assert offends(exc, I32, [Column("id", I64), Column("qty", S)])
    assert not offends(exc, I32, [Column("qty", I32)])
    assert not offends(exc, I32, [Column("qty", I64)])  # a widening is not the offending change
    assert not offends(exc, I32, [Column("id", I64)]) and not offends(exc, I32, None)


def test_sql_type_spelling() -> None:
    assert [sql_type(t) for t in (I32, I64, F32, F64, pa.decimal128(10, 2), pa.timestamp("us"),
                                  pa.timestamp("us", "UTC"), pa.date32(), pa.binary())] == [
        "int", "bigint", "float", "double", "decimal(10,2)", "timestamp_ntz", "timestamp", "date", "binary"]
    assert sql_type(pa.list_(pa.struct([("wkb", pa.binary()), ("srid", I32)]))) == "array<struct<wkb:binary,srid:int>>"
    assert sql_type(pa.map_(S, I64)) == "map<string,bigint>"
