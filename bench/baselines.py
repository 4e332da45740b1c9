"""Same-run baselines of the benchmark (so machine speed cancels out in the ratios).

* ``decode_floor``: one Python process reading the measured ranges with confluent-kafka and decoding every key and
  value with fastavro (schemaless reader, writer schema from the registry) — target 1's floor;
* ``SPARK_FLOOR``: a process that starts the job's own local Spark session (same settings, Iceberg jar) and commits
  one row to an Iceberg table — target 2's floor (``python -c SPARK_FLOOR <pipeline.yaml>``, timed as a process);
  ``SPARK_FLOOR_CACHED`` starts it from the job's JVM class archive (``cdc.spark.jvm_cache``);
* ``PyIcebergPeer``: what a Python user would write instead — consume + fastavro decode + last change per key +
  pyiceberg ``Table.delete`` / ``Table.upsert`` into a table pre-loaded with the same rows — target 6.
"""

from __future__ import annotations

import io
import json
import struct
import time
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]


class AvroDecoder:
    """Confluent wire format → Python dicts with fastavro (writer schemas fetched once per id)."""

    def __init__(self, registry_url: str):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.client = SchemaRegistryClient({"url": registry_url})
        self.schemas: dict[int, Any] = {}

    def __call__(self, data: bytes | None) -> Any:
        import fastavro

        if data is None:
            return None
        sid = struct.unpack(">I", data[1:5])[0]
        schema = self.schemas.get(sid)
        if schema is None:
            schema = self.schemas[sid] = fastavro.parse_schema(json.loads(self.client.get_schema(sid).schema_str))
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), schema, None)


def consume(bootstrap: str, topic: str, start: dict[int, int], end: dict[int, int]
            ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """Every record of [start, end) per partition: (partition, key, value), in offset order per partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "queued.max.messages.kbytes": 262144})
    todo = {p: e for p, e in end.items() if e > start.get(p, 0)}
    c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in todo])
    try:
        while todo:
            for m in c.consume(10000, 1.0):
                if m.error():
                    continue
                p = m.partition()
                if p not in todo or m.offset() >= todo[p]:
                    continue
                yield p, m.key(), m.value()
                if m.offset() + 1 >= todo[p]:
                    del todo[p]
    finally:
        c.close()


def decode_floor(bootstrap: str, registry_url: str, topic: str, start: dict[int, int], end: dict[int, int]
                 ) -> dict[str, Any]:
    """Target 1's floor: read + fastavro-decode every record of the ranges in this one process. ``cpu_s``: this
    process's CPU time meanwhile (all its threads, librdkafka's included)."""
    dec = AvroDecoder(registry_url)
    n, keys, t0, c0 = 0, set(), time.perf_counter(), time.process_time()
    for _, k, v in consume(bootstrap, topic, start, end):
        key = dec(k)
        dec(v)
        n += 1
        if key is not None:
            keys.add(key["id"])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"records": n, "distinct_keys": len(keys), "seconds": round(seconds, 2), "eps": round(n / seconds),
            "cpu_s": round(cpu, 2)}


SPARK_FLOOR = """
import sys, time
t0 = time.time()
from cdc.config.load import load_config
from cdc.spark.session import build_session
cfg = load_config(sys.argv[1])
spark = build_session(cfg, "cdc-bench-floor", None)
spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_floor")
spark.sql("CREATE TABLE IF NOT EXISTS lake.bench_floor.one (id INT, name STRING) USING iceberg")
spark.sql("INSERT INTO lake.bench_floor.one VALUES (1, 'one')")
spark.stop()
"""
# The same floor started from the job's JVM class archive (cdc.spark.jvm_cache), as the job itself starts by default.
SPARK_FLOOR_CACHED = SPARK_FLOOR.replace('"cdc-bench-floor", None)', '"cdc-bench-floor", None, class_cache=True)') + \
    "from cdc.spark import jvm_cache\njvm_cache.finish()\n"


def rows_and_deletes(dec: AvroDecoder, records: Iterator[tuple[int, bytes | None, bytes | None]]
                     ) -> tuple[dict[Any, dict[str, Any] | None], int]:
    """The last change per key (None = deleted) and the number of records read."""
    last: dict[Any, dict[str, Any] | None] = {}
    n = 0
    for _, k, v in records:
        n += 1
        if v is None:  # tombstone
            continue
        ev = dec(v)
        if ev["op"] == "d":
            last[ev["before"]["id"]] = None
        else:
            last[ev["after"]["id"]] = ev["after"]
    return last, n


class PyIcebergPeer:
    """A pyiceberg SQL catalog (SQLite) in ``root`` with one table pre-loaded from the preload ranges."""

    def __init__(self, root: Path, bootstrap: str, registry_url: str):
        from pyiceberg.catalog.sql import SqlCatalog

        root.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog("peer", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}")
        self.catalog.create_namespace_if_not_exists("peer")
        self.bootstrap, self.dec = bootstrap, AvroDecoder(registry_url)
        self.schema: Any = None

    def arrow(self, rows: list[dict[str, Any]]) -> Any:
        import pyarrow as pa

        table = pa.Table.from_pylist(rows)
        if self.schema is None:
            self.schema = pa.schema([f.with_nullable(f.name != "id") for f in table.schema])
        return table.select(self.schema.names).cast(self.schema)

    def preload(self, topic: str, start: dict[int, int], end: dict[int, int], chunk: int = 250_000) -> float:
        t0 = time.perf_counter()
        last, _ = rows_and_deletes(self.dec, consume(self.bootstrap, topic, start, end))
        rows = [r for r in last.values() if r is not None]
        self.table = self.catalog.create_table("peer.customers", schema=self.arrow(rows[:1000]).schema)
        for i in range(0, len(rows), chunk):
            self.table.append(self.arrow(rows[i:i + chunk]))
        return time.perf_counter() - t0

    def apply(self, topic: str, start: dict[int, int], end: dict[int, int],
              log: Callable[[str], None] = print) -> dict[str, Any]:
        """Target 6, timed: consume + decode + dedup + delete + upsert (one commit each)."""
        from pyiceberg.expressions import In

        t0 = time.perf_counter()
        last, n = rows_and_deletes(self.dec, consume(self.bootstrap, topic, start, end))
        read_s = time.perf_counter() - t0
        deleted = [k for k, r in last.items() if r is None]
        upserts = [r for r in last.values() if r is not None]
        if deleted:
            self.table.delete(In("id", deleted))
        delete_s = time.perf_counter() - t0 - read_s
        res = self.table.upsert(self.arrow(upserts), join_cols=["id"]) if upserts else None
        seconds = time.perf_counter() - t0
        log(f"peer: read+decode+dedup {read_s:.1f} s, delete {delete_s:.1f} s, upsert {seconds - read_s - delete_s:.1f} s")
        return {"records": n, "keys": len(last), "deleted": len(deleted),
                "inserted": getattr(res, "rows_inserted", None), "updated": getattr(res, "rows_updated", None),
                "seconds": round(seconds, 2), "eps": round(n / seconds),
                "phases_s": {"read_decode_dedup": round(read_s, 2), "delete": round(delete_s, 2),
                             "upsert": round(seconds - read_s - delete_s, 2)}}

    def count(self) -> int:
        return len(self.catalog.load_table("peer.customers").scan(selected_fields=("id",)).to_arrow())

