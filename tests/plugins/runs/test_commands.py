"""Pure command builders, planning and summary folding (no Airflow, Spark or Kafka)."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_airflow.runs.commands import RunRequest, ingest_args, plan_tables, summarize

CFG = "/p/demo.yaml"
T = "inventory.orders"
TOPIC = "dbserver1.public.orders"


def test_ingest_args_incremental_minimal() -> None:
    assert ingest_args(CFG, T, TOPIC, RunRequest()) == ["--config", CFG, "--table", T, "--mode", "incremental"]


def test_ingest_args_all_options_and_topic_subset() -> None:
    req = RunRequest(mode="backfill", max_records_per_partition=50,
                     start_offsets={TOPIC: {0: 10}, "other": {0: 1}}, end_offsets={TOPIC: {10: 1, 0: 20, 1: 5}},
                     start_ts_ms=1704067200000, end_ts_ms=1704070800000)
    args = ingest_args(CFG, T, TOPIC, req)
    assert args[:6] == ["--config", CFG, "--table", T, "--mode", "backfill"]
    assert args[args.index("--max-records") + 1] == "50"
    assert json.loads(args[args.index("--start-offsets") + 1]) == {TOPIC: {"0": 10}}  # only this table's topic
    assert args[args.index("--end-offsets") + 1] == '{"%s": {"0": 20, "1": 5, "10": 1}}' % TOPIC
    assert args[args.index("--start-timestamp") + 1] == "1704067200000"  # canonical: epoch milliseconds
    assert args[args.index("--end-timestamp") + 1] == "1704070800000"


def test_ingest_args_are_what_the_job_parses() -> None:
    """The DAG's arguments round-trip through the job's own parser (jobs/ingest.py) to the same range."""
    import importlib.util

    from cdc.common.cli_contract import Bounds

    spec = importlib.util.spec_from_file_location("cdc_ingest_job_args", Path(__file__).parents[3] / "jobs/ingest.py")
    job = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(job)  # type: ignore[union-attr]
    req = RunRequest(mode="backfill", end_offsets={TOPIC: {0: 20}}, start_ts_ms=1714564800000)
    bounds = job.bounds_from_args(job.parse_args(ingest_args(CFG, T, TOPIC, req)))
    assert bounds.for_topic(TOPIC) == Bounds({}, {0: 20}, 1714564800000, None)


def test_dry_run_is_incremental_with_flag() -> None:
    args = ingest_args(CFG, T, TOPIC, RunRequest(mode="dry_run"))
    assert args[args.index("--mode") + 1] == "incremental" and "--dry-run" in args


def test_plan_tables_incremental_only_tables_with_lag() -> None:
    tables = [("a.x", "tx"), ("a.y", "ty")]
    plans = plan_tables(tables, RunRequest(), CFG, {"a.x": {0: 0}, "a.y": {0: 3, 1: 1}})
    assert [(p.table, p.reason) for p in plans] == [("a.y", "lag=4")]
    assert plans[0].as_kwargs()["application_args"][:4] == ["--config", CFG, "--table", "a.y"]


def test_plan_tables_backfill_and_explicit_range_run_all() -> None:
    tables = [("a.x", "tx"), ("a.y", "ty")]
    assert len(plan_tables(tables, RunRequest(mode="backfill"), CFG, None)) == 2
    assert len(plan_tables(tables, RunRequest(end_ts_ms=1714564800000), CFG, None)) == 2


def test_summarize_totals_and_missing() -> None:
    s = {"pipeline": "demo", "tables": [{"table": "a.x", "status": "committed", "batch_id": 3, "events_read": 10,
                                        "inserted": 4, "updated": 1, "deleted": 0,
                                        "seconds": {"plan": 0.5, "merge": 1.25}}]}
    report = summarize([s], ["a.x", "a.y"])
    assert report["missing"] == ["a.y"]
    assert report["totals"]["events_read"] == 10 and report["totals"]["inserted"] == 4
    assert report["tables"][0]["seconds"] == 1.75
