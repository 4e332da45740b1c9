"""Benchmark workloads: Debezium PostgreSQL Avro streams on the local broker, and pipeline YAML files for them.

A *stream* is ``preload`` snapshot reads (the rows the target holds before the measured batch) followed by ``events``
random changes (~25 % inserts / 65 % updates / 10 % deletes, each delete followed by its tombstone) over
``partitions`` partitions, all from one seeded generator (so the same data every run)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

WEIGHTS = {"insert": 25, "update": 65, "delete": 10}


@dataclass
class Produced:
    topic: str
    partitions: int
    start: dict[int, int]  # first offset of the measured batch per partition
    end: dict[int, int]  # high watermark after it
    records: int
    seconds: float  # generate + serialize + produce

    @property
    def batch_records(self) -> int:
        return sum(self.end[p] - self.start.get(p, 0) for p in self.end)


def avro_serializer(registry_url: str, topic: str) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from devtools.debezium import AvroSerializer

    return AvroSerializer(SchemaRegistryClient({"url": registry_url}), topic=topic)


class Stream:
    """One seeded table stream; ``produce_preload`` then ``produce_batch`` (each returns what it wrote)."""

    def __init__(self, broker: Any, registry_url: str, topic: str, partitions: int, seed: int = 11):
        from devtools.debezium import ChangeEventGenerator, GeneratorConfig

        self.broker, self.topic, self.partitions = broker, topic, partitions
        broker.create_topic(topic, partitions=partitions)
        self.gen = ChangeEventGenerator(seed, GeneratorConfig(partitions=partitions, keep_records=False,
                                                              toast_fraction=0.0))
        self.ser = avro_serializer(registry_url, topic)
        self.offsets = {p: 0 for p in range(partitions)}

    def _produce(self, records: Iterator[Any], limit: int) -> Produced:
        from devtools.debezium import produce_fast

        t0 = time.perf_counter()
        start = dict(self.offsets)
        items = []
        for rec in records:
            items.append((*self.ser.serialize(rec), rec.partition))
            if len(items) >= limit:
                break
        for *_, p in items:
            self.offsets[p] += 1
        produce_fast(self.broker.bootstrap, self.topic, items)
        return Produced(self.topic, self.partitions, start, dict(self.offsets), len(items), time.perf_counter() - t0)

    def produce_preload(self, rows: int) -> Produced:
        return self._produce(iter(self.gen.snapshot(rows)) if rows else iter(()), rows)

    def produce_batch(self, events: int) -> Produced:
        return self._produce(self.gen.iter_random_ops(events, WEIGHTS), events)


def pipeline_yaml(path: Path, name: str, bootstrap: str, registry_url: str, warehouse: str,
                  tables: list[tuple[str, str]], batch: dict[str, Any] | None = None,
                  spark: dict[str, str] | None = None) -> Path:
    """A pipeline YAML for (topic, target) pairs (Avro, hadoop catalog in ``warehouse``)."""
    raw = {
        "pipeline": name, "kafka": {"bootstrap.servers": bootstrap}, "format": "avro",
        "schema_registry": {"url": registry_url},
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": warehouse},
        "batch": {"read_timeout_seconds": 120, **(batch or {})},
        "spark": dict(spark or {}),
        "tables": [{"topic": t, "target": target} for t, target in tables],
    }
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
