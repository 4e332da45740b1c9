"""cdc.decode.widening: safe type widenings and the batch column list."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc.decode.model import Column
from cdc.decode.widening import accepts, merge_columns, widen
from cdc.errors import SchemaEvolutionError


def test_widen() -> None:
    assert widen(pa.int32(), pa.int32()) == pa.int32()
    assert widen(pa.int32(), pa.int64()) == pa.int64()
    assert widen(pa.float32(), pa.float64()) == pa.float64()
    assert widen(pa.decimal128(10, 2), pa.decimal128(12, 2)) == pa.decimal128(12, 2)
    assert widen(pa.list_(pa.int32()), pa.list_(pa.int64())) == pa.list_(pa.int64())
    for old, new in [(pa.int64(), pa.int32()), (pa.int64(), pa.string()), (pa.decimal128(10, 2), pa.decimal128(12, 3)),
                     (pa.decimal128(12, 2), pa.decimal128(10, 2)), (pa.timestamp("us"), pa.timestamp("us", "UTC")),
                     (pa.int32(), pa.float64())]:
        with pytest.raises(SchemaEvolutionError) as err:
            widen(old, new, "c")
        assert err.value.column == "c" and err.value.old == old and err.value.new == new  # type: ignore[attr-defined]


def test_merge_columns() -> None:
    existing = [Column("id", pa.int32(), False), Column("amount", pa.decimal128(12, 2)),
                Column("qty", pa.int64()), Column("dropped", pa.string(), False)]
    newest = [Column("id", pa.int64(), False), Column("qty", pa.int32()), Column("amount", pa.decimal128(10, 2)),
              Column("added", pa.string(), False, "io.debezium.data.Json")]
    assert merge_columns(existing, newest) == [
        Column("id", pa.int64(), False), Column("amount", pa.decimal128(12, 2)), Column("qty", pa.int64()),
        Column("dropped", pa.string(), True), Column("added", pa.string(), True, "io.debezium.data.Json")]
    assert merge_columns([], newest) == newest  # new table: nullability as in the source
    with pytest.raises(SchemaEvolutionError, match="'qty'"):
        merge_columns(existing, [Column("qty", pa.string())])


def test_accepts_is_widening_in_reverse() -> None:
    assert accepts(pa.int64(), pa.int32()) and not accepts(pa.int32(), pa.int64())
    assert accepts(pa.large_string(), pa.string()) and not accepts(pa.string(), pa.int32())
