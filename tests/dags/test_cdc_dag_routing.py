"""``dag.test`` runs of a pipeline with a ``topic_pattern`` entry: the plan task resolves the pattern against the
real local broker at run time, so the mapped ingest tasks (fake spark-submit, recording its argv) cover one table
per matching topic, a topic created since the previous run included, and the explicit entry's topic stays its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.events import pg, produce
from tests.plugins import fake_spark

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

DEFAULTS = {"mode": "incremental", "tables": [], "max_records_per_partition": None, "start_offsets": None,
            "end_offsets": None, "start_timestamp": None, "end_timestamp": None}


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, broker: Any) -> dict[str, Any]:
    fake_spark.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", fake_spark.prepend_path(tmp_path / "bin"))
    monkeypatch.setenv("FAKE_SPARK_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    prefix = unique("dagrt")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "dagrt.yaml").write_text(f"""
pipeline: dagrt
schedule: null
format: json
kafka: {{bootstrap.servers: "{broker.bootstrap}"}}
catalog: {{name: lake, type: hadoop, warehouse: "{tmp_path / 'wh'}"}}
defaults: {{primary_key: [id]}}
tables:
  - {{topic_pattern: '{prefix}\\.public\\.(.*)', target: 'routed.$1'}}
  - {{topic: '{prefix}.public.legacy', target: routed.explicit_legacy}}
airflow:
  freshness_minutes: {{routed.customers: 60}}
""")
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "p"))
    return {"log": tmp_path / "calls.jsonl", "prefix": prefix, "broker": broker}


def add_topic(env: dict[str, Any], name: str) -> None:
    topic = f"{env['prefix']}.public.{name}"
    env["broker"].create_topic(topic)
    produce(env["broker"].bootstrap, topic, [pg("c", 1, {"id": 1, "name": name, "bio": None}, 1)])


def run(conf: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag

    settings = load_settings()
    [p] = load_pipelines(settings)
    assert p.error is None, p.error
    dag = build_ingest_dag(settings, p.config)  # a fresh DAG per run (dag.test keeps the run conf in its params)
    dr = dag.test(run_conf={**DEFAULTS, **conf})
    return dr, {(ti.task_id, ti.rendered_map_index or ""): ti for ti in dr.get_task_instances()}


def tables_called(log: Path) -> set[str]:
    argvs = [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []
    out = {a[a.index("--table") + 1] for a in argvs}
    log.unlink(missing_ok=True)
    return out


def test_plan_maps_one_ingest_task_per_resolved_table(env: dict[str, Any]) -> None:
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.ingest import build_ingest_dag

    for name in ("customers", "orders", "legacy"):
        add_topic(env, name)
    [p] = load_pipelines(load_settings())  # parse time: no broker, no resolved names; params take any name
    assert p.config.has_patterns
    spec = build_ingest_dag(load_settings(), p.config).params.get_param("tables").schema
    assert spec["items"] == {"type": "string"}

    dr, tis = run({})
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    ingest = {k[1] for k in tis if k[0] == "ingest"}
    assert ingest == {"routed.customers", "routed.orders", "routed.explicit_legacy"}
    assert tables_called(env["log"]) == ingest
    assert sorted(t["table"] for t in tis[("plan", "")].xcom_pull(task_ids="plan")) == sorted(ingest)
    from tests.airflow_env import asset_events  # the fake job commits changes: one event per table, routed too

    assert sorted(name for name, _, _ in asset_events(dr.run_id)) == sorted(ingest)

    add_topic(env, "order-items")  # created since the last run
    dr, tis = run({})
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    assert {k[1] for k in tis if k[0] == "ingest"} == ingest | {"routed.order_items"}
    assert tables_called(env["log"]) == ingest | {"routed.order_items"}

    dr, tis = run({"tables": ["routed.order_items"]})  # a resolved name as the tables param
    assert dr.state == "success", {k: ti.state for k, ti in tis.items()}
    assert {k[1] for k in tis if k[0] == "ingest"} == {"routed.order_items"}
    assert tables_called(env["log"]) == {"routed.order_items"}


def test_unknown_table_param_fails_the_plan(env: dict[str, Any]) -> None:
    add_topic(env, "customers")
    dr, tis = run({"tables": ["routed.nope"]})
    assert dr.state == "failed"
    assert tis[("plan", "")].state == "failed" and not [k for k in tis if k[0] == "ingest" and k[1]]
    assert not env["log"].exists()


def test_pattern_pipeline_parses_fast_without_a_broker(tmp_path: Path) -> None:
    """Resolution happens in tasks at run time: the DAG files parse with the broker unreachable, light and fast,
    and the maintenance DAG's tables param takes resolved names too."""
    from tests.dags.test_cdc_dag_import import parse_dags

    (tmp_path / "routed.yaml").write_text("""
pipeline: routed
format: json
kafka: {bootstrap.servers: "127.0.0.1:1"}
catalog: {name: lake, type: hadoop, warehouse: ./wh}
tables:
  - {topic_pattern: 'dbserver1\\.public\\.(.*)', target: 'inventory.$1'}
""")
    result = parse_dags(tmp_path)
    assert result["errors"] == {} and result["dags"] == ["cdc_routed", "cdc_routed_maintenance"]
    assert all(seconds < 1.0 for seconds in result["files"].values()), result["files"]
    assert result["heavy"] == []

    from cdc.config.load import load_config
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.dags.maintenance import build_maintenance_dag

    dag = build_maintenance_dag(load_settings(), load_config(tmp_path / "routed.yaml"))
    assert dag.params.get_param("tables").schema["items"] == {"type": "string"}


def test_ambiguous_topics_are_failed_tables_and_the_others_are_ingested(env: dict[str, Any]) -> None:
    """Two topics resolving to one target (``Orders`` and ``orders`` → ``routed.orders``): the plan task plans the
    other tables, the publish task reports the pair as failed tables (the DAG run fails), nothing runs for them."""
    for name in ("customers", "legacy", "Orders", "orders"):
        add_topic(env, name)
    dr, tis = run({})
    assert dr.state == "failed", {k: ti.state for k, ti in tis.items()}
    assert tis[("plan", "")].state == "success" and tis[("publish", "")].state == "failed"
    ingest = {k[1] for k in tis if k[0] == "ingest" and k[1]}
    assert ingest == {"routed.customers", "routed.explicit_legacy"}
    assert all(tis[("ingest", name)].state == "success" for name in ingest)
    assert tables_called(env["log"]) == ingest
    unplanned = tis[("plan", "")].xcom_pull(task_ids="plan", key="unplanned")
    prefix = env["prefix"]
    assert sorted((u["table"], u["topic"], u["status"], u["exit_code"]) for u in unplanned) == [
        ("routed.orders", f"{prefix}.public.Orders", "failed", 2),
        ("routed.orders", f"{prefix}.public.orders", "failed", 2)]
    assert all(f"{prefix}.public.Orders and {prefix}.public.orders both resolve to table" in u["error"]
               for u in unplanned)

    dr, tis = run({"tables": ["routed.orders"]})  # only the ambiguous table: the plan fails with its error
    assert dr.state == "failed" and tis[("plan", "")].state == "failed"
    assert not [k for k in tis if k[0] == "ingest" and k[1]] and not env["log"].exists()
