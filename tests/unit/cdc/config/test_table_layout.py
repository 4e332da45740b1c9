"""Target table layout (cdc.config.table_layout): parsing at config load, column checks, and the pure diffing that keeps
later runs idempotent. The statements themselves run against real Iceberg in tests/integration/iceberg/test_table_layout_spark.py."""

import json

import pyarrow as pa
import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.config.table_layout import (
    REQUIRED_PROPERTIES,
    SortTerm,
    Term,
    check_columns,
    parse_layout,
    parse_sort_term,
    parse_term,
    partition_changes,
    partitioning_of,
    property_changes,
    sort_order_text,
)
from cdc.iceberg.snapshot_summary import batch_summary
from cdc.schema.columns import Column

BASE = {
    "pipeline": "inventory", "kafka": {"bootstrap.servers": "127.0.0.1:9092"}, "format": "json",
    "catalog": {"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
}
COLUMNS = [Column("id", pa.int64(), False), Column("name", pa.string()), Column("region", pa.string()),
           Column("created_at", pa.timestamp("us", tz="UTC")), Column("born", pa.date32()),
           Column("amount", pa.decimal128(10, 2)), Column("tags", pa.list_(pa.string()))]


def table(**layout):
    return parse_config({**BASE, "tables": [{"topic": "t", "target": "a.b", **layout}]}).tables[0]


@pytest.mark.parametrize("text, describe, sql", [
    ("bucket(16, id)", "bucket(16, id)", "bucket(16, `id`)"),
    ("BUCKET( 8 ,id )", "bucket(8, id)", "bucket(8, `id`)"),
    ("truncate(4, name)", "truncate(4, name)", "truncate(4, `name`)"),
    ("days(created_at)", "days(created_at)", "days(`created_at`)"),
    ("day(created_at)", "days(created_at)", "days(`created_at`)"),
    ("year(born)", "years(born)", "years(`born`)"),
    ("months(born)", "months(born)", "months(`born`)"),
    ("hour(created_at)", "hours(created_at)", "hours(`created_at`)"),
    ("identity(region)", "region", "`region`"),
    ("region", "region", "`region`"),
])
def test_terms_parse_to_the_text_describe_prints(text, describe, sql):
    term = parse_term(text, "partition_by[0]")
    assert (term.describe(), term.sql()) == (describe, sql)


@pytest.mark.parametrize("text, expected", [
    ("id", "id ASC NULLS FIRST"),
    ("id desc", "id DESC NULLS LAST"),
    ("id DESC NULLS FIRST", "id DESC NULLS FIRST"),
    ("bucket(4, id) ASC NULLS LAST", "bucket(4, id) ASC NULLS LAST"),
    ("region nulls last", "region ASC NULLS LAST"),
])
def test_sort_terms_use_icebergs_default_null_order(text, expected):
    assert parse_sort_term(text, "sort_by[0]").describe() == expected


def test_layout_from_table_and_defaults():
    cfg = parse_config({**BASE,
                        "defaults": {"partition_by": ["bucket(16, id)"], "sort_by": "id",
                                     "properties": {"write.target-file-size-bytes": 134217728,
                                                    "write.merge.mode": "copy-on-write"}},
                        "tables": [{"topic": "t1", "target": "a.one"},
                                   {"topic": "t2", "target": "a.two", "partition_by": ["days(created_at)", "region"],
                                    "sort_by": [], "properties": {"write.merge.mode": "merge-on-read",
                                                                  "write.distribution-mode": "hash"}}]})
    one, two = (t.layout for t in cfg.tables)
    assert [t.describe() for t in one.partition_by] == ["bucket(16, id)"]
    assert sort_order_text(one.sort_by) == "id ASC NULLS FIRST"
    assert one.properties == {"write.target-file-size-bytes": "134217728", "write.merge.mode": "copy-on-write"}
    assert [t.describe() for t in two.partition_by] == ["days(created_at)", "region"]  # lists replace
    assert two.sort_by == ()  # configured empty: WRITE UNORDERED
    assert two.properties == {"write.target-file-size-bytes": "134217728",  # properties merge key by key
                              "write.merge.mode": "merge-on-read", "write.distribution-mode": "hash"}
    assert two.table_properties() == {**REQUIRED_PROPERTIES, **two.properties}


def test_no_layout_keeps_the_required_properties_and_absent_keys_are_unmanaged():
    layout = table().layout
    assert (layout.partition_by, layout.sort_by, layout.properties) == (None, None, {})  # the table keeps its own
    assert table(partition_by=[], sort_by=[]).layout.partition_by == ()  # managed: no partition fields, unordered
    assert layout.table_properties() == {"format-version": "2", "write.delete.mode": "merge-on-read",
                                         "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read"}
    assert table(properties={"format-version": 3}).layout.table_properties()["format-version"] == "3"


@pytest.mark.parametrize("layout, key, words", [
    ({"partition_by": ["bucket(id)"]}, "tables[0].partition_by[0]", "bucket takes a positive whole number"),
    ({"partition_by": ["bucket(0, id)"]}, "tables[0].partition_by[0]", ">= 1"),
    ({"partition_by": ["truncate(name, 4)"]}, "tables[0].partition_by[0]", "truncate takes"),
    ({"partition_by": ["weeks(created_at)"]}, "tables[0].partition_by[0]", "unknown transform 'weeks'"),
    ({"partition_by": ["days(a, b)"]}, "tables[0].partition_by[0]", "days takes one column"),
    ({"partition_by": ["id + 1"]}, "tables[0].partition_by[0]", "must be a column or a transform"),
    ({"partition_by": ["id", "identity(id)"]}, "tables[0].partition_by[1]", "appears twice"),
    ({"partition_by": {"id": 1}}, "tables[0].partition_by", "must be a list"),
    ({"sort_by": ["id SIDEWAYS"]}, "tables[0].sort_by[0]", "must be a column"),
    ({"properties": ["a"]}, "tables[0].properties", "must be a mapping"),
    ({"properties": {"format-version": 1}}, "tables[0].properties.format-version", "format version 2 or later"),
    ({"properties": {"format-version": "two"}}, "tables[0].properties.format-version", "must be 2 or 3"),
    ({"properties": {"write.merge.mode": "fast"}}, "tables[0].properties.write.merge.mode", "copy-on-write"),
    ({"properties": {"write.distribution-mode": "random"}}, "tables[0].properties.write.distribution-mode", "hash"),
    ({"properties": {"write.target-file-size-bytes": "big"}}, "tables[0].properties.write.target-file-size-bytes",
     "positive number of bytes"),
    ({"properties": {"cdc.ordering-epochs": "[]"}}, "tables[0].properties.cdc.ordering-epochs", "belong to the job"),
    ({"properties": {"sort-order": "id"}}, "tables[0].properties.sort-order", "use sort_by"),
    ({"properties": {"location": "/x"}}, "tables[0].properties.location", "reserved"),
    ({"properties": {"write.format.default": None}}, "tables[0].properties.write.format.default", "single value"),
])
def test_bad_layouts_are_refused_at_config_load_naming_the_key(layout, key, words):
    with pytest.raises(ConfigError) as exc:
        table(**layout)
    assert f"key '{key}'" in str(exc.value) and words in str(exc.value)


def test_bad_layout_in_defaults_names_the_table_entry():
    with pytest.raises(ConfigError, match=r"key 'tables\[0\]\.properties\.format-version'"):
        parse_config({**BASE, "defaults": {"properties": {"format-version": 1}},
                      "tables": [{"topic": "t", "target": "a.b"}]})


def test_columns_are_checked_against_the_tables_columns():
    good = parse_layout({"partition_by": ["bucket(16, id)", "days(created_at)", "years(born)", "region",
                                          "truncate(4, name)", "truncate(10, amount)"],
                         "sort_by": ["created_at DESC", "bucket(4, name)"]})
    check_columns(good, COLUMNS, "a.b")
    with pytest.raises(ConfigError) as exc:
        check_columns(parse_layout({"partition_by": ["days(updated_at)"]}), COLUMNS, "a.b", "p.yaml")
    assert str(exc.value).startswith("p.yaml: table a.b: partition_by 'days(updated_at)' names column 'updated_at'")
    assert "columns: amount, born, created_at" in str(exc.value)
    assert exc.value.exit_code == 2
    for bad, col in (("days(name)", "name"), ("hours(born)", "born"), ("truncate(4, created_at)", "created_at"),
                     ("tags", "tags")):
        with pytest.raises(ConfigError, match=f"does not apply to column '{col}'"):
            check_columns(parse_layout({"partition_by": [bad]}), COLUMNS, "a.b")
    with pytest.raises(ConfigError, match="sort_by 'region_x ASC NULLS FIRST'|sort_by 'region_x'"):
        check_columns(parse_layout({"sort_by": ["region_x"]}), COLUMNS, "a.b")


def test_partition_changes_drop_then_add_only_what_differs():
    wanted = (Term("bucket", "id", 16), Term("hours", "created_at"))
    assert partition_changes(["bucket(16, id)", "hours(created_at)"], wanted) == ([], [])
    drop, add = partition_changes(["bucket(16, id)", "days(created_at)", "region"], wanted)
    assert (drop, [t.describe() for t in add]) == (["days(created_at)", "region"], ["hours(created_at)"])
    assert partition_changes(["region"], ()) == (["region"], [])


def test_partitioning_is_read_from_describe_rows():
    rows = [("id", "bigint"), ("name", "string"), ("", ""), ("# Partitioning", ""), ("Part 0", "bucket(16, id)"),
            ("Part 1", "region"), ("", ""), ("# Metadata Columns", ""), ("_spec_id", "int")]
    assert partitioning_of(rows) == ["bucket(16, id)", "region"]
    assert partitioning_of([("id", "bigint")]) == []


def test_property_changes_set_only_differences_and_never_downgrade_the_format():
    current = {"format-version": "2", "write.merge.mode": "merge-on-read", "other": "x"}
    assert property_changes(current, {"format-version": "2", "write.merge.mode": "merge-on-read"}) == {}
    assert property_changes(current, {"write.merge.mode": "copy-on-write", "write.target-file-size-bytes": "1"}) == {
        "write.merge.mode": "copy-on-write", "write.target-file-size-bytes": "1"}
    assert property_changes(current, {"format-version": "3"}) == {"format-version": "3"}
    assert property_changes({"format-version": "3"}, {"format-version": "2"}) == {}


def test_sort_order_text_matches_icebergs_property():
    assert sort_order_text((SortTerm(Term("identity", "region"), True), SortTerm(Term("bucket", "id", 4)))) == \
        "region DESC NULLS LAST, bucket(4, id) ASC NULLS FIRST"
    assert sort_order_text(()) == ""


def test_batch_summary_keys():
    s = batch_summary("inventory", 7, "db.public.t", [{"partition": 1, "start": 0, "end": 9},
                                                      {"partition": 0, "start": 3, "end": 5}])
    assert s["cdc.batch-id"] == "7" and s["cdc.pipeline"] == "inventory"
    assert json.loads(s["cdc.end-offsets"]) == {"db.public.t": {"0": 5, "1": 9}}
