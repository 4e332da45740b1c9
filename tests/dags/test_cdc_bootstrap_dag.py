"""cdc_<pipeline>_bootstrap: only for pipelines with a bootstrap table, manual, params tables/replace, one
spark-submit of jobs/bootstrap.py; the DAG files still parse without errors or heavy imports."""

from __future__ import annotations

from pathlib import Path

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
    from cdc.config import load_config
    from cdc_airflow.bootstrap_dag import bootstrap_args, build_bootstrap_dag
    from cdc_airflow.settings import load_settings

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
