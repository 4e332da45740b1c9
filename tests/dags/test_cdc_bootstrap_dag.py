"""cdc_<pipeline>_bootstrap: only for pipelines with a bootstrap table, manual, params tables/replace, one
spark-submit of jobs/bootstrap.py; the DAG files still parse without errors or heavy imports; and a real run of it
against PostgreSQL, followed by the ingestion DAG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dags.test_cdc_dag_import import REPO, parse_dags


def pipeline_with_bootstrap(tmp_path: Path) -> Path:
    raw = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    raw["pipeline"] = "boot"
    raw["tables"][0]["bootstrap"] = {"jdbc_url": "jdbc:postgresql://db:5432/inventory", "user": "app",
                                     "password": "${BOOT_TEST_PASSWORD:-}", "source_table": "public.customers"}
    path = tmp_path / "boot.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_bootstrap_dag_only_for_pipelines_with_bootstrap_tables(tmp_path: Path) -> None:
    pipeline_with_bootstrap(tmp_path)
    (tmp_path / "plain.yaml").write_text((REPO / "pipelines" / "demo.yaml").read_text().replace("pipeline: demo",
                                                                                                "pipeline: plain"))
    result = parse_dags(tmp_path)
    assert result["errors"] == {}
    assert result["dags"] == ["cdc_boot", "cdc_boot_bootstrap", "cdc_boot_maintenance", "cdc_plain",
                              "cdc_plain_maintenance"]
    assert result["heavy"] == []


def test_bootstrap_dag_shape_and_arguments(tmp_path: Path) -> None:
    from cdc.config.load import load_config
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.bootstrap import build_bootstrap_dag
    from cdc_airflow.runs.commands import bootstrap_args

    cfg = load_config(pipeline_with_bootstrap(tmp_path))
    dag = build_bootstrap_dag(load_settings(), cfg)
    target = cfg.tables[0].target
    assert dag.dag_id == "cdc_boot_bootstrap" and type(dag.timetable).__name__ == "NullTimetable"  # manual only
    assert dag.max_active_runs == 1 and set(dag.task_dict) == {"arguments", "bootstrap"}
    op = dag.task_dict["bootstrap"]
    assert op.application.endswith("jobs/bootstrap.py") and op.pool == "cdc_spark"
    assert set(dag.params.keys()) == {"tables", "replace"}
    assert dag.params.get_param("tables").schema["items"]["enum"] == [target]
    assert bootstrap_args("/p.yaml", {"tables": [target], "replace": True}) == [
        "--config", "/p.yaml", "--table", target, "--replace"]
    assert bootstrap_args("/p.yaml", {"tables": [], "replace": False}) == ["--config", "/p.yaml"]
    plain = load_config(REPO / "pipelines" / "demo.yaml")
    assert build_bootstrap_dag(load_settings(), plain) is None


PASSWORD = "Dag-Boot-S3cret-41"
INGEST_DEFAULTS = {"mode": "incremental", "tables": [], "max_records_per_partition": None, "start_offsets": None,
                   "end_offsets": None, "start_timestamp": None, "end_timestamp": None}


@pytest.mark.integration
@pytest.mark.airflow
def test_bootstrap_dag_loads_the_source_then_the_ingest_dag_continues_from_kafka(
        broker: Any, postgres: Any, tmp_path: Path, airflow_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dag.test`` of ``cdc_<pipeline>_bootstrap`` with the real ``SparkSubmitOperator`` (spark-submit
    jobs/bootstrap.py, the PostgreSQL driver on --jars) against the real server: the target equals the source table
    and the ledger holds the bootstrap horizon (the newest change the snapshot saw). Then ``cdc_<pipeline>`` reads
    the topic from offset 0: the changes before the bootstrap are skipped, the later ones applied."""
    from structlog.testing import capture_logs

    from cdc.config.names import ledger_identifier
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.bootstrap import build_bootstrap_dag
    from cdc_airflow.dags.ingest import build_ingest_dag
    from cdc_airflow.monitor.ledger import load_table, read_rows
    from tests.conftest import unique
    from tests.integration.bootstrap.history import history_before_bootstrap
    from tests.integration.bootstrap.test_bootstrap_postgres import Source, position, produce

    db = unique("dagboot_")
    postgres.create_database(db)
    topic = unique("dbserver1.public.customers_")
    broker.create_topic(topic, partitions=2)
    src = Source(postgres, db)
    before = history_before_bootstrap(src)
    produce(broker, topic, before)
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "dagboot.yaml").write_text(yaml.safe_dump({
        "pipeline": "dagboot", "schedule": None, "format": "json", "kafka": {"bootstrap.servers": broker.bootstrap},
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(tmp_path / "warehouse")},
        "metadata_namespace": "cdc_meta", "batch": {"read_timeout_seconds": 30},
        "spark": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "1g"},
        "tables": [{"topic": topic, "target": "shop.customers", "bootstrap": {
            "jdbc_url": postgres.jdbc_url_for(db), "user": "postgres", "password": "${CDC_TEST_DAG_BOOT_PASSWORD}",
            "source_table": "public.customers", "num_partitions": 2}}]}))
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "pipelines"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    monkeypatch.setenv("CDC_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("CDC_TEST_DAG_BOOT_PASSWORD", PASSWORD)
    settings = load_settings()
    [p] = load_pipelines(settings)
    cfg = p.config

    def rows() -> dict[int, tuple]:
        table = load_table(cfg.catalog, "shop.customers")
        assert table is not None, "shop.customers was not created"
        return {r["id"]: (r["name"], r["bio"]) for r in table.scan().to_arrow().to_pylist()}

    with capture_logs() as logs:
        dr = build_bootstrap_dag(settings, cfg).test(run_conf={"tables": ["shop.customers"], "replace": False})
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    log = "\n".join(str(e.get("event")) for e in logs)
    assert dr.state == "success", (states, log[-4000:])
    assert states == {"arguments": "success", "bootstrap": "success"}
    assert PASSWORD not in log
    assert rows() == src.rows()
    ledger = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    assert [(r["mode"], r["status"], r["partition"], json.loads(r["truncate_barrier"])) for r in ledger] == [
        ("bootstrap", "committed", -1, position(before[-1]))]

    after = src.tx(("u", 5, "n5-v3", "b5-v3"))
    after += src.tx(("c", 7, "n7-again", "b7-again"))  # deleted before the bootstrap, back after it
    after += src.tx(("d", 4))
    produce(broker, topic, after)
    dr = build_ingest_dag(settings, cfg).test(run_conf=INGEST_DEFAULTS)
    states = {(ti.task_id, ti.rendered_map_index or ""): ti.state for ti in dr.get_task_instances()}
    assert dr.state == "success", states
    assert states == {("plan", ""): "success", ("ingest", "shop.customers"): "success", ("publish", ""): "success"}
    assert rows() == src.rows()
    ledger = read_rows(cfg.catalog, ledger_identifier(cfg.metadata_namespace), pipeline=cfg.pipeline)
    incremental = [r for r in ledger if r["mode"] == "incremental"]
    assert {(r["partition"], r["start_offset"], r["status"]) for r in incremental} == {
        (0, 0, "committed"), (1, 0, "committed")}  # from offset 0: the changes before the bootstrap were read
    assert sum(r["events_read"] for r in incremental) == len(before) + len(after)  # and ignored (rows above)
