"""``dag.test`` of the ingestion DAG on a jdbc catalog (real PostgreSQL): ``plan`` reads the ledger through
pyiceberg's SQL catalog, ``ingest`` is the real ``SparkSubmitOperator`` running ``spark-submit jobs/ingest.py`` with
the PostgreSQL JDBC driver beside the Iceberg runtime (``--jars`` files or ``--packages``, ``cdc_airflow.operators.spark_submit.job_jars``),
and the table is read back through pyiceberg. The password reaches the job only through ``${ENV}``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.integration import events
from tests.integration.events import pg

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

PASSWORD = "Dag-Jdbc-S3cret-77aa"
DEFAULTS = {"mode": "incremental", "tables": [], "max_records_per_partition": None, "start_offsets": None,
            "end_offsets": None, "start_timestamp": None, "end_timestamp": None}


def test_dag_run_on_a_jdbc_catalog(broker: Any, postgres: Any, tmp_path: Any, airflow_db: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    topic = unique("dbserver1.public.dagjdbc_")
    broker.create_topic(topic, partitions=1)
    events.produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, 10 + i)
                                             for i in range(8)] + [pg("d", 3, {"id": 3, "name": "n3", "bio": None}, 50)])
    uri = postgres.create_database(unique("dagcat_"))
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "dagjdbc.yaml").write_text(f"""
pipeline: dagjdbc
schedule: null
format: json
kafka: {{bootstrap.servers: "{broker.bootstrap}"}}
catalog:
  name: lake
  type: jdbc
  warehouse: "{tmp_path / 'warehouse'}"
  uri: "{uri}"
  properties: {{jdbc.user: postgres, jdbc.password: "${{CDC_TEST_DAG_PG_PASSWORD}}"}}
metadata_namespace: cdc_meta
spark: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2", spark.driver.memory: 1g}}
batch: {{read_timeout_seconds: 30}}
tables:
  - {{topic: {topic}, target: shop.customers}}
""")
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "pipelines"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    monkeypatch.setenv("CDC_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("CDC_TEST_DAG_PG_PASSWORD", PASSWORD)
    from structlog.testing import capture_logs

    from cdc.config.names import ledger_identifier
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag
    from cdc_airflow.monitor.ledger import load_table, read_rows

    settings = load_settings()
    [p] = load_pipelines(settings)
    cfg = p.config
    with capture_logs() as logs:
        dr = build_ingest_dag(settings, cfg).test(run_conf=DEFAULTS)
    states = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr.get_task_instances()}
    log = "\n".join(str(e.get("event")) for e in logs)
    assert dr.state == "success", (states, log[-4000:])
    assert states == {("plan", ""): "success", ("ingest", "shop.customers"): "success", ("publish", ""): "success"}
    assert "postgresql.jar" in log or "postgresql-" in log, "the driver was not on spark-submit's --jars"
    assert PASSWORD not in log

    table = load_table(cfg.catalog, "shop.customers")
    assert table is not None
    rows = {r["id"]: r["name"] for r in table.scan(selected_fields=("id", "name")).to_arrow().to_pylist()}
    assert rows == {i: f"n{i}" for i in range(8) if i != 3}
    ledger = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    assert [(r["batch_id"], r["status"], r["start_offset"], r["end_offset"]) for r in ledger] == [
        (1, "committed", 0, 9)]
    assert ledger[0]["target_snapshot_id"] == table.current_snapshot().snapshot_id

    # a second run: plan (pyiceberg on the jdbc catalog) sees no lag and skips Spark
    dr2 = build_ingest_dag(settings, cfg).test(run_conf=DEFAULTS)  # plan skips only after reading the ledger
    states2 = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr2.get_task_instances()}
    assert dr2.state == "success" and states2 == {("plan", ""): "skipped", ("ingest", ""): "skipped",
                                                  ("publish", ""): "skipped"}, states2
