"""``cdc.row_commit.overwrite_rows`` on real Spark + Iceberg: the rows Spark reads back are the ones given (every
type the ledger uses), only the rows matching the filter are replaced, the validation refuses a conflicting commit
since its snapshot as Spark's serializable overwrite does, and no Spark statement runs."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cdc.row_commit import overwrite_rows
from cdc.tables import iceberg_table
from tests.conftest import unique
from tests.integration.test_tables import sql_executions

pytestmark = pytest.mark.integration

AT = 1_795_838_400_123_456  # 2026-11-28T04:00:00.123456Z, epoch microseconds


def table(spark) -> str:
    name = f"lake.rowcommit.{unique('t')}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rowcommit")
    spark.sql(f"CREATE TABLE {name} (k STRING, b BIGINT, p INT, s STRING, at TIMESTAMP) USING iceberg "
              "PARTITIONED BY (k) TBLPROPERTIES ('write.metadata.metrics.column.k' = 'full')")
    return name


def snapshot(spark, name: str) -> int:
    spark.catalog.refreshTable(name)
    return iceberg_table(spark, name).currentSnapshot().snapshotId()


def test_rows_are_written_as_given_and_replace_only_the_matching_ones(spark):
    name = table(spark)
    for row in ("'a', 1, 0, 'old'", "'a', 2, 0, 'keep'", "'b', 1, 0, 'other partition'"):  # a file each: an
        spark.sql(f"INSERT INTO {name} VALUES ({row}, NULL)")  # overwrite replaces whole files
    since = snapshot(spark, name)
    before = sql_executions(spark)
    overwrite_rows(spark, name, [{"k": "a", "b": 1, "p": 7, "s": "it's new", "at": AT},
                                 {"k": "a", "b": 1, "p": 2 ** 31 - 1, "s": None, "at": None}],
                   {"k": "a", "b": 1}, since, {"cdc.test-write": "w1"})
    assert sql_executions(spark) == before
    spark.catalog.refreshTable(name)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT k, b, p, s, unix_micros(at) FROM {name}").collect())
    assert got == sorted([("a", 1, 7, "it's new", AT), ("a", 1, 2 ** 31 - 1, None, None), ("a", 2, 0, "keep", None),
                          ("b", 1, 0, "other partition", None)])
    summary = spark.sql(f"SELECT summary FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert summary["cdc.test-write"] == "w1" and summary["deleted-records"] == "1"
    at = spark.sql(f"SELECT at FROM {name} WHERE at IS NOT NULL").first()[0]
    assert at.astimezone(timezone.utc) == datetime(2026, 11, 28, 4, 0, 0, 123456, tzinfo=timezone.utc)


def test_a_commit_of_matching_rows_since_the_snapshot_is_a_conflict(spark):
    name = table(spark)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 0, 'first', NULL)")
    since = snapshot(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 1, 'another writer', NULL)")
    spark.sql(f"INSERT INTO {name} VALUES ('a', 2, 1, 'not a match', NULL)")
    with pytest.raises(Exception, match="ValidationException: Found conflicting files"):
        overwrite_rows(spark, name, [{"k": "a", "b": 1, "s": "mine"}], {"k": "a", "b": 1}, since)
    overwrite_rows(spark, name, [{"k": "a", "b": 3, "s": "mine"}], {"k": "a", "b": 3}, since)  # no conflict there
    overwrite_rows(spark, name, [{"k": "a", "b": 1, "s": "mine"}], {"k": "a", "b": 1}, snapshot(spark, name))
    spark.catalog.refreshTable(name)
    assert sorted(tuple(r) for r in spark.sql(f"SELECT b, s FROM {name}").collect()) == [
        (1, "mine"), (2, "not a match"), (3, "mine")]


def test_a_column_the_table_lacks_is_refused_before_anything_is_written(spark):
    name = table(spark)
    since = snapshot(spark, name) if iceberg_table(spark, name).currentSnapshot() is not None else None
    with pytest.raises(ValueError, match=r"\['nope'\] are not in the table"):
        overwrite_rows(spark, name, [{"k": "a", "nope": 1}], {"k": "a"}, since)
    assert iceberg_table(spark, name).currentSnapshot() is None
