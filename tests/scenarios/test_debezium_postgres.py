"""The real chain: PostgreSQL 15 → Debezium 3.6's PostgreSQL connector in a Kafka Connect worker (distributed mode,
Kafka's JsonConverter) → Apache Kafka → the job → Iceberg; the oracle is the database itself (``SELECT *``)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.scenarios.debezium_chain import Source, connect_worker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def connect(broker):
    yield from connect_worker(broker)


def test_snapshot_streaming_special_floats_and_an_incremental_snapshot_while_rows_change(
        postgres, broker, connect, spark, warehouse):
    """The initial snapshot, streamed inserts/updates/deletes, double ±Infinity and NaN (the JsonConverter writes
    them as strings), then an incremental snapshot (Debezium's signal table; reads without ``source.lsn``)
    interleaved with streamed changes of the same keys: the table equals ``SELECT *`` of the source after each
    step, and nothing is a dead letter."""
    src = Source(postgres, broker, connect, spark, warehouse,
                 {"customers": "id int PRIMARY KEY, name text, score double precision, balance numeric(10,2)"})
    src.sql("INSERT INTO customers SELECT g, 'n' || g, g * 1.5, g * 10.25 FROM generate_series(1, 30) g")
    src.sql("UPDATE customers SET score = 'Infinity' WHERE id = 1")
    src.sql("UPDATE customers SET score = '-Infinity' WHERE id = 2")
    src.sql("UPDATE customers SET score = 'NaN' WHERE id = 3")
    src.start()
    try:
        src.sql("UPDATE customers SET name = 'streamed', score = 'NaN' WHERE id IN (4, 5)")
        src.sql("DELETE FROM customers WHERE id IN (6, 7)")
        src.sql("INSERT INTO customers VALUES (31, 'new', '-Infinity', 1.00)")
        src.ingest()
        assert src.lake_rows("customers") == src.source_rows("customers")

        stop = threading.Event()

        def churn() -> None:  # streamed changes of the same keys while the snapshot reads them chunk by chunk
            n = 0
            while not stop.is_set():
                n += 1
                key = 8 + n % 20
                src.sql(f"UPDATE customers SET name = 'churn{n}', balance = {n}.5 WHERE id = {key}")
                if n % 7 == 0:
                    src.sql(f"DELETE FROM customers WHERE id = {key}")
                if n % 5 == 0:
                    src.sql(f"INSERT INTO customers VALUES ({100 + n}, 'ins{n}', {n}, {n}) ON CONFLICT DO NOTHING")
                time.sleep(0.02)

        worker = threading.Thread(target=churn)
        worker.start()
        try:
            src.incremental_snapshot("customers")
            src.wait_snapshot_completed()
        finally:
            stop.set()
            worker.join()
        summary = src.ingest()
        [table] = summary["tables"]
        assert table["status"] == "committed" and table["dead_letters"] == 0, table
        assert src.lake_rows("customers") == src.source_rows("customers")
        assert src.dead_letters() == 0
    finally:
        src.stop()
