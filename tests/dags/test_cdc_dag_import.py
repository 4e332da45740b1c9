"""The DAG files parse fast, without import errors, and without pulling Spark, Kafka or pyiceberg."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PARSE = """
import json, sys, time
from airflow.dag_processing.dagbag import DagBag
t = time.monotonic()
bag = DagBag(sys.argv[1])
total = time.monotonic() - t
print(json.dumps({
    "errors": {k: str(v) for k, v in bag.import_errors.items()},
    "dags": sorted(bag.dags),
    "files": {s.file: s.duration.total_seconds() for s in bag.dagbag_stats},
    "total": total,
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "confluent_kafka", "pyiceberg")),
}))
"""


def parse_dags(pipelines_dir: Path) -> dict:
    env = {**os.environ, "CDC_PIPELINES_DIR": str(pipelines_dir)}
    out = subprocess.run([sys.executable, "-c", PARSE, str(REPO / "dags")], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_repo_pipelines_parse_fast_and_light() -> None:
    result = parse_dags(REPO / "pipelines")
    assert result["errors"] == {}
    assert {"cdc_demo", "cdc_demo_maintenance"} <= set(result["dags"])
    assert "cdc_docker_inventory" not in result["dags"]  # the compose stack's pipeline lives in docker/pipelines
    assert all(seconds < 1.0 for seconds in result["files"].values()), result["files"]
    assert result["heavy"] == []


def test_broken_yaml_becomes_a_failing_placeholder_dag(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("pipeline: broken\ntables: []\n")
    (tmp_path / "ok.yml").write_text((REPO / "pipelines" / "demo.yaml").read_text().replace("pipeline: demo",
                                                                                           "pipeline: ok"))
    result = parse_dags(tmp_path)
    assert result["errors"] == {}
    assert result["dags"] == ["cdc_broken", "cdc_ok", "cdc_ok_maintenance"]


@pytest.fixture(scope="module")
def dags() -> dict:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags


def test_ingest_dag_shape(dags: dict) -> None:
    dag = dags["cdc_demo"]
    assert dag.timetable.expression == "*/10 * * * *"
    assert dag.catchup is False and dag.max_active_runs == 1
    assert set(dag.task_dict) == {"plan", "ingest", "publish"}
    ingest = dag.task_dict["ingest"]
    assert ingest.upstream_task_ids == {"plan"} and ingest.downstream_task_ids == {"publish"}
    assert ingest.partial_kwargs["pool"] == "cdc_spark"
    assert ingest.partial_kwargs["map_index_template"] == "{{ task.table }}"
    assert ingest.partial_kwargs["retries"] >= 1 and ingest.partial_kwargs["retry_exponential_backoff"]
    assert dag.task_dict["publish"].trigger_rule == "none_skipped"
    assert set(dag.params.keys()) == {"mode", "tables", "max_records_per_partition", "start_offsets",
                                      "end_offsets", "start_timestamp", "end_timestamp"}
    assert all(dag.params.get_param(k).description for k in dag.params.keys())


def test_maintenance_dag_shape(dags: dict) -> None:
    dag = dags["cdc_demo_maintenance"]
    assert dag.catchup is False and dag.max_active_runs == 1
    assert set(dag.task_dict) == {"arguments", "maintain"}
    assert dag.task_dict["maintain"].pool == "cdc_spark"
    assert dag.task_dict["maintain"].application.endswith("jobs/maintenance.py")


@pytest.mark.parametrize("schedule, length", [("*/10 * * * *", 600), ("@hourly", 3600)])
def test_ingest_schedule_runs_have_real_data_intervals(schedule: str, length: int) -> None:
    """Regression: Airflow 3 makes a cron string a CronTriggerTimetable (zero-length data intervals), which made every
    ``airflow backfill create`` run fail planning with "end_timestamp must be after start_timestamp"."""
    import pendulum
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.base import TimeRestriction

    from cdc_airflow.dags.ingest import ingest_timetable
    from cdc_airflow.runs.params import backfill_interval_params

    timetable = coerce_to_core_timetable(ingest_timetable(schedule))
    start = pendulum.datetime(2024, 5, 1, 8, tz="UTC")
    info = timetable.next_dagrun_info(last_automated_data_interval=None,
                                      restriction=TimeRestriction(earliest=start, latest=None, catchup=True))
    interval = info.data_interval
    assert (interval.end - interval.start).total_seconds() == length
    params = backfill_interval_params({"mode": "incremental"}, "backfill", interval.start, interval.end)
    assert params["start_timestamp"] < params["end_timestamp"]
    assert ingest_timetable(None) is None
