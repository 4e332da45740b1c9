from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import unique
from tests.integration import events


@dataclass
class Pipe:
    """One topic → one target table with its own metadata namespace, driven batch by batch."""

    spark: Any
    broker: Any
    cfg: Any
    topic: str

    @property
    def table(self):
        return self.cfg.tables[0]

    @property
    def target(self) -> str:
        return f"{self.cfg.catalog.name}.{self.table.target}"

    def send(self, *records, partition: int = 0) -> None:
        events.produce(self.broker.bootstrap, self.topic, records, partition)

    def run(self, **kw) -> dict[str, Any]:
        from cdc.run.batch import run_batch

        return run_batch(self.spark, self.cfg, list(self.cfg.tables), **kw)["tables"][0]

    def rows(self, *cols: str) -> dict[Any, tuple]:
        cols = cols or ("name", "bio")
        key = self.table.primary_key[0] if self.table.primary_key else "id"
        return {r[key]: tuple(r[c] for c in cols) for r in self.spark.table(self.target).collect()}

    def ledger(self) -> list[Any]:
        return self.spark.sql(f"SELECT * FROM {self.cfg.catalog.name}.{self.cfg.metadata_namespace}.ledger "
                              "ORDER BY batch_id, `partition`").collect()


@pytest.fixture(scope="session")
def registry():
    """An in-process Confluent-compatible schema registry (``devtools.registry``) for Avro pipelines."""
    from devtools.registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as r:
        yield r


@pytest.fixture
def make_pipe(spark, broker, warehouse):
    from cdc.config.load import parse_config

    def make(partitions: int = 1, fmt: str = "json", schema_registry: dict[str, Any] | None = None,
             topic_config: dict[str, str] | None = None, batch: dict[str, Any] | None = None, **table: Any) -> Pipe:
        topic = unique("dbserver1.public.customers_")
        if topic_config:
            from confluent_kafka.admin import NewTopic

            admin = broker.admin()  # keep the client alive until the futures resolve
            for f in admin.create_topics([NewTopic(topic, partitions, config=topic_config)]).values():
                f.result(10)
        else:
            broker.create_topic(topic, partitions=partitions)
        ns = unique("t")
        cfg = parse_config({
            "pipeline": "tests", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": fmt,
            **({"schema_registry": schema_registry} if schema_registry else {}),
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
            "metadata_namespace": unique("meta"),
            "batch": {"read_timeout_seconds": 20, **(batch or {})},
            "tables": [{"topic": topic, "target": f"{ns}.customers", **table}],
        })
        return Pipe(spark, broker, cfg, topic)

    return make
