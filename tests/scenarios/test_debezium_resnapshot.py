"""Re-snapshots on the real chain (PostgreSQL 15 → Debezium 3.6.1 in a Kafka Connect 4.3 worker → Apache Kafka → the
job → Iceberg): a replication slot lost while the connector was down, and the connector snapshotting again; a
blocking snapshot while rows change. A snapshot sends no delete for rows that went while nobody streamed, so the
batch in which a snapshot ends deletes the rows it did not read (``tables[].snapshot_deletes``). The oracle is the
database itself."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from devtools.pgsource import PostgresSource
from tests.conftest import REPO, unique

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def connect(broker):
    from devtools.connect import ConnectWorker

    out = REPO / "test-output"
    out.mkdir(exist_ok=True)
    with ConnectWorker(broker.bootstrap, log_path=out / "connect-resnapshot.log") as worker:
        yield worker


class Source(PostgresSource):
    """One table ``items`` with a Debezium connector (two topic partitions) and the job's pipeline over it."""

    def __init__(self, pg: Any, broker: Any, connect: Any, spark: Any, warehouse: Any, **table: Any) -> None:
        from cdc.config.load import parse_config

        super().__init__(pg, connect, broker.bootstrap, unique("db"), unique("pg"),
                         {"items": "id int PRIMARY KEY, v text, n int"}, name=unique("dbz"), partitions=2,
                         **{"snapshot.mode": "when_needed"})
        self.create()
        self.spark, self.ns = spark, unique("rs")
        self.cfg = parse_config({
            "pipeline": "rs", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
            "metadata_namespace": unique("meta"), "batch": {"read_timeout_seconds": 30},
            "tables": [{"topic": self.topic("items"), "target": f"{self.ns}.items", **table}]})

    def ingest(self) -> dict[str, Any]:
        from cdc.run.batch import run_batch

        self.sync()
        [result] = run_batch(self.spark, self.cfg, list(self.cfg.tables))["tables"]
        assert result["status"] == "committed" and result["dead_letters"] == 0, result
        return result

    def source_rows(self) -> dict[int, tuple]:
        return {r[0]: tuple(r[1:]) for r in self.sql("SELECT id, v, n FROM items")}

    def lake_rows(self) -> dict[int, tuple]:
        rows = self.spark.table(f"lake.{self.ns}.items").collect()
        return {r["id"]: (r["v"], r["n"]) for r in rows}

    def lose_slot(self) -> None:
        """The connector is down and its replication slot is dropped (a failover, max_slot_wal_keep_size, a DBA).
        The next ``start()`` creates the connector under a new name: no offsets, so its initial snapshot runs on a
        new slot. (Under its old name Debezium 3.6's default ``offset.mismatch.strategy=no_validation`` streams from
        the new slot without noticing the loss, unless its offsets were not flushed yet: no snapshot, the changes
        made meanwhile lost for good; ``trust_offset`` makes it fail instead: docs/connectors.md.)"""
        self.stop(drop_slot=True)
        self.name = unique("dbz")


def test_a_lost_slot_and_a_re_snapshot_delete_the_rows_deleted_meanwhile(postgres, broker, connect, spark,
                                                                          warehouse):
    """Rows deleted while the slot was gone have no delete event anywhere; the connector's new snapshot (a new
    connector on a new slot) reads only the rows that exist. After the batch that
    holds the snapshot's end the table equals ``SELECT *`` (before: the deleted rows stayed for good)."""
    src = Source(postgres, broker, connect, spark, warehouse)
    src.sql("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 40) g")
    src.start()
    src.sql("UPDATE items SET n = -1 WHERE id <= 3")
    src.ingest()
    assert src.lake_rows() == src.source_rows()

    src.lose_slot()
    src.sql("DELETE FROM items WHERE id BETWEEN 5 AND 14")  # nobody streams these deletes
    src.sql("UPDATE items SET v = 'while gone' WHERE id IN (20, 21)")
    src.sql("INSERT INTO items VALUES (41, 'new while gone', 41)")
    src.start()  # the connector again, on a new slot: its initial snapshot
    src.sql("UPDATE items SET n = 99 WHERE id = 30")  # streamed after the snapshot
    result = src.ingest()
    assert src.lake_rows() == src.source_rows()
    assert result["deleted"] >= 10, result

    src.sql("DELETE FROM items WHERE id = 31")
    src.sql("INSERT INTO items VALUES (5, 'back', 5)")  # a key the re-snapshot removed comes back
    src.ingest()
    assert src.lake_rows() == src.source_rows()
    src.stop()


def test_snapshot_deletes_off_keeps_rows_a_snapshot_did_not_read(postgres, broker, connect, spark, warehouse):
    """``snapshot_deletes: false`` (a filtered snapshot, several sources in one topic): a re-snapshot only upserts."""
    src = Source(postgres, broker, connect, spark, warehouse, snapshot_deletes=False)
    src.sql("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 10) g")
    src.start()
    src.ingest()
    src.lose_slot()
    src.sql("DELETE FROM items WHERE id <= 3")
    src.start()
    src.ingest()
    lake = src.lake_rows()
    assert set(lake) == set(range(1, 11)) and {k: lake[k] for k in src.source_rows()} == src.source_rows()
    src.stop()


def test_a_blocking_snapshot_while_rows_change(postgres, broker, connect, spark, warehouse):
    """A blocking snapshot (Debezium's ``execute-snapshot`` signal, ``type: blocking``) pauses streaming, reads the
    table with the first/last markers of an initial snapshot, then streams again; rows change all along. Its end
    deletes nothing that exists, and nothing streamed around it is lost."""
    src = Source(postgres, broker, connect, spark, warehouse)
    src.sql("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 60) g")
    src.start()
    src.ingest()
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            src.sql(f"UPDATE items SET n = {n} WHERE id = {1 + n % 60}")
            if n % 4 == 0:
                src.sql(f"INSERT INTO items VALUES ({100 + n}, 'ins', {n})")
            if n % 9 == 0:
                src.sql(f"DELETE FROM items WHERE id = {1 + (n * 7) % 60}")
            time.sleep(0.01)

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        time.sleep(1)
        src.sql("INSERT INTO debezium_signal VALUES (%s, 'execute-snapshot', "
                "'{\"data-collections\": [\"public.items\"], \"type\": \"blocking\"}')", (unique("blk"),))
        time.sleep(6)
    finally:
        stop.set()
        worker.join()
    src.ingest()
    assert src.lake_rows() == src.source_rows()
    src.stop()
