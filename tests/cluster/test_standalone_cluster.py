"""The job on a real Spark standalone cluster (master + 2 workers from the installed pyspark, loopback).

One topic of generated Debezium JSON events is ingested three times into three tables of one warehouse (a tmp dir
every worker reaches): in local mode with the session SparkSession (the reference), by ``spark-submit --master
spark://… --py-files <wheel> jobs/ingest.py``, and by the ingestion DAG's ``SparkSubmitOperator`` with
``spark_default`` pointing at the master. Executors run an interpreter that has the third-party dependencies but no
``cdc`` (``executor_python``), so they import it only from the shipped wheel. Both cluster tables must equal the
local one, reader tasks must have run on the cluster's executors, and the application must not pin the driver to
127.0.0.1 (issue 12: ``spark.driver.bindAddress=127.0.0.1`` was recorded for every spark-submit to a cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from tests.cluster import standalone
from tests.conftest import unique

pytestmark = [pytest.mark.integration]

PARTITIONS = 2


def pipeline(name: str, bootstrap: str, topic: str, warehouse: Path, ns: str,
             spark: dict[str, str] | None = None) -> dict[str, Any]:
    return {"pipeline": name, "schedule": None, "format": "json", "kafka": {"bootstrap.servers": bootstrap},
            "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
            "metadata_namespace": f"{ns}_meta", "spark": spark or {},
            # read in executor tasks even though the batch is small: the point is that executors import cdc
            # from the wheel (cdc.stage.driver_read would read it in the driver)
            "batch": {"read_timeout_seconds": 30, "driver_read_max_records": 0},
            "tables": [{"topic": topic, "target": f"{ns}.customers", "primary_key": ["id"]}]}


def cluster_spark_conf(executor_python: str, event_log: Path) -> dict[str, str]:
    """What the cluster runs need: the executors' interpreter, small executors, an event log to inspect."""
    event_log.mkdir(parents=True, exist_ok=True)
    return {"spark.pyspark.python": executor_python, "spark.executor.memory": "512m",
            "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(event_log)}


def table(spark: Any, ns: str) -> dict[Any, dict[str, Any]]:
    spark.catalog.clearCache()
    rows = spark.table(f"lake.{ns}.customers").collect()
    return {r["id"]: {k: v for k, v in r.asDict().items() if k != "__ingested_at"} for r in rows}


def ledger(spark: Any, ns: str) -> dict[int, tuple[Any, ...]]:
    rows = spark.sql(f"SELECT * FROM lake.{ns}_meta.ledger").collect()
    return {r["partition"]: (r["batch_id"], r["status"], r["start_offset"], r["end_offset"]) for r in rows}


def assert_ran_on_the_cluster(event_log: Path, master_url: str) -> None:
    [app] = standalone.app_properties(event_log)
    props = app["properties"]
    assert props["spark.master"] == master_url
    assert props.get("spark.driver.bindAddress") != "127.0.0.1", props.get("spark.driver.bindAddress")
    assert props.get("spark.driver.host") != "127.0.0.1"
    cluster_executors = {e for e in app["task_executors"] if e != "driver"}
    assert cluster_executors, app  # the reader tasks ran in executors the workers launched
    assert {app["executor_hosts"][e] for e in cluster_executors} == {"127.0.0.1"}
    # the executors' reader tasks counted the batch (cdc.stage.stats.TaskCounts): no query of the staged rows counted it
    assert not [d for d in app["executions"] if "cdc/stage.py" in d], app["executions"]
    assert any("overwritePartitions" in d for d in app["executions"]), app["executions"]  # (the log has them)


@pytest.fixture(scope="module")
def source(broker: Any, spark: Any, warehouse: Path) -> Iterator[dict[str, Any]]:
    """Snapshot + live changes on one 2-partition topic, ingested once in local mode (the reference)."""
    from cdc.config.load import parse_config
    from cdc.run.batch import run_batch
    from devtools.broker import create_topic
    from devtools.debezium import ChangeEventGenerator, GeneratorConfig, JsonSerializer, produce

    gen = ChangeEventGenerator(31, GeneratorConfig(table="customers", partitions=PARTITIONS, toast_fraction=0.3))
    topic = unique("dbserver1.public.customers_")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    records = gen.snapshot(8) + gen.random_ops(24)
    produce(broker.bootstrap, topic, records, JsonSerializer())
    produced = {p: sum(1 for r in records if r.partition == p) for p in range(PARTITIONS)}
    ns = unique("local")
    cfg = parse_config(pipeline("clusterref", broker.bootstrap, topic, warehouse, ns))
    [summary] = run_batch(spark, cfg, list(cfg.tables))["tables"]
    assert summary["status"] == "committed"
    reference = table(spark, ns)
    assert set(reference) == set(gen.expected_rows())
    yield {"topic": topic, "reference": reference, "produced": produced, "bootstrap": broker.bootstrap}


def test_spark_submit_to_standalone_cluster_with_the_wheel(
        source: dict[str, Any], spark: Any, warehouse: Path, spark_cluster: standalone.Cluster, cdc_wheel: Path,
        executor_python: str, tmp_path: Path) -> None:
    from cdc.spark import jars

    ns = unique("submit")
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump(pipeline("clustersubmit", source["bootstrap"], source["topic"], warehouse, ns)))
    event_log = tmp_path / "events"
    conf = cluster_spark_conf(executor_python, event_log)
    result_file = tmp_path / "result.json"
    cmd = [str(standalone.VENV_BIN / "spark-submit"), "--master", spark_cluster.master_url,
           "--py-files", str(cdc_wheel), "--packages", jars.ICEBERG_SPARK_RUNTIME,  # as users submit it
           *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
           str(standalone.REPO / "jobs" / "ingest.py"), "--config", str(config)]
    proc = subprocess.run(cmd, env=standalone.clean_env(CDC_RESULT_FILE=str(result_file)), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:] + spark_cluster.logs()
    [summary] = json.loads(proc.stdout.strip().splitlines()[-1])["tables"]
    assert (summary["status"], summary["events_read"]) == ("committed", sum(source["produced"].values()))
    assert json.loads(result_file.read_text())["exit_code"] == 0  # client mode: the driver is here

    assert table(spark, ns) == source["reference"]
    assert ledger(spark, ns) == {p: (1, "committed", 0, n) for p, n in source["produced"].items()}
    assert_ran_on_the_cluster(event_log, spark_cluster.master_url)


