"""The job as users run it: `python jobs/ingest.py --config FILE` in a real subprocess (own JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO, unique
from tests.integration.cli import run_cli, summary_of
from tests.integration.events import pg, produce

pytestmark = pytest.mark.integration


def write_config(tmp_path, broker, warehouse, topic, target, **extra):
    cfg = {"pipeline": "cli", "kafka": {"bootstrap.servers": broker}, "format": "json",
           "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
           "metadata_namespace": unique("meta"), "batch": {"read_timeout_seconds": 15},
           "spark": {"spark.sql.shuffle.partitions": "2"},
           "tables": [{"topic": topic, "target": target}], **extra}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def ingest(config, *args, env=None, timeout=300):
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "ingest.py"), "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})})
    summary = None
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode == 0:
        summary = json.loads(lines[-1])
    return proc, summary


def test_crash_between_merge_and_ledger_commit_then_rerun(tmp_path, broker, warehouse, spark):
    topic, target = unique("dbserver1.public.cli_"), f"{unique('cli')}.customers"
    broker.create_topic(topic)
    produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 6)]
            + [pg("u", 2, {"id": 2, "name": "changed", "bio": None}, 10), pg("d", 3, {"id": 3, "name": "n3",
                                                                                     "bio": None}, 11)])
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target)

    crashed, _ = ingest(config, env={"CDC_KILL_AT": "before_commit"})
    assert crashed.returncode == -9  # SIGKILL: merged into the table, ledger not committed
    ledger = f"lake.{yaml.safe_load(config.read_text())['metadata_namespace']}.ledger"
    assert [r.status for r in spark.sql(f"SELECT status FROM {ledger}").collect()] == ["staged"]

    proc, summary = ingest(config)
    assert proc.returncode == 0, proc.stderr[-2000:]
    t = summary["tables"][0]
    assert t["recovered_batch_id"] == 1 and t["status"] == "empty"
    for name in (ledger, f"lake.{target}"):  # another process wrote them: drop Iceberg's cached metadata
        spark.catalog.refreshTable(name)
    rows = {r.id: r.name for r in spark.table(f"lake.{target}").collect()}
    assert rows == {1: "n1", 2: "changed", 4: "n4", 5: "n5"}
    assert [(r.batch_id, r.end_offset, r.status) for r in spark.sql(f"SELECT * FROM {ledger}").collect()] == [
        (1, 7, "committed")]


def test_summary_dry_run_and_clear_errors(tmp_path, broker, warehouse):
    topic, target = unique("dbserver1.public.cli_"), f"{unique('cli')}.customers"
    broker.create_topic(topic)
    produce(broker.bootstrap, topic, [pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1)])
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target)

    proc, summary = ingest(config, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert summary["tables"][0]["status"] == "dry_run"
    assert summary["tables"][0]["ranges"] == [{"partition": 0, "start": 0, "end": 1}]

    proc, summary = ingest(config, "--max-records", "5")
    t = summary["tables"][0]
    assert (t["status"], t["batch_id"], t["inserted"], t["events_read"]) == ("committed", 1, 1, 1)
    assert set(t["seconds"]) >= {"plan", "read_stage", "merge", "commit"}

    bad = tmp_path / "bad.yaml"
    bad.write_text(config.read_text().replace("format: json", "format: xml"))
    proc, _ = ingest(bad)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"ERROR [ConfigError] {bad}: key 'format'")

    missing = write_config(tmp_path, broker.bootstrap, warehouse, "no.such.topic", target)
    proc, _ = ingest(missing)
    assert proc.returncode == 2
    assert "topic no.such.topic does not exist" in proc.stderr.strip().splitlines()[-1]


def _waves(broker, topic: str, sizes: tuple[int, ...]) -> list[int]:
    """Insert waves of ``sizes`` events (ids 1, 2, ...; names a*, b*, ...) with pauses; returns, per pause, a time
    (epoch ms) between the broker write times of the waves around it."""
    broker.create_topic(topic)
    between, first = [], 1
    for n, (letter, size) in enumerate(zip("abcdef", sizes)):
        if n:
            time.sleep(1.2)
            between.append(int(time.time() * 1000))
            time.sleep(1.2)
        produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"{letter}{i}", "bio": None}, i)
                                          for i in range(first, first + size)])
        first += size
    return between


def test_timestamp_backfill_reads_from_start_to_end_timestamp(tmp_path, broker, warehouse, spark):
    """Regression: a backfill with only --start/--end-timestamp ignored them and planned the whole topic ([0, 35)
    instead of [20, 30)): the parsed bounds were an empty, falsy dict, so run_batch fell back to no bounds."""
    topic, target = unique("dbserver1.public.cli_ts_"), f"{unique('cli')}.customers"
    start, end = _waves(broker, topic, (20, 10, 5))
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target)

    res = run_cli(config, args=("--mode", "backfill", "--start-timestamp", str(start), "--end-timestamp", str(end)))
    assert res.returncode == 0, res.stderr[-3000:]
    t = summary_of(res)["tables"][0]
    assert t["ranges"] == [{"partition": 0, "start": 20, "end": 30}]
    assert (t["status"], t["mode"], t["events_read"], t["inserted"]) == ("committed", "backfill", 10, 10)
    spark.catalog.refreshTable(f"lake.{target}")
    assert {r.id: r.name for r in spark.table(f"lake.{target}").collect()} == {i: f"b{i}" for i in range(21, 31)}

def test_timestamp_flags_reject_epoch_seconds(tmp_path, broker, warehouse):
    """Epoch digits are milliseconds everywhere; a 10-digit number (seconds) is refused instead of meaning 1970."""
    config = write_config(tmp_path, broker.bootstrap, warehouse, "no.such.topic", "x.y")
    res = run_cli(config, args=("--mode", "backfill", "--start-timestamp", "1714564800"))
    assert res.returncode == 2
    assert "--start-timestamp" in res.stderr.strip().splitlines()[-1] and "milliseconds" in res.stderr
