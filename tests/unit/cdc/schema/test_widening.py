"""cdc.decode.widening: safe type widenings and the batch column list."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc.common.errors import SchemaEvolutionError
from cdc.schema.columns import Column
from cdc.schema.widening import Incompatible, accepts, merge_columns, merge_type


def test_merge_type_is_the_one_rule_set() -> None:
    """Same type, widening (a table change), fit (narrower values: the column keeps its type) or Incompatible."""
    assert merge_type(pa.int32(), pa.int32(), ("c",)) == (pa.int32(), [])
    assert merge_type(pa.int32(), pa.int64(), ("c",))[0] == pa.int64()
    assert merge_type(pa.float32(), pa.float64(), ("c",))[0] == pa.float64()
    assert merge_type(pa.decimal128(10, 2), pa.decimal128(12, 2), ("c",))[0] == pa.decimal128(12, 2)
    assert merge_type(pa.list_(pa.int32()), pa.list_(pa.int64()), ("c",))[0] == pa.list_(pa.int64())
    assert merge_type(pa.int64(), pa.int32(), ("c",)) == (pa.int64(), [])  # fits
    assert merge_type(pa.decimal128(12, 2), pa.decimal128(10, 2), ("c",)) == (pa.decimal128(12, 2), [])
    for old, new in [(pa.int64(), pa.string()), (pa.decimal128(10, 2), pa.decimal128(12, 3)),
                     (pa.timestamp("us"), pa.timestamp("us", "UTC")), (pa.int32(), pa.float64())]:
        with pytest.raises(Incompatible) as err:
            merge_type(old, new, ("c",))
        assert (err.value.column, err.value.old, err.value.new) == ("c", old, new)


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
