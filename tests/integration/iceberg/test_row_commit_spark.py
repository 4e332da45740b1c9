"""``cdc.iceberg.row_commit.overwrite_rows`` on real Spark + Iceberg: the rows Spark reads back are the ones given (every
type the ledger uses), only the rows matching the filter are replaced, the validation refuses a conflicting commit
since its snapshot as Spark's serializable overwrite does, and no Spark statement runs."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from cdc.iceberg.row_commit import overwrite_rows, replace_rows
from cdc.iceberg.tables import iceberg_table
from tests.conftest import unique
from tests.integration.iceberg.test_tables import sql_executions

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


def tombstone_like(spark) -> str:
    name = f"lake.rowcommit.{unique('d')}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rowcommit")
    spark.sql(f"CREATE TABLE {name} (k BIGINT, s STRING, at TIMESTAMP) USING iceberg TBLPROPERTIES "
              "('format-version' = '2', 'write.delete.mode' = 'merge-on-read', 'write.update.mode' = "
              "'merge-on-read', 'write.merge.mode' = 'merge-on-read')")
    return name


def located(spark, name: str) -> dict[int, tuple[str, int]]:
    spark.catalog.refreshTable(name)
    return {r[0]: (r[1], r[2]) for r in spark.sql(f"SELECT k, _file, _pos FROM {name}").collect()}


def test_replace_rows_adds_rows_and_deletes_the_located_ones_in_one_commit(spark):
    name = tombstone_like(spark)
    spark.sql(f"INSERT INTO {name} VALUES (1, 'old 1', NULL), (2, 'stays', NULL), (3, 'old 3', NULL)")
    where = located(spark, name)
    since = snapshot(spark, name)
    before = sql_executions(spark)
    replace_rows(spark, name, [{"k": 1, "s": "new 1", "at": AT}, {"k": 3, "s": "new 3"}, {"k": 4, "s": "new 4"}],
                 [where[3], where[1]], since)
    assert sql_executions(spark) == before
    spark.catalog.refreshTable(name)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT k, s, unix_micros(at) FROM {name}").collect())
    assert got == [(1, "new 1", AT), (2, "stays", None), (3, "new 3", None), (4, "new 4", None)]
    summary = spark.sql(f"SELECT summary FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert summary["added-position-deletes"] == "2" and summary["added-records"] == "3"
    assert len(spark.sql(f"SELECT * FROM {name}.snapshots").collect()) == 2  # one commit


def test_replace_rows_refuses_any_commit_since_its_snapshot_and_leaves_no_files(spark):
    name = tombstone_like(spark)
    spark.sql(f"INSERT INTO {name} VALUES (1, 'old', NULL)")
    where, since = located(spark, name), snapshot(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (9, 'another writer', NULL)")
    files_before = {r[0] for r in spark.sql(f"SELECT file_path FROM {name}.all_files").collect()}
    with pytest.raises(Exception, match="ValidationException: Found conflicting files"):
        replace_rows(spark, name, [{"k": 1, "s": "mine"}], [where[1]], since)
    since = snapshot(spark, name)
    spark.sql(f"DELETE FROM {name} WHERE k = 1")  # another writer deleted the located row (its whole file) since
    with pytest.raises(Exception, match="ValidationException: Cannot commit, missing data files"):
        replace_rows(spark, name, [{"k": 1, "s": "mine"}], [where[1]], since)
    spark.catalog.refreshTable(name)
    assert sorted(tuple(r) for r in spark.sql(f"SELECT k, s FROM {name}").collect()) == [(9, "another writer")]
    data_dir = iceberg_table(spark, name).location().replace("file:", "") + "/data"
    import os

    on_disk = {f"file:{data_dir}/{f}" for f in os.listdir(data_dir)} | {f"{data_dir}/{f}" for f in os.listdir(data_dir)}
    live = {r[0] for r in spark.sql(f"SELECT file_path FROM {name}.all_files").collect()} | {
        r[0] for r in spark.sql(f"SELECT file_path FROM {name}.all_delete_files").collect()}
    assert files_before <= live
    assert not [f for f in os.listdir(data_dir) if f"{data_dir}/{f}" not in live and f"file:{data_dir}/{f}" not in live
                and not f.startswith(".")], on_disk


def test_a_commit_s_manifest_work_runs_in_the_calling_thread(spark):
    """``in_caller``: the overwrites and row deltas of ``cdc.iceberg.row_commit`` filter, merge and validate manifests in the
    committing thread, not on Iceberg's shared pool, whose results are polled every 10 ms. The gain is only visible
    as time, so this checks the executor the update holds (Iceberg's ``SnapshotProducer.workerPool``, by reflection),
    then that such an update commits and validates as before."""
    from cdc.iceberg.row_commit import in_caller
    from cdc.iceberg.tables import equal_filter

    name = table(spark)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 0, 'old', NULL)")
    since = snapshot(spark, name)
    iceberg = iceberg_table(spark, name)
    producer = iceberg.newOverwrite().getClass()
    while producer.getName() != "org.apache.iceberg.SnapshotProducer":
        producer = producer.getSuperclass()
    pool = producer.getDeclaredField("workerPool")
    pool.setAccessible(True)
    assert pool.get(iceberg.newOverwrite()) is None  # Iceberg's default: its shared pool, taken on first use
    update = in_caller(spark, iceberg.newOverwrite())
    assert "DirectExecutorService" in pool.get(update).getClass().getName()
    assert "DirectExecutorService" in pool.get(in_caller(spark, iceberg.newRowDelta())).getClass().getName()
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 1, 'another writer', NULL)")
    with pytest.raises(Exception, match="ValidationException: Found conflicting files"):
        update.overwriteByRowFilter(equal_filter(spark, {"k": "a", "b": 1})).validateFromSnapshot(since) \
            .validateNoConflictingData().commit()
