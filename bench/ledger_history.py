"""What a long ledger history costs each ledger read and write, and what ``cdc.ledger.expiry`` gives back.

    python bench/ledger_history.py [--tables 20] [--snapshots 11760] [--rounds 15]

Creates a pipeline's ledger (``ensure_meta_tables``) with one cursor row per table, then gives it the history a
pipeline of ``--tables`` tables on the hourly schedule keeps under the daily maintenance's 168-hour retention (about
3.5 ledger commits per table and batch: 20 × 3.5 × 168 ≈ 11,760 snapshots). The older snapshots are written into the
table's metadata file directly, spread over the week (building them by committing would take hours: each commit
writes the whole file again). Then it times the ledger work of one table's batch, ``--rounds`` times each:

* **read**: ``Ledger.state`` (drops the cached metadata, reads it again, scans the table's rows), what a run does
  before planning and after its claim;
* **write**: a cursor reset (``Ledger.reset_cursor``: one commit, which writes the metadata file again).

with the week's history, and again after ``cdc.ledger.expiry.expire_history`` cut it to the ledger's 24 hours
(timed too, and once more for the ``EXPIRE_AT_LEAST`` snapshots a run finds to expire in the steady state). Prints the
medians and their ratio. Not in ``make bench`` (a ledger this old never occurs there).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "jobs"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

HOUR_MS = 3600 * 1000


def age_history(metadata_dir: Path, snapshots: int, now_ms: int) -> int:
    """Write a new metadata version (hadoop catalog: ``v<N+1>.metadata.json`` and the version hint) whose history
    starts with ``snapshots`` older snapshots, evenly spread over the 168 hours before the first real one, each like
    a ledger mark (an overwrite with a ``cdc.ledger-write`` property). They share copies of the current snapshot's
    manifest list. Returns the new version."""
    version = int((metadata_dir / "version-hint.text").read_text().strip())
    meta = json.loads((metadata_dir / f"v{version}.metadata.json").read_text())
    first, current = meta["snapshots"][0], meta["snapshots"][-1]
    # Expiring a snapshot deletes its manifest list: the snapshots a day's retention keeps get their own copy.
    shared = {young: metadata_dir / f"snap-aged-history-{version}-{'day' if young else 'older'}.avro"
              for young in (False, True)}
    for path in shared.values():
        shutil.copyfile(current["manifest-list"].removeprefix("file:"), path)
    start = min(first["timestamp-ms"], now_ms) - 168 * HOUR_MS
    step = 168 * HOUR_MS // snapshots
    fakes, parent = [], None
    for i in range(snapshots):
        snap = {**first, "snapshot-id": random.getrandbits(62), "sequence-number": first["sequence-number"],
                "timestamp-ms": start + i * step,
                "manifest-list": str(shared[start + i * step >= now_ms - 24 * HOUR_MS]),
                "summary": {**first["summary"], "operation": "overwrite", "deleted-data-files": "1",
                            "cdc.ledger-write": f"{random.getrandbits(128):032x}"}}
        snap.pop("parent-snapshot-id", None)
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        parent = snap["snapshot-id"]
        fakes.append(snap)
    first["parent-snapshot-id"] = parent
    meta["snapshots"] = fakes + meta["snapshots"]
    meta["snapshot-log"] = [{"timestamp-ms": s["timestamp-ms"], "snapshot-id": s["snapshot-id"]} for s in fakes] + \
        meta["snapshot-log"]
    (metadata_dir / f"v{version + 1}.metadata.json").write_text(json.dumps(meta))
    (metadata_dir / ".version-hint.text.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old hint
    (metadata_dir / "version-hint.text").write_text(str(version + 1))
    return version + 1


def timed(rounds: int, op: Any) -> float:
    op(0)  # warm
    return statistics.median(_once(op, i) for i in range(1, rounds + 1))


def _once(op: Any, i: int) -> float:
    t = time.perf_counter()
    op(i)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--snapshots", type=int, default=11760, help="older snapshots to give the ledger")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)

    from cdc.config.load import parse_config
    from cdc.ledger.expiry import EXPIRE_AT_LEAST, expire_history
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.tables import ensure_meta_tables
    from cdc.spark.session import build_session

    with tempfile.TemporaryDirectory() as tmp:
        cfg = parse_config({
            "pipeline": "bench", "kafka": {"bootstrap.servers": "127.0.0.1:9"}, "format": "json",
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": f"{tmp}/wh"}, "metadata_namespace": "meta",
            "tables": [{"topic": f"t{i}", "target": f"db.t{i}"} for i in range(args.tables)]})
        spark = build_session(cfg, "cdc-bench-ledger-history")
        ensure_meta_tables(spark, cfg)
        name = "lake.meta.ledger"
        led = Ledger(spark, name, cfg.pipeline)
        batches = {t.target: 1 for t in cfg.tables}

        def read(i: int) -> None:
            t = cfg.tables[i % len(cfg.tables)]
            led.state(t.target, t.topic)

        def write(i: int) -> None:
            t = cfg.tables[i % len(cfg.tables)]
            batches[t.target] += 1
            led.reset_cursor(t.target, t.topic, batches[t.target], {0: (i, i + 1)}, f"run-{i}")

        for t in cfg.tables:
            led.reset_cursor(t.target, t.topic, 1, {0: (0, 1)}, "setup")
        metadata = Path(f"{tmp}/wh/meta/ledger/metadata")
        age_history(metadata, args.snapshots, time.time_ns() // 1_000_000)
        spark.catalog.refreshTable(name)
        size_mb = max(metadata.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0])).stat().st_size / 1e6
        week = {"read": timed(args.rounds, read), "write": timed(args.rounds, write)}
        spark.catalog.refreshTable(name)
        t0 = time.perf_counter()
        gone = expire_history(spark, name)
        expire_s = time.perf_counter() - t0
        spark.catalog.refreshTable(name)
        left = spark.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0]
        day = {"read": timed(args.rounds, read), "write": timed(args.rounds, write)}
        # the steady state: a run finds EXPIRE_AT_LEAST snapshots to expire (about every 1.5 hours of 20 hourly tables)
        age_history(metadata, EXPIRE_AT_LEAST, time.time_ns() // 1_000_000)
        spark.catalog.refreshTable(name)
        t0 = time.perf_counter()
        steady = expire_history(spark, name)
        steady_s = time.perf_counter() - t0
        spark.stop()
    print(f"ledger of {args.tables} tables with {args.snapshots:,} older snapshots over 168 h "
          f"(metadata file {size_mb:.1f} MB); medians of {args.rounds} rounds")
    print(f"expire_history: {gone:,} snapshots expired in {expire_s:.1f} s; {left:,} left")
    print(f"steady state: {steady} snapshots expired in {steady_s:.2f} s")
    print("| op | week of history | after expiry | ratio |")
    print("|---|---|---|---|")
    for op in ("read", "write"):
        print(f"| {op} | {week[op] * 1000:.0f} ms | {day[op] * 1000:.0f} ms | {week[op] / day[op]:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
