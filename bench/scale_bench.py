"""Target 4 of issue 16: does merge cost follow the batch or the table? The same-sized change batch merged into a
small and a large table; the ratio of their merge-phase times (goal ≤ 2.0 at 1M vs 50M rows).

    make bench-scale [BENCH_ARGS="--small 1000000 --large 50000000 --changes 100000"]

Per size: the job creates the target from a 1,000-row snapshot, Spark fills it up to the size directly (rows with
ordering positions older than any change, so every change applies), then ``--changes`` random changes (~25 %
inserts / 65 % updates / 10 % deletes over the whole key range) go through ``python jobs/ingest.py``; the merge phase
comes from the job's summary. Not part of CI. On the 2-core machine the defaults (1M vs 10M) take about 2.5 minutes
and ``--large 50000000`` 3.5–5 minutes (the 50M fill alone: 61–142 s, depending on the machine's load).
``--batch '{"bloom_filter_min_target_rows": 0}'`` and the like compare the job's merge settings.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "plugins"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench import procs, report  # noqa: E402
from bench.workload import Stream, pipeline_yaml  # noqa: E402

FILL = """
import sys
from cdc.config.load import load_config
from cdc.spark.session import build_session
cfg, target, first, last = load_config(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spark = build_session(cfg, "cdc-bench-fill", None)
def expr(f):
    t = f.dataType.simpleString()
    if f.name == "id":
        return f"CAST(id AS {t})"
    if t in ("tinyint", "smallint", "int", "bigint") or t.startswith("decimal") or t in ("float", "double"):
        return f"CAST(0 AS {t})"
    if t == "string":
        return "concat('row', id)"
    if t == "boolean":
        return "false"
    if t == "date":
        return "DATE'2020-01-01'"
    if t.startswith("timestamp"):
        return f"CAST(TIMESTAMP'2020-01-01 00:00:00' AS {t})"
    return f"CAST(NULL AS {t})"
cols = ", ".join(f"{expr(f)} AS `{f.name}`" for f in spark.table(target).schema.fields)
spark.sql(f"INSERT INTO {target} SELECT {cols} FROM range({first}, {last + 1}) ORDER BY id")
spark.stop()
"""


class LazyRows(dict):
    """The generator's table model for keys 1..size without materialising them: a key exists unless deleted;
    its row is made up on first touch (the merge only needs the change's after-image and position)."""

    def __init__(self, gen: Any, size: int):
        super().__init__()
        self.gen, self.size, self.gone = gen, size, set()

    def _lazy(self, k: Any) -> bool:
        return isinstance(k, int) and 1 <= k <= self.size and k not in self.gone

    def __contains__(self, k: object) -> bool:
        return dict.__contains__(self, k) or self._lazy(k)

    def __getitem__(self, k: Any) -> Any:
        if not dict.__contains__(self, k) and self._lazy(k):
            dict.__setitem__(self, k, self.gen._new_row(k))
        return dict.__getitem__(self, k)

    def pop(self, k: Any, *default: Any) -> Any:
        row = self[k]
        dict.__delitem__(self, k)
        self.gone.add(k)
        return row

    def __len__(self) -> int:  # roughly (the generator only asks whether the table is small)
        return self.size - len(self.gone) + dict.__len__(self)


def log(msg: str) -> None:
    print(f"[{datetime.now(timezone.utc):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def one_size(size: int, args: argparse.Namespace, broker: Any, registry: str, tmp: Path) -> dict[str, Any]:
    stream = Stream(broker, registry, f"scale.public.t{size}", args.partitions, seed=7)
    cfg = pipeline_yaml(tmp / f"scale{size}.yaml", f"scale{size}", broker.bootstrap, registry,
                        str(tmp / f"wh{size}"), [(stream.topic, "scale.customers")],
                        {"max_records_per_partition": args.changes * 2, "chunk_size": 100_000,
                         **json.loads(args.batch)},
                        {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "8"})
    layout = json.loads(args.layout)
    if layout:
        import yaml

        raw = yaml.safe_load(cfg.read_text())
        raw["tables"][0].update(layout)
        cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    seed_rows = min(1000, size)
    stream.produce_preload(seed_rows)
    procs.ingest(cfg).check("create the target")
    t0 = time.perf_counter()
    procs.python_c(FILL, str(cfg), "lake.scale.customers", str(seed_rows + 1), str(size)).check("fill")
    fill_s = time.perf_counter() - t0
    log(f"{size:,} rows: filled in {fill_s:.0f} s")
    gen = stream.gen
    gen.rows = LazyRows(gen, size)
    gen._next_id = size + 1
    stream.produce_batch(args.changes)
    job = procs.ingest(cfg).check("merge the changes")
    summary = (job.summary() or {"tables": [{}]})["tables"][0]
    out = {"rows": size, "changes": args.changes, "fill_s": round(fill_s), "job_s": round(job.seconds, 1),
           "phases_s": summary.get("seconds"),
           "counts": {k: summary.get(k) for k in ("events_read", "inserted", "updated", "deleted")}}
    log(f"{size:,} rows: {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--large", type=int, default=10_000_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--layout", default="{}", help='the table\'s layout keys as JSON, e.g. '
                    '\'{"partition_by": ["bucket(16, id)"], "sort_by": ["id"]}\' (see Table layout in the README)')
    ap.add_argument("--batch", default="{}", help='more batch settings as JSON, e.g. '
                    '\'{"bloom_filter_min_target_rows": 0}\' (see Configuration in the README)')
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args(argv)
    from devtools.broker import LocalBroker
    from devtools.registry import LocalSchemaRegistry

    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    with LocalBroker() as broker, LocalSchemaRegistry() as registry, \
            tempfile.TemporaryDirectory(prefix="cdc-bench-scale-") as tmp:
        runs = [one_size(n, args, broker, registry.url, Path(tmp)) for n in (args.small, args.large)]
    small, large = (r["phases_s"]["merge"] for r in runs)
    ratio = large / small
    rows = [report.row("4", f"merge {args.changes:,} changes: {args.large:,} vs {args.small:,} rows "
                            f"({args.large / args.small:g}x)", f"{large:.1f} s", f"{small:.1f} s", ratio, "<= 2.0",
                       ratio <= 2.0)]
    result = {"started": started.isoformat(timespec="seconds"), "machine": report.machine(),
              "command": "python bench/scale_bench.py " + shlex.join(argv or sys.argv[1:]), "args": vars(args),
              "seconds": round(time.perf_counter() - t0), "targets": rows, "details": {"scale": runs}}
    print("\n".join(report.table_lines(rows)))
    js, md = report.write(result, Path(args.out), "scale")
    print(f"bench-scale: {result['seconds']} s; results in {js} and {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
