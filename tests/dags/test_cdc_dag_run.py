"""``dag.test`` runs of the ingestion DAG with a fake spark-submit (the real job is exercised by the lead's
integration tests): planning by lag, mapped ingest per table, exit-code handling, published summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.plugins import fake_spark

pytestmark = pytest.mark.airflow

YAML = """
pipeline: dagtest
format: json
kafka: {bootstrap.servers: "127.0.0.1:1"}
catalog: {name: lake, type: hadoop, warehouse: ./wh}
tables:
  - {topic: dbserver1.public.customers, target: inventory.customers, primary_key: [id]}
  - {topic: dbserver1.public.orders, target: inventory.orders, primary_key: [id]}
airflow:
  task_timeout_minutes: 7
  on_failure: tests.dags.alerts_sink:record
  freshness_minutes: {inventory.orders: 5}
"""


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str) -> dict[str, Any]:
    fake_spark.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", fake_spark.prepend_path(tmp_path / "bin"))
    monkeypatch.setenv("FAKE_SPARK_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "dagtest.yaml").write_text(YAML)
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "p"))
    monkeypatch.setenv("CDC_TEST_ALERTS", str(tmp_path / "alerts.jsonl"))
    watermarks = {"dbserver1.public.customers": {0: 0}, "dbserver1.public.orders": {0: 7, 1: 0}}
    import cdc.kafka.offsets  # the real module, one function replaced (its other names stay importable)

    monkeypatch.setattr(cdc.kafka.offsets, "high_watermarks", lambda conf, topic, timeout=10: watermarks[topic])
    return {"log": tmp_path / "calls.jsonl", "watermarks": watermarks}


def run(conf: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag

    settings = load_settings()
    [p] = load_pipelines(settings)
    dag = build_ingest_dag(settings, p.config)
    dr = dag.test(run_conf=conf)
    tis = {(ti.task_id, ti.map_index): ti for ti in dr.get_task_instances()}
    return dr, tis


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []


def test_incremental_runs_only_tables_with_lag(env: dict[str, Any]) -> None:
    dr, tis = run({})
    assert dr.state == "success"
    assert tis[("ingest", 0)].state == "success" and ("ingest", 1) not in tis
    assert tis[("ingest", 0)].rendered_map_index == "inventory.orders"
    [argv] = calls(env["log"])
    assert argv[argv.index("--table") + 1] == "inventory.orders"
    assert tis[("publish", -1)].state == "success"


def test_no_lag_skips_everything(env: dict[str, Any]) -> None:
    env["watermarks"]["dbserver1.public.orders"] = {0: 0}
    dr, tis = run({})
    assert dr.state == "success"
    assert tis[("plan", -1)].state == "skipped" and calls(env["log"]) == []
    assert tis[("publish", -1)].state == "skipped"


def test_backfill_runs_all_selected_with_offsets(env: dict[str, Any]) -> None:
    dr, tis = run({"mode": "backfill", "end_offsets": {"dbserver1.public.customers": {"0": 3}}})
    assert dr.state == "success"
    argvs = sorted(calls(env["log"]), key=lambda a: a[a.index("--table") + 1])
    assert [a[a.index("--table") + 1] for a in argvs] == ["inventory.customers", "inventory.orders"]
    assert json.loads(argvs[0][argvs[0].index("--end-offsets") + 1]) == {"dbserver1.public.customers": {"0": 3}}
    assert "--end-offsets" not in argvs[1]
    assert {ti.rendered_map_index for (t, _), ti in tis.items() if t == "ingest"} == {"inventory.customers",
                                                                                     "inventory.orders"}


def test_terminal_failure_fails_run_and_publish_reports(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inventory.orders": 2}')
    dr, tis = run({"mode": "backfill"})
    assert dr.state == "failed"
    states = {tis[k].rendered_map_index: tis[k].state for k in tis if k[0] == "ingest"}
    assert states == {"inventory.customers": "success", "inventory.orders": "failed"}
    assert tis[("publish", -1)].state == "failed"  # ran (none_skipped), reported, then failed for the missing table


def test_invalid_cross_field_params_fail_in_plan(env: dict[str, Any]) -> None:
    dr, tis = run({"start_timestamp": "2024-05-02", "end_timestamp": "2024-05-01"})
    assert dr.state == "failed" and tis[("plan", -1)].state == "failed" and calls(env["log"]) == []
    assert tis[("publish", -1)].state == "failed"


def test_timestamp_params_reach_the_job_as_epoch_milliseconds(env: dict[str, Any]) -> None:
    dr, tis = run({"mode": "backfill", "tables": ["inventory.orders"], "start_timestamp": "2024-05-01T12:00:00Z",
                   "end_timestamp": "1714568400000"})
    assert dr.state == "success"
    [argv] = calls(env["log"])
    assert argv[argv.index("--start-timestamp") + 1] == "1714564800000"
    assert argv[argv.index("--end-timestamp") + 1] == "1714568400000"
    assert "--start-offsets" not in argv and argv[argv.index("--mode") + 1] == "backfill"


def test_failures_call_the_configured_callback_terminal_vs_retries_exhausted(
        env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.dags.alerts_sink import recorded

    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inventory.orders": 2, "inventory.customers": 75}')
    dr, tis = run({"mode": "backfill"})
    assert dr.state == "failed"
    alerts = {(a["task_id"], a["table"]): a for a in recorded() if a["kind"] != "stale"}
    assert set(alerts) == {("ingest", "inventory.orders"), ("ingest", "inventory.customers"), ("publish", None)}
    orders, customers = alerts[("ingest", "inventory.orders")], alerts[("ingest", "inventory.customers")]
    assert (orders["kind"], orders["error_class"], orders["pipeline"]) == ("terminal", "ConfigError", "dagtest")
    assert "simulated failure with exit 2" in orders["message"] and "\n" not in orders["message"]
    assert (customers["kind"], customers["error_class"]) == ("retries_exhausted", "KafkaUnavailable")
    assert "/tasks/ingest/mapped/" in orders["log_url"] and orders["log_url"].endswith("?try_number=1")
    assert "/dags/cdc_dagtest/runs/" in orders["log_url"]


def test_timeouts_and_callbacks_are_wired(env: dict[str, Any]) -> None:
    from datetime import timedelta

    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag
    from cdc_airflow.dags.maintenance import build_maintenance_dag

    settings = load_settings()
    [p] = load_pipelines(settings)
    ingest = build_ingest_dag(settings, p.config).task_dict["ingest"]
    assert ingest.partial_kwargs["execution_timeout"] == timedelta(minutes=7)
    maintain = build_maintenance_dag(settings, p.config).task_dict["maintain"]
    assert maintain.execution_timeout == timedelta(minutes=180)
    assert "CdcFailureCallback" in repr(maintain.on_failure_callback)


def test_asset_events_only_for_changed_tables_freshness_and_downstream_queued(
        env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """orders commits changes → one asset event with the batch's extras, the downstream DAG is queued; customers
    commits a batch that changed nothing → no event. orders still has lag and nothing committed: stale."""
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from tests.dags.alerts_sink import recorded

    monkeypatch.setenv("FAKE_SPARK_EMPTY", '["inventory.customers"]')
    monkeypatch.setenv("CDC_DOWNSTREAM_PIPELINE", "dagtest")
    sync_and_unpause("cdc_dagtest_downstream")
    dr, tis = run({"mode": "backfill"})
    assert dr.state == "success"
    with create_session() as session:
        events = session.execute(select(AssetModel.name, AssetModel.uri, AssetEvent.extra).join(
            AssetEvent, AssetEvent.asset_id == AssetModel.id).where(AssetEvent.source_run_id == dr.run_id)).all()
        queued = session.execute(select(AssetModel.name).join(
            AssetDagRunQueue, AssetDagRunQueue.asset_id == AssetModel.id).where(
            AssetDagRunQueue.target_dag_id == "cdc_dagtest_downstream")).scalars().all()
    assert [(n, u) for n, u, _ in events] == [("inventory.orders", "iceberg://lake/inventory/orders")]
    assert events[0][2] == {"pipeline": "dagtest", "table": "inventory.orders", "mode": "backfill",
                            "batch_id": 1, "snapshot_id": 42, "inserted": 3, "updated": 1, "deleted": 1,
                            "events_read": 5, "offsets": {"t": {"0": 5}}}
    assert queued == ["inventory.orders"]
    report = tis[("publish", -1)].xcom_pull(task_ids="publish")
    assert [s["table"] for s in report["stale"]] == ["inventory.orders"]
    [alert] = recorded()
    assert (alert["kind"], alert["table"], alert["task_id"]) == ("stale", "inventory.orders", "publish")
    assert "nothing committed yet" in alert["message"] and "7 newer event(s)" in alert["message"]


def sync_and_unpause(dag_id: str) -> None:
    """Write the DAG files' DAGs to the metadata DB (as dag.test does) and unpause ``dag_id``."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        bundle.initialize()
        sync_bag_to_db(BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name),
                       bundle.name, bundle.version)
    with create_session() as session:
        model = session.get(DagModel, dag_id)
        assert model is not None, f"{dag_id} was not parsed"
        model.is_paused = False