@pytest.mark.airflow
def test_dag_spark_submit_operator_on_standalone_cluster(
        source: dict[str, Any], spark: Any, warehouse: Path, spark_cluster: standalone.Cluster, cdc_wheel: Path,
        executor_python: str, tmp_path: Path, airflow_db: str) -> None:
    """The ingestion DAG as deployed: master from the ``spark_default`` connection, the wheel as CDC_PY_FILES, the
    job's result under the warehouse (CDC_RESULT_DIR, as cluster deploy mode needs; standalone runs Python drivers
    in client mode only, so the cluster-mode hand-over itself is not exercised here)."""
    ns = unique("dag")
    event_log = tmp_path / "events"
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "clusterdag.yaml").write_text(yaml.safe_dump(pipeline(
        "clusterdag", source["bootstrap"], source["topic"], warehouse, ns,
        cluster_spark_conf(executor_python, event_log))))
    results_dir = warehouse / "_cdc_results" / ns
    host, port = spark_cluster.master_url.rsplit(":", 1)
    env = standalone.clean_env(
        CDC_PIPELINES_DIR=str(tmp_path / "pipelines"), CDC_RETRIES="0", CDC_PY_FILES=str(cdc_wheel),
        CDC_RESULT_DIR=f"file://{results_dir}",  # what a cluster-deploy-mode driver would write to
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": host, "port": int(port)}))
    with pytest.MonkeyPatch.context() as mp:
        for k in [k for k in os.environ if k.startswith("CDC_") or k in ("PYTHONPATH", "SPARK_HOME")]:
            mp.delenv(k)
        for k, v in env.items():
            mp.setenv(k, v)
        from cdc_airflow.config.pipelines import load_pipelines
        from cdc_airflow.config.settings import load_settings
        from cdc_airflow.dags.ingest import build_ingest_dag

        settings = load_settings()
        assert settings.spark_master is None  # the connection decides
        [p] = load_pipelines(settings)
        dr = build_ingest_dag(settings, p.config).test(run_conf={"mode": "incremental"})
        tis = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr.get_task_instances()}
    assert dr.state == "success", tis
    assert tis[("ingest", f"{ns}.customers")] == "success"
    [result] = [json.loads(f.read_text()) for f in results_dir.rglob("*.json")]  # one task try, in the warehouse
    assert result["exit_code"] == 0 and result["summary"]["tables"][0]["status"] == "committed"
    assert table(spark, ns) == source["reference"]
    assert ledger(spark, ns) == {p: (1, "committed", 0, n) for p, n in source["produced"].items()}
    assert_ran_on_the_cluster(event_log, spark_cluster.master_url)
