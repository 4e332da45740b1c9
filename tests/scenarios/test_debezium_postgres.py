"""The real chain: PostgreSQL 15 → Debezium 3.6's PostgreSQL connector in a Kafka Connect worker (distributed mode,
Kafka's JsonConverter) → Apache Kafka → the job → Iceberg; the oracle is the database itself (``SELECT *``)."""

from __future__ import annotations

import math
import threading
import time
from decimal import Decimal
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
    with ConnectWorker(broker.bootstrap, log_path=out / "connect.log") as worker:
        yield worker


class Source(PostgresSource):
    """One database with a Debezium connector (``devtools.pgsource``) and the job's pipeline over its topics."""

    def __init__(self, pg: Any, broker: Any, connect: Any, spark: Any, warehouse: Any, tables: dict[str, str],
                 **connector: str) -> None:
        from cdc.config.load import parse_config

        super().__init__(pg, connect, broker.bootstrap, unique("db"), unique("pg"), tables, name=unique("dbz"),
                         **{"incremental.snapshot.chunk.size": "4", **connector})
        self.create()
        self.spark = spark
        self.ns = unique("dbz")
        self.cfg = parse_config({
            "pipeline": "dbz", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": "json",
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
            "metadata_namespace": unique("meta"), "batch": {"read_timeout_seconds": 30},
            "tables": [{"topic": self.topic(t), "target": f"{self.ns}.{t}"} for t in tables]})

    def ingest(self) -> dict[str, Any]:
        """Every change made so far reaches Kafka, then one batch per table."""
        from cdc.run.batch import run_batch

        self.sync()
        return run_batch(self.spark, self.cfg, list(self.cfg.tables))

    def source_rows(self, table: str) -> dict[Any, tuple]:
        return {r[0]: tuple(_same(v) for v in r[1:]) for r in self.sql(f"SELECT * FROM {table} ORDER BY 1")}

    def lake_rows(self, table: str) -> dict[Any, tuple]:
        target = f"lake.{self.ns}.{table}"
        cols = [c for c in self.spark.table(target).columns if not c.startswith("__")]
        return {r[cols[0]]: tuple(_same(r[c]) for c in cols[1:]) for r in self.spark.table(target).collect()}

    def dead_letters(self) -> int:
        return self.spark.sql(f"SELECT count(*) FROM lake.{self.cfg.metadata_namespace}.dead_letters").first()[0]


def _same(v: Any) -> Any:
    """A value as both sides compare it (NaN equals NaN here)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, Decimal):
        return v.normalize()
    return v


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
