"""``cdc.merge.tombstone_write``'s pure parts: which keys qualify and the rows of a row delta. The write itself runs on
real Spark + Iceberg in tests/integration/merge/test_merge_rules.py and tests/integration/iceberg/test_row_commit_spark.py."""

import pyarrow as pa

from cdc.merge.sql import MergeSpec
from cdc.merge.tombstone_write import simple_key, tombstone_rows
from cdc.schema.columns import Column

SPEC = MergeSpec(target="lake.inv.t", staging="lake.meta.s", tombstones="lake.meta.d", batch_id=3, key=("a", "b"),
                 columns=("a", "b", "v"), ordering=("__lsn",), locate_tombstones=True)


def test_integer_and_string_keys_qualify_others_do_not():
    assert simple_key([Column("a", pa.int64()), Column("b", pa.string()), Column("c", pa.int16())])
    assert not simple_key([Column("a", pa.int64()), Column("b", pa.decimal128(10, 2))])
    assert not simple_key([Column("a", pa.binary())])
    assert not simple_key([Column("a", pa.uint64())])  # beyond a long
    assert not simple_key([])


def test_rows_carry_key_position_and_time_and_the_located_tombstones_are_replaced():
    classified = [
        {"a": 1, "b": "x", "__lsn": 40, "__partition": 0, "__offset": 5, "__tombstone_file": "f1",
         "__tombstone_pos": 3},
        {"a": 2, "b": "y", "__lsn": 41, "__partition": 1, "__offset": 6, "__tombstone_file": None,
         "__tombstone_pos": None},
    ]
    rows, replaced = tombstone_rows(SPEC, classified, 1_000)
    assert rows == [
        {"a": 1, "b": "x", "__lsn": 40, "__kafka_partition": 0, "__kafka_offset": 5, "__deleted_at": 1_000},
        {"a": 2, "b": "y", "__lsn": 41, "__kafka_partition": 1, "__kafka_offset": 6, "__deleted_at": 1_000}]
    assert replaced == [("f1", 3)]
