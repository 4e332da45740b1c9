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

from tests.conftest import unique
from tests.scenarios.debezium_chain import Source as ChainSource
from tests.scenarios.debezium_chain import connect_worker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def connect(broker):
    yield from connect_worker(broker)


class Source(ChainSource):
    """One table ``items`` with a Debezium connector (two topic partitions) and the job's pipeline over it
    (``tests.scenarios.debezium_chain``); ``table``: extra settings of its ``tables[]`` entry."""

    def __init__(self, pg: Any, broker: Any, connect: Any, spark: Any, warehouse: Any, **table: Any) -> None:
        super().__init__(pg, broker, connect, spark, warehouse, {"items": "id int PRIMARY KEY, v text, n int"},
                         table_settings={"items": table}, partitions=2, **{"snapshot.mode": "when_needed"})

    def batch(self) -> dict[str, Any]:
        """One batch of every change so far: committed, no dead letter; its summary."""
        [result] = self.ingest_clean()["tables"]
        assert result["status"] == "committed", result
        return result

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
    src.batch()
    assert src.lake_rows("items") == src.source_rows("items")

    src.lose_slot()
    src.sql("DELETE FROM items WHERE id BETWEEN 5 AND 14")  # nobody streams these deletes
    src.sql("UPDATE items SET v = 'while gone' WHERE id IN (20, 21)")
    src.sql("INSERT INTO items VALUES (41, 'new while gone', 41)")
    src.start()  # the connector again, on a new slot: its initial snapshot
    src.sql("UPDATE items SET n = 99 WHERE id = 30")  # streamed after the snapshot
    result = src.batch()
    assert src.lake_rows("items") == src.source_rows("items")
    assert result["deleted"] >= 10, result

    src.sql("DELETE FROM items WHERE id = 31")
    src.sql("INSERT INTO items VALUES (5, 'back', 5)")  # a key the re-snapshot removed comes back
    src.batch()
    assert src.lake_rows("items") == src.source_rows("items")
    src.stop()


def test_snapshot_deletes_off_keeps_rows_a_snapshot_did_not_read(postgres, broker, connect, spark, warehouse):
    """``snapshot_deletes: false`` (a filtered snapshot, several sources in one topic): a re-snapshot only upserts."""
    src = Source(postgres, broker, connect, spark, warehouse, snapshot_deletes=False)
    src.sql("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 10) g")
    src.start()
    src.batch()
    src.lose_slot()
    src.sql("DELETE FROM items WHERE id <= 3")
    src.start()
    src.batch()
    lake = src.lake_rows("items")
    assert set(lake) == set(range(1, 11)) and {k: lake[k] for k in src.source_rows("items")} == src.source_rows("items")
    src.stop()


def test_a_blocking_snapshot_while_rows_change(postgres, broker, connect, spark, warehouse):
    """A blocking snapshot (Debezium's ``execute-snapshot`` signal, ``type: blocking``) pauses streaming, reads the
    table with the first/last markers of an initial snapshot, then streams again; rows change all along. Its end
    deletes nothing that exists, and nothing streamed around it is lost."""
    src = Source(postgres, broker, connect, spark, warehouse)
    src.sql("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 60) g")
    src.start()
    src.batch()
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
    src.batch()
    assert src.lake_rows("items") == src.source_rows("items")
    src.stop()
