"""Benchmark: one big micro-batch of Debezium Avro events through the whole job, against same-run baselines.

    python bench/ingest_bench.py [--events 1000000] [--partitions 2] [--format avro|json]

Baselines, measured in the same run on the same topic (so machine speed cancels out):
* ``consume``: one Python process reading every record with confluent-kafka (no decoding);
* ``consume+decode``: the same plus per-record Debezium decoding with the job's own decoder, in one process.
The job (plan → parallel Spark reader tasks → staging → dedup MERGE → ledger) is reported in events/s and as a ratio
against those baselines. The stream is mostly inserts with some updates and deletes (realistic Postgres envelope,
8 columns incl. decimal/date/timestamp). Results are printed as a table and as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # devtools/ (cdc is the installed package: make venv)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def generate(n: int, partitions: int, fmt: str, registry_url: str | None, topic: str):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from devtools.debezium import AvroSerializer, ChangeEventGenerator, GeneratorConfig, JsonSerializer

    gen = ChangeEventGenerator(11, GeneratorConfig(partitions=partitions, keep_records=False, toast_fraction=0.0))
    ser = AvroSerializer(SchemaRegistryClient({"url": registry_url}), topic=topic) if fmt == "avro" \
        else JsonSerializer()
    items = []
    snapshot = n // 2
    for rec in gen.snapshot(snapshot):
        items.append((*ser.serialize(rec), rec.partition))
    weights = {"insert": 6, "update": 3, "delete": 1}
    for rec in gen.iter_random_ops(n, weights):
        items.append((*ser.serialize(rec), rec.partition))
        if len(items) >= n:
            break
    return items[:n], gen


def consume_all(bootstrap: str, topic: str, partitions: int, n: int, decoder=None) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, eof, t0 = 0, set(), time.perf_counter()
    while len(eof) < partitions:
        for m in c.consume(5000, 1.0):
            if m.error():
                eof.add(m.partition())
                continue
            seen += 1
            if decoder is not None:
                decoder.decode(m.key(), m.value())
    c.close()
    assert seen == n, f"read {seen} of {n}"
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--format", choices=("avro", "json"), default="avro")
    ap.add_argument("--chunk-size", type=int, default=250_000)
    args = ap.parse_args()

    from cdc.config import parse_config
    from cdc.decode.factory import make_decoder
    from cdc.run import run_batch
    from cdc.session import build_session
    from devtools.broker import LocalBroker
    from devtools.registry import LocalSchemaRegistry

    topic = "bench.public.customers"
    with LocalBroker() as broker, LocalSchemaRegistry() as registry:
        broker.create_topic(topic, partitions=args.partitions)
        t0 = time.perf_counter()
        items, _ = generate(args.events, args.partitions, args.format, registry.url, topic)
        gen_s = time.perf_counter() - t0
        from devtools.debezium import produce_fast

        _, produce_s = produce_fast(broker.bootstrap, topic, items)
        del items
        wh = tempfile.mkdtemp(prefix="bench-wh-")
        cfg = parse_config({
            "pipeline": "bench", "kafka": {"bootstrap.servers": broker.bootstrap}, "format": args.format,
            "schema_registry": {"url": registry.url},
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": wh},
            "batch": {"max_records_per_partition": args.events, "chunk_size": args.chunk_size,
                      "read_timeout_seconds": 120},
            "spark": {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "4"},
            "tables": [{"topic": topic, "target": "bench.customers"}],
        })
        consume_s = consume_all(broker.bootstrap, topic, args.partitions, args.events)
        decoder = make_decoder(cfg, cfg.tables[0])
        cols = decoder.resolve_columns([], [])
        decode_s = consume_all(broker.bootstrap, topic, args.partitions, args.events, decoder.bind(cols))

        spark = build_session(cfg, "cdc-bench", "local[*]")
        t0 = time.perf_counter()
        summary = run_batch(spark, cfg, list(cfg.tables))["tables"][0]
        job_s = time.perf_counter() - t0
        rows = spark.table("lake.bench.customers").count()
        spark.stop()

    n = args.events
    result = {
        "events": n, "format": args.format, "partitions": args.partitions, "cores": os.cpu_count(),
        "generate_s": round(gen_s, 1), "produce_s": round(produce_s, 1),
        "baseline_consume_eps": round(n / consume_s), "baseline_consume_decode_eps": round(n / decode_s),
        "job_s": round(job_s, 1), "job_eps": round(n / job_s), "phases_s": summary["seconds"],
        "read_stage_eps": round(n / summary["seconds"]["read_stage"]),
        "job_vs_consume_decode": round((n / job_s) / (n / decode_s), 2),
        "read_stage_vs_consume_decode": round((n / summary["seconds"]["read_stage"]) / (n / decode_s), 2),
        "target_rows": rows, "inserted": summary["inserted"], "updated": summary["updated"],
        "deleted": summary["deleted"], "events_skipped": summary["events_skipped"],
    }
    print(f"events={n} format={args.format} partitions={args.partitions} cores={os.cpu_count()}")
    print(f"baseline consume only          {result['baseline_consume_eps']:>10,} ev/s")
    print(f"baseline consume + decode      {result['baseline_consume_decode_eps']:>10,} ev/s  (1 process)")
    print(f"job read+stage                 {result['read_stage_eps']:>10,} ev/s  "
          f"x{result['read_stage_vs_consume_decode']} vs consume+decode")
    print(f"job end-to-end (1 batch)       {result['job_eps']:>10,} ev/s  "
          f"x{result['job_vs_consume_decode']} vs consume+decode; phases {summary['seconds']}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
