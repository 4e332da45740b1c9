"""``cdc.iceberg.row_writer.in_driver``: a result computed once and held in the driver, which later queries read without a
Spark job (what ``cdc.merge.apply`` holds a small batch's classification in, instead of a local checkpoint)."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.integration


def jobs_of(spark, run) -> int:
    """The Spark jobs that ``run()`` starts (counted in a job group of its own)."""
    group = f"g{uuid.uuid4().hex[:8]}"
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_a_result_held_in_the_driver_is_computed_once_and_read_without_spark_jobs(spark):
    from cdc.iceberg.row_writer import in_driver, writer_class

    name = f"lake.rw.t{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.rw")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, tag STRING, tags ARRAY<STRING>) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', array('x')), (2, 'b', NULL), (3, NULL, array())")
    sql = f"SELECT id, upper(tag) AS tag, tags, id * 10 AS ten FROM {name} WHERE id > 1"
    query = spark.sql(sql)
    held = in_driver(spark, query)
    expected = sorted(tuple(r) for r in query.collect())
    assert sorted(tuple(r) for r in held.collect()) == expected == [(2, "B", None, 20), (3, None, [], 30)]
    spark.sql(f"INSERT INTO {name} VALUES (4, 'd', NULL)")  # computed once: what it held stays what it was
    assert len(spark.sql(sql).collect()) == 3 and sorted(tuple(r) for r in held.collect()) == expected
    view = f"v{uuid.uuid4().hex[:8]}"
    held.createOrReplaceTempView(view)
    helper = writer_class(spark)
    reads = [lambda: held.select("tag").where("ten > 20").collect(),
             lambda: spark.sql(f"SELECT ten + 1, tags FROM {view}").collect(),
             lambda: helper.collect(spark.sql(f"SELECT CAST(id AS INT) AS id FROM {view}")._jdf)]
    assert [jobs_of(spark, r) for r in reads] == [0, 0, 0]
    checkpointed = query.localCheckpoint()  # the same reads of a checkpoint: a Spark job each
    checkpointed.createOrReplaceTempView(view)
    assert all(jobs_of(spark, r) > 0 for r in (lambda: checkpointed.select("tag").collect(),
                                                lambda: spark.sql(f"SELECT ten + 1 FROM {view}").collect()))
    spark.catalog.dropTempView(view)


def test_a_small_batchs_classification_is_held_in_the_driver_a_larger_one_checkpointed(make_pipe, monkeypatch):
    """``cdc.merge.apply.IN_DRIVER_MAX_EVENTS``: up to that many events the classification is held in the driver, above
    it locally checkpointed; the same rows either way."""
    import cdc.merge.apply
    from tests.integration.events import pg

    held: list[bool] = []
    real = cdc.merge.apply.in_driver
    monkeypatch.setattr(cdc.merge.apply, "in_driver", lambda spark, df: held.append(True) or real(spark, df))
    monkeypatch.setattr(cdc.merge.apply, "IN_DRIVER_MAX_EVENTS", 3)
    p = make_pipe()
    p.send(*(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 6)))
    assert p.run()["inserted"] == 5 and held == []  # 5 events: checkpointed
    p.send(pg("u", 2, {"id": 2, "name": "two", "bio": "b"}, 10), pg("d", 3, {"id": 3, "name": "n3", "bio": None}, 11))
    s = p.run()
    assert (s["updated"], s["deleted"]) == (1, 1) and held == [True]
    assert p.rows("name", "bio") == {1: ("n1", None), 2: ("two", "b"), 4: ("n4", None), 5: ("n5", None)}
