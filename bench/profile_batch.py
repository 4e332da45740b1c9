"""Profile one warm batch statement by statement: where a small batch's time goes inside a running Spark session.

    python bench/profile_batch.py [--events 100] [--preload 1000] [--batches 3] [--tables 1] [--whole-process]

Starts the local broker and test registry, loads ``--preload`` snapshot rows (one batch, not profiled), then runs
``--batches`` batches of ``--events`` changes each in the same SparkSession and prints, for the last one, every Spark
SQL execution (statements, DataFrame writes) with its wall time and the Spark jobs it started, plus the per-phase
seconds. The
first measured batches warm the JVM (class loading, code generation); the last shows the steady state an Airflow run
of an already-started application would see. ``--whole-process``: the measured batch is one ``jobs/ingest.py``
process instead (Spark start-up and every cold statement included, as ``make bench`` runs it), profiled from Spark's
event log; the gaps between executions are Python, Py4J and Kafka time. In-session, it also prints the JVM's CPU
of the last batch by thread (``bench.procs.ThreadCpu``: statement threads, Spark tasks, JIT, GC, ...), its Janino
compilations, with ``--rules N`` the N slowest Catalyst rules and, with ``--jvm-stacks``, the driver JVM's busy
threads by activity (analysis, planning, code generation, tasks, Iceberg commits, ...: ``bench.jvm_stacks``).
Not a benchmark (no ratio): an explanation of one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from bench.jvm_stacks import StackSampler  # noqa: E402
from bench.jvm_stacks import report as jvm_report
from bench.procs import ThreadCpu, cpu_seconds  # noqa: E402
from bench.workload import Stream, pipeline_yaml  # noqa: E402


class Recorder:
    """Every SQL execution of the session (statements, DataFrame writes, catalog commands) from the Spark UI's REST
    API: (start, seconds, jobs, description), in order."""

    def __init__(self, spark: Any):
        self.base = spark.sparkContext.uiWebUrl.rstrip("/") + "/api/v1/applications/" + spark.sparkContext.applicationId
        self.mark = 0

    def _executions(self) -> list[dict[str, Any]]:
        import json
        import urllib.request

        with urllib.request.urlopen(f"{self.base}/sql?details=false&length=100000") as r:
            return json.load(r)

    def start(self) -> None:
        self.mark = max((e["id"] for e in self._executions()), default=-1) + 1

    def calls(self) -> list[tuple[str, float, int, str]]:
        out = []
        for e in self._executions():
            if e["id"] >= self.mark:
                jobs = len(e.get("successJobIds", [])) + len(e.get("failedJobIds", [])) + len(e.get("runningJobIds", []))
                out.append((e["submissionTime"], e["duration"] / 1000.0, jobs, e["description"]))
        return sorted(out)


def event_log_calls(path: Path) -> tuple[float, float, list[tuple[str, float, int, str]]]:
    """(application start, end, executions) from a Spark event log file (epoch seconds)."""
    import json

    app = [0.0, 0.0]
    starts: dict[int, tuple[float, str]] = {}
    jobs: dict[int, int] = {}
    out = []
    for line in path.read_text().splitlines():
        e = json.loads(line)
        kind = e["Event"].rsplit(".", 1)[-1]
        if kind == "SparkListenerApplicationStart":
            app[0] = e["Timestamp"] / 1000
        elif kind == "SparkListenerApplicationEnd":
            app[1] = e["Timestamp"] / 1000
        elif kind == "SparkListenerSQLExecutionStart":
            starts[e["executionId"]] = (e["time"] / 1000, e["description"])
        elif kind == "SparkListenerJobStart":
            eid = (e.get("Properties") or {}).get("spark.sql.execution.id")
            if eid is not None:
                jobs[int(eid)] = jobs.get(int(eid), 0) + 1
        elif kind == "SparkListenerSQLExecutionEnd" and e["executionId"] in starts:
            t0, text = starts.pop(e["executionId"])
            out.append((t0, e["time"] / 1000 - t0, jobs.get(e["executionId"], 0), text))
    return app[0], app[1], sorted(out)


def whole_process(cfg_path: Path, tmp: str, py_spy: str | None = None, idle: bool = True) -> None:
    import subprocess

    import yaml

    raw = yaml.safe_load(cfg_path.read_text())
    logs = Path(tmp) / "eventlog"
    logs.mkdir()
    raw["spark"].update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{logs}"})
    cfg_path.write_text(yaml.safe_dump(raw))
    t0 = time.time()
    cmd = [sys.executable, str(REPO / "jobs" / "ingest.py"), "--config", str(cfg_path)]
    if py_spy:  # the driver's Python stacks (py-spy's raw "collapsed" format: one line per stack with its samples)
        cmd = [str(Path(sys.executable).with_name("py-spy")), "record", *(["--idle"] if idle else []), "--threads", "--format", "raw", "-r", "100", "-o", py_spy,
               "--", *cmd]
    proc = subprocess.run(cmd,
                          capture_output=True, text=True, cwd=str(REPO))
    end = time.time()
    Path("/tmp/cdc-profile-stderr.txt").write_text(proc.stderr)  # the job's whole stderr, for a failure's cause
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    import json

    summary = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    app_start, app_end, calls = event_log_calls(next(logs.iterdir()))
    print(f"process {end - t0:.2f} s: Python start to SparkContext {app_start - t0:.2f} s, "
          f"executions {sum(c[1] for c in calls):.2f} s ({len(calls)}, {sum(c[2] for c in calls)} jobs), "
          f"after the app ended {end - app_end:.2f} s")
    print("phases:", {t["table"]: t["seconds"] for t in summary["tables"]})
    odd = {t["table"]: (t.get("status"), t.get("error")) for t in summary["tables"] if t.get("status") != "committed"}
    if odd:
        print("not committed:", odd)
    last = app_start
    for when, secs, jobs, text in calls:
        print(f"+{when - t0:6.2f} gap {when - last:5.2f}  {secs:6.3f} s {jobs:3d} jobs  {' '.join(text.split())[:110]}")
        last = when + secs


def print_rules(dump: str, top: int) -> None:
    """The totals and the ``top`` slowest rules of ``RuleExecutor.dumpTimeSpent()``: its header lines (up to the
    one naming the columns, ``Rule ...``), then its rules, already sorted by time."""
    lines = [line for line in dump.splitlines() if line.strip()]
    columns = next(i for i, line in enumerate(lines) if line.startswith("Rule "))
    print("\nCatalyst rules in the last batch (RuleExecutor.dumpTimeSpent):")
    print("\n".join(lines[:columns + 1 + top]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--preload", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--tables", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=1, help="batch.table_concurrency")
    ap.add_argument("--batch", type=json.loads, default={}, help="JSON object of more batch: settings")
    ap.add_argument("--spark-conf", type=json.loads, default={}, help="JSON object of more spark: settings")
    ap.add_argument("--whole-process", action="store_true", help="measure the last batch as one jobs/ingest.py")
    ap.add_argument("--rules", type=int, default=0, metavar="N",
                    help="print the N Catalyst rules that took the most time in the last batch (analysis, "
                         "optimization, AQE: Spark's RuleExecutor metering)")
    ap.add_argument("--jvm-stacks", action="store_true",
                    help="sample the driver JVM's thread dumps during the last batch and print its busy threads by "
                         "activity (bench.jvm_stacks)")
    ap.add_argument("--py-spy", metavar="FILE", help="with --whole-process: record the driver's Python stacks into FILE (needs `pip install py-spy`)")
    ap.add_argument("--cpu-only", action="store_true", help="with --py-spy: only stacks that run on a CPU (no waits)")
    args = ap.parse_args(argv)

    from cdc.config.load import load_config
    from cdc.run.batch import run_batch
    from cdc.spark.session import build_session
    from devtools.broker import LocalBroker, free_port
    from devtools.registry import LocalSchemaRegistry

    with LocalBroker() as broker, LocalSchemaRegistry() as registry, tempfile.TemporaryDirectory() as tmp:
        streams = [Stream(broker, registry.url, f"prof.public.t{i}", 1, seed=7 + i) for i in range(args.tables)]
        cfg_path = pipeline_yaml(Path(tmp) / "p.yaml", "prof", broker.bootstrap, registry.url, f"{tmp}/wh",
                                 [(s.topic, f"prof.t{i}") for i, s in enumerate(streams)],
                                 {"table_concurrency": args.concurrency, **args.batch},
                                 {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "true",
                                  "spark.ui.port": str(free_port()), "spark.sql.ui.retainedExecutions": "100000",
                                  **args.spark_conf})
        cfg = load_config(cfg_path)
        if args.whole_process:
            from bench import procs

            for s in streams:
                s.produce_preload(args.preload)
            procs.ingest(cfg_path).check("preload")
            for s in streams:
                s.produce_batch(args.events)
            whole_process(cfg_path, tmp, args.py_spy, idle=not args.cpu_only)
            return 0
        spark = build_session(cfg, "cdc-profile")
        rec = Recorder(spark)
        jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        for s in streams:
            s.produce_preload(args.preload)
        run_batch(spark, cfg, cfg.tables, isolate=True)
        from cdc.spark.py4j_classes import java_class

        metering = java_class(spark, "org.apache.spark.sql.catalyst.rules.RuleExecutor")
        codegen = java_class(spark, "org.apache.spark.metrics.source.CodegenMetrics")
        for n in range(args.batches):
            for s in streams:
                s.produce_batch(args.events)
            rec.start()
            metering.resetMetrics()
            sampler = ThreadCpu(jvm_pid).start()
            compiled = codegen.METRIC_COMPILATION_TIME().getCount()
            stacks = StackSampler(rec.base).start() if args.jvm_stacks and n == args.batches - 1 else None
            t0, c0 = time.perf_counter(), cpu_seconds(jvm_pid, children=True)
            out = run_batch(spark, cfg, cfg.tables, isolate=True)
            if stacks is not None:
                stacks.stop()
            wall, used = time.perf_counter() - t0, cpu_seconds(jvm_pid, children=True) - c0
            threads = sampler.stop()
            compiled = codegen.METRIC_COMPILATION_TIME().getCount() - compiled
            print(f"batch {n + 1}: {wall:.2f} s, JVM CPU {used:.1f} s (with its children)",
                  {t["table"]: t["seconds"] for t in out["tables"]}, flush=True)
        top = sorted(threads.items(), key=lambda kv: -kv[1])[:12]
        print(f"\nJVM CPU of the last batch by thread ({sum(threads.values()):.1f} s):",
              ", ".join(f"{k} {v:.1f}" for k, v in top if v >= 0.05))
        timing = codegen.METRIC_COMPILATION_TIME().getSnapshot()
        print(f"Janino compilations in the last batch: {compiled}, {timing.getMean():.0f} ms each (mean of the "
              f"session's; max {timing.getMax()} ms)")
        if stacks is not None:
            print("\n" + jvm_report(stacks.stacks, stacks.dumps))
        if args.rules:
            print_rules(metering.dumpTimeSpent(), args.rules)
        calls = rec.calls()
        print(f"\nlast batch: {len(calls)} SQL executions, {sum(c[2] for c in calls)} Spark jobs, "
              f"{sum(c[1] for c in calls):.2f} s of {wall:.2f} s wall")
        for when, secs, jobs, text in calls:
            print(f"{when[11:23]} {secs:7.3f} s {jobs:3d} jobs  {' '.join(text.split())[:140]}")
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
