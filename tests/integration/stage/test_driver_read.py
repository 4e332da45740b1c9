"""Small batches read in the driver (``cdc.stage.driver_read``) stage exactly what Spark tasks stage.

The same topic is ingested by two pipelines that differ only in ``batch.driver_read_max_records`` (0: Spark tasks
with Python workers; the default: the driver), on the real local broker, Spark and Iceberg; their staging rows and
target tables must be identical, bad records and PK-move headers included. Avro goes through the vectorised path.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import unique
from tests.integration.conftest import Pipe
from tests.integration.events import PLACEHOLDER, pg, row, tombstone, with_header

pytestmark = pytest.mark.integration



def twins(make_pipe, **table):
    """Two pipelines on one topic: (driver read, Spark-task read), each with its own tables."""
    a = make_pipe(**table)
    cfg = replace(a.cfg, metadata_namespace=unique("meta"), batch=replace(a.cfg.batch, driver_read_max_records=0),
                  tables=(replace(a.table, target=f"{unique('t')}.customers"),))
    assert a.cfg.batch.driver_read_max_records > 0
    return a, Pipe(a.spark, a.broker, cfg, a.topic)


def staged(p: Pipe) -> list[tuple]:
    from cdc.config.names import names

    staging = names(p.cfg, p.table).staging
    p.spark.catalog.refreshTable(staging)
    df = p.spark.table(staging)
    cols = sorted(c for c in df.columns)
    return sorted(tuple(str(r[c]) for c in cols) for r in df.select(*cols).collect())


def target(p: Pipe) -> list[tuple]:
    df = p.spark.table(p.target)
    cols = sorted(c for c in df.columns if c != "__ingested_at")
    return sorted(tuple(str(r[c]) for c in cols) for r in df.select(*cols).collect())


def test_driver_and_task_reads_stage_identical_rows_json(make_pipe):
    driver, tasks = twins(make_pipe, on_bad_record="dead_letter", max_dead_letter_ratio=0.5)
    driver.send(pg("c", 1, row(1, "a", "long"), 100), pg("c", 2, row(2, "b"), 110), pg("c", 3, row(3, "c"), 115),
                (b'{"id": 9}', b"not json"),  # a dead letter
                pg("u", 1, row(1, "a2", PLACEHOLDER), 120),  # TOAST placeholder
                pg("d", 2, row(2, "b"), 130), tombstone(2),
                with_header(pg("d", 3, row(3, "c"), 140), "__debezium.newkey", 4),  # a PK move 3 -> 4
                with_header(pg("c", 4, row(4, "c", PLACEHOLDER), 140), "__debezium.oldkey", 3))
    for p in (driver, tasks):
        s = p.run()
        assert (s["status"], s["events_read"], s["dead_letters"]) == ("committed", 9, 1)
    assert staged(driver) == staged(tasks)
    assert target(driver) == target(tasks)
    assert driver.rows() == {1: ("a2", "long"), 4: ("c", None)}


def test_driver_and_task_reads_stage_identical_rows_avro(make_pipe, registry):
    """Avro (the vectorised path): snapshot reads, inserts, updates, a delete with its tombstone."""
    from tests.unit.cdc.decode.connect_avro import AvroWire

    driver, tasks = twins(make_pipe, fmt="avro", schema_registry={"url": registry.url})
    wire = AvroWire(registry.url, driver.topic)
    driver.send(*(wire.record(k, v) for k, v in (
        pg("r", 1, row(1, "a", "long"), 100), pg("r", 2, row(2, "b"), 100), pg("c", 3, row(3, "c"), 115),
        pg("u", 1, row(1, "a2"), 120), pg("d", 2, row(2, "b"), 130), tombstone(2))))
    for p in (driver, tasks):
        s = p.run()
        assert (s["status"], s["events_read"], s["dead_letters"]) == ("committed", 6, 0)
    assert staged(driver) == staged(tasks)
    assert target(driver) == target(tasks)
    assert driver.rows() == {1: ("a2", None), 3: ("c", None)}


def test_a_batch_over_the_limit_is_read_by_spark_tasks(make_pipe, monkeypatch):
    """The switch itself: above ``driver_read_max_records`` the driver reads nothing (it would raise here)."""
    from cdc.stage import driver_read

    p = make_pipe()
    p.cfg = replace(p.cfg, batch=replace(p.cfg.batch, driver_read_max_records=2))
    p.send(*(pg("c", i, row(i, f"n{i}"), 100 + i) for i in range(3)))

    def refuse(*a, **k):
        raise AssertionError("read in the driver")

    monkeypatch.setattr(driver_read, "read_in_driver", refuse)
    assert p.run()["inserted"] == 3
    p.send(pg("u", 1, row(1, "x"), 200), pg("u", 2, row(2, "y"), 201))  # 2 offsets: the driver's
    with pytest.raises(Exception, match="read in the driver"):
        p.run()


def test_a_batch_of_large_rows_falls_back_to_spark_tasks(make_pipe, monkeypatch):
    """The driver holds a driver-read batch whole; past ``MAX_BYTES`` of staging rows it stops and the batch is read
    by Spark tasks, with the same result."""
    import cdc.stage.stage
    from cdc.stage import driver_read

    p = make_pipe()
    p.send(*(pg("c", i, row(i, "x" * 500), 100 + i) for i in range(50)))
    tasks = []
    real = cdc.stage.stage.map_chunks

    def spy(spec, *rest):
        tasks.append(spec.table)
        return real(spec, *rest)

    monkeypatch.setattr(cdc.stage.stage, "map_chunks", spy)
    monkeypatch.setattr(driver_read, "MAX_BYTES", 1000)  # a few rows' worth
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 50)
    assert tasks == [p.table.target]  # the Spark-task read ran
    assert p.rows()[49] == ("x" * 500, None)


def staged_files(p: Pipe, batch_id: int) -> list[int]:
    """Rows per data file of one batch's staging partition (Iceberg's ``files`` metadata table)."""
    from cdc.config.names import names

    staging = names(p.cfg, p.table).staging
    p.spark.catalog.refreshTable(staging)
    return sorted(r[0] for r in p.spark.sql(f"SELECT record_count FROM {staging}.files "
                                            f"WHERE `partition`.batch_id = {batch_id}").collect())


def test_each_read_task_writes_its_own_staging_file(make_pipe):
    """The staging write is not shuffled (``cdc.stage.stage.write_staging``): each Spark task writes the chunk it read, so
    a batch of three chunks is three files; with Iceberg's default hash distribution every row of the batch went
    to one writer task first (one file). A batch the driver read is one file."""
    tasks = make_pipe(batch={"driver_read_max_records": 0, "chunk_size": 3})
    tasks.send(*(pg("c", i, row(i, f"n{i}"), 100 + i) for i in range(8)))
    s = tasks.run()
    assert (s["status"], s["inserted"]) == ("committed", 8)
    assert staged_files(tasks, s["batch_id"]) == [2, 3, 3]
    driver = make_pipe()
    driver.send(*(pg("c", i, row(i, f"n{i}"), 100 + i) for i in range(8)))
    s = driver.run()
    assert (s["status"], s["inserted"]) == ("committed", 8)
    assert staged_files(driver, s["batch_id"]) == [8]
    assert driver.rows() == tasks.rows() == {i: (f"n{i}", None) for i in range(8)}


def test_a_batch_read_by_tasks_is_counted_by_them(make_pipe, monkeypatch):
    """The read tasks count what they stage (``cdc.stage.stats.TaskCounts``): per partition (chunks of two offsets, so
    several chunks per partition) the same counts, positions, server ids, TOAST columns and PK moves as
    ``batch_stats``' query of the staged rows (just after staging: the merge adds PK moves' images), and no such
    query runs in the job."""
    import cdc.run.batch
    from cdc.stage.stage import staged_key_and_ordering
    from cdc.stage.stats import batch_stats

    p = make_pipe(partitions=2, batch={"driver_read_max_records": 0, "chunk_size": 2}, on_bad_record="dead_letter",
                  max_dead_letter_ratio=0.5)
    p.send(pg("c", 1, row(1, "a", "long"), 100), (b'{"id": 9}', b"not json"), pg("c", 2, row(2, "b"), 110),
           pg("u", 1, row(1, "a2", PLACEHOLDER), 120), partition=0)
    p.send(pg("c", 3, row(3, "c"), 105), pg("d", 3, row(3, "c"), 130), tombstone(3),
           with_header(pg("d", 5, row(5, "e"), 140), "__debezium.newkey", 6),
           with_header(pg("c", 6, row(6, "e"), 140), "__debezium.oldkey", 5), partition=1)
    counted, queried, real = [], [], cdc.run.batch.stage

    def spy(spark, spec, chunks, names, *rest):
        counted.append(real(spark, spec, chunks, names, *rest))
        queried.append(batch_stats(spark, names.staging, spec.batch_id, staged_key_and_ordering(
            spark, names.staging)[1].columns))
        return counted[-1]

    monkeypatch.setattr(cdc.run.batch, "stage", spy)
    monkeypatch.setattr(cdc.run.batch, "batch_stats", lambda *a, **k: pytest.fail("the staged batch was counted again"))
    s = p.run()
    assert (s["status"], s["events_read"], s["dead_letters"]) == ("committed", 9, 1)
    assert counted[0] is not None and counted[0].partitions.keys() == {0, 1}
    assert counted == queried
    assert counted[0].toast_columns == ("bio",) and counted[0].moves == (1, 1)
