"""``cdc.merge.target_write``'s pure parts: which targets and batches qualify, the rows it writes and the rows it replaces.
The write itself runs on real Spark + Iceberg in tests/integration/merge/test_target_write_spark.py (and every small batch of
the integration suite goes through it)."""

from dataclasses import replace

import pytest

from cdc.merge.sql import MergeSpec, insert_values
from cdc.merge.target_write import TargetFacts, ineligible, replaced_rows, widens, written_sql

SPEC = MergeSpec(target="lake.inv.t", staging="lake.meta.s", tombstones="lake.meta.d", batch_id=3, key=("id",),
                 columns=("id", "v"), ordering=("__lsn",), locate_target=True)
TYPES = {"id": "bigint", "v": "string", "__lsn": "bigint", "__op": "string", "__source_ts_ms": "bigint",
         "__kafka_partition": "int", "__kafka_offset": "bigint", "__batch_id": "bigint", "__ingested_at": "timestamp"}
FACTS = TargetFacts(format_version=2, partitioned=False, file_format="parquet", merge_mode="merge-on-read",
                    fields=tuple((c, TYPES[c], c != "id") for c, _ in insert_values(SPEC)))


def test_a_plain_target_qualifies_and_each_difference_says_why_not():
    assert ineligible(SPEC, FACTS) is None
    assert ineligible(replace(SPEC, delete_mode="soft", tombstones=None), FACTS) == "soft deletes"
    assert ineligible(replace(SPEC, pk_moves=True), FACTS) == "primary-key moves"
    assert ineligible(SPEC, replace(FACTS, format_version=3)) == "format version 3"
    assert ineligible(SPEC, replace(FACTS, partitioned=True)) == "a partitioned table"
    assert ineligible(SPEC, replace(FACTS, file_format="orc")) == "orc data files"
    assert ineligible(SPEC, replace(FACTS, merge_mode="copy-on-write")) == "write.merge.mode copy-on-write"
    extra = replace(FACTS, fields=FACTS.fields + (("kept", "string", True),))  # a column the MERGE would keep
    assert ineligible(SPEC, extra) == "table columns other than the batch's"
    floating = replace(FACTS, fields=tuple((n, "double" if n == "id" else t, x) for n, t, x in FACTS.fields))
    assert ineligible(SPEC, floating) == "floating-point key columns ['id']"


def test_the_written_rows_are_the_merges_insert_values_in_table_order_with_not_null_enforced():
    reordered = replace(FACTS, fields=tuple(reversed(FACTS.fields)))
    sql = written_sql(SPEC, reordered, "V")
    assert sql.startswith("SELECT current_timestamp() AS `__ingested_at`, 3 AS `__batch_id`")
    assert ("CASE WHEN s.`id` IS NULL THEN raise_error('NULL in NOT NULL column id of lake.inv.t') ELSE s.`id` END "
            "AS `id`") in sql
    assert sql.endswith("FROM V s WHERE s.`__action` IN ('insert', 'update')")


def test_widenings_are_those_schema_evolution_allows():
    assert widens("int", "bigint") and widens("int", "int") and widens("float", "double")
    assert widens("decimal(10,2)", "decimal(12,2)")
    assert not widens("bigint", "int") and not widens("double", "float") and not widens("int", "string")
    assert not widens("decimal(10,2)", "decimal(12,3)") and not widens("decimal(12,2)", "decimal(10,2)")
    assert not widens("array<int>", "array<bigint>")  # nested: only as they are


def test_updates_and_deletes_replace_their_located_rows_and_a_key_twice_stops_the_row_delta():
    changed = [{"__action": "insert", "id": 1, "__target_file": None, "__target_pos": None},
               {"__action": "update", "id": 2, "__target_file": "f1", "__target_pos": 4},
               {"__action": "delete", "id": 3, "__target_file": "f2", "__target_pos": 0},
               {"__action": "tombstone", "id": 4, "__target_file": None, "__target_pos": None}]
    assert replaced_rows(SPEC, changed) == [("f1", 4), ("f2", 0)]
    twice = changed + [{"__action": "update", "id": 2, "__target_file": "f3", "__target_pos": 1}]
    assert replaced_rows(SPEC, twice) is None
    with pytest.raises(AssertionError, match="an update without a located target row"):
        replaced_rows(SPEC, [{"__action": "update", "id": 5, "__target_file": None, "__target_pos": None}])


def test_binary_and_nested_keys_are_compared_as_values():
    spec = replace(SPEC, key=("b", "s"))
    changed = [{"__action": "insert", "b": bytearray(b"\x01"), "s": [1, {"x": bytearray(b"y")}],
                "__target_file": None, "__target_pos": None},
               {"__action": "insert", "b": bytearray(b"\x01"), "s": [2], "__target_file": None, "__target_pos": None}]
    assert replaced_rows(spec, changed) == []
    assert replaced_rows(spec, changed + [dict(changed[0])]) is None
