"""One broken pipeline file never affects another pipeline's DAG: a DAG folder with one good and several broken
YAMLs, parsed by Airflow's DagBag, holds every DAG of the good pipeline and one DAG per broken file, scheduled,
whose one task fails with the file, the key and the fix and fires the configured failure alert."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.airflow_env import REPO

pytestmark = pytest.mark.airflow

GOOD = """
pipeline: {name}
format: json
schedule: "*/5 * * * *"
kafka: {{bootstrap.servers: "127.0.0.1:1"}}
catalog: {{name: lake, type: hadoop, warehouse: ./wh}}
tables:
  - {{topic: dbserver1.public.customers, target: inventory.customers, primary_key: [id]{extra}}}
airflow:
  on_failure: tests.dags.alerts_sink:record
"""
BROKEN = {  # file → (DAG id, schedule expression, what the error names)
    "wrongtype.yaml": (GOOD.format(name="wrongtype", extra=", ordering: 5"), "cdc_wrongtype", "*/5 * * * *",
                       ["wrongtype.yaml", "key 'tables[0].ordering'", "must be auto or a list of field paths"]),
    "unknownkey.yaml": (GOOD.format(name="unknownkey", extra="") + "batchh: {chunk_size: 5}\n", "cdc_unknownkey",
                        "*/5 * * * *", ["unknownkey.yaml", "key 'batchh'", "unknown key (allowed: airflow, batch"]),
    "badcron.yaml": (GOOD.format(name="badcron", extra="").replace('"*/5 * * * *"', '"every hour"'), "cdc_badcron",
                     "0 * * * *", ["badcron.yaml", "key 'schedule'", "'every hour' is not a valid schedule",
                                   "a preset such as @hourly"]),
    "syntax.yaml": ("pipeline: [unclosed\n", "cdc_syntax", "0 * * * *", ["syntax.yaml", "not valid YAML", "line 1"]),
    "notamap.yaml": ("- a\n- b\n", "cdc_notamap", "0 * * * *", ["notamap.yaml", "must hold a YAML mapping"]),
}


@pytest.fixture()
def bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path / "pipelines"
    folder.mkdir()
    (folder / "good.yaml").write_text(GOOD.format(name="good", extra=""))
    for name, (text, *_rest) in BROKEN.items():
        (folder / name).write_text(text)
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(folder))
    monkeypatch.setenv("CDC_TEST_ALERTS", str(tmp_path / "alerts.jsonl"))
    monkeypatch.setenv("CDC_RETRIES", "0")
    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag


def test_good_pipeline_keeps_all_its_dags_and_each_broken_file_gets_one(bag: Any) -> None:
    ids = set(bag.dags)
    assert {"cdc_good", "cdc_good_maintenance"} <= ids
    assert ids - {"cdc_good", "cdc_good_maintenance", "cdc_demo_downstream"} == {b[1] for b in BROKEN.values()}
    assert set(bag.dags["cdc_good"].task_dict) == {"plan", "ingest", "publish"}
    for name, (_text, dag_id, expression, needles) in BROKEN.items():
        dag = bag.dags[dag_id]
        assert dag.timetable.expression == expression, name  # scheduled: it fails visibly every interval
        assert set(dag.task_dict) == {"config_error"} and "config-error" in dag.tags
        for needle in [*needles, "-- Fix: change"]:
            assert needle in dag.doc_md, (name, needle)


def test_a_broken_file_fails_its_run_and_fires_the_alert(bag: Any, caplog: pytest.LogCaptureFixture) -> None:
    from tests.dags.alerts_sink import recorded

    for name in ("wrongtype.yaml", "badcron.yaml", "syntax.yaml"):
        dr = bag.dags[BROKEN[name][1]].test()
        assert dr.state == "failed", name
        [ti] = dr.get_task_instances()
        assert (ti.task_id, ti.state, ti.try_number) == ("config_error", "failed", 1)  # no retries
    alerts = {a["dag_id"]: a for a in recorded()}
    assert set(alerts) == {"cdc_wrongtype", "cdc_badcron"}  # syntax.yaml: no readable airflow section
    for dag_id, alert in alerts.items():
        needles = next(b[3] for b in BROKEN.values() if b[1] == dag_id)
        assert (alert["kind"], alert["error_class"], alert["task_id"]) == ("terminal", "ConfigError", "config_error")
        assert alert["pipeline"] == dag_id.removeprefix("cdc_")
        for needle in needles[:2]:
            assert needle in alert["message"], (dag_id, needle)


def test_without_a_readable_airflow_section_the_callback_still_logs(bag: Any,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    from tests.dags.alerts_sink import recorded

    with caplog.at_level(logging.ERROR, logger="cdc_airflow.monitor.alerts"):
        dr = bag.dags["cdc_notamap"].test()
    assert dr.state == "failed" and recorded() == []
    logged = [r.getMessage() for r in caplog.records if r.name == "cdc_airflow.monitor.alerts"]
    assert any("CDC terminal: cdc_notamap config_error" in m and "[ConfigError]" in m and "notamap.yaml" in m
               for m in logged), logged


def test_any_loader_exception_is_caught_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only ConfigError: whatever the loader raises for one file, the other files load."""
    import cdc.config.load
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings

    (tmp_path / "a.yaml").write_text(GOOD.format(name="a", extra=""))
    (tmp_path / "b.yaml").write_text(GOOD.format(name="b", extra=""))
    real = cdc.config.load.load_config

    def flaky(path: Any, env: Any = None) -> Any:
        if Path(path).name == "a.yaml":
            raise RuntimeError("boom")
        return real(path, env)

    monkeypatch.setattr(cdc.config.load, "load_config", flaky)
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path))
    a, b = load_pipelines(load_settings())
    assert a.config is None and a.error_class == "RuntimeError" and "a.yaml" in a.error and "boom" in a.error
    assert a.salvaged is not None and a.salvaged.pipeline == "a" and a.salvaged.on_failure == \
        "tests.dags.alerts_sink:record"
    assert b.config is not None and b.config.pipeline == "b"


def test_a_dag_that_fails_to_build_becomes_the_placeholder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cdc_airflow.dags.pipelines as pipelines
    from cdc_airflow.config.settings import load_settings

    (tmp_path / "a.yaml").write_text(GOOD.format(name="a", extra=""))
    (tmp_path / "b.yaml").write_text(GOOD.format(name="b", extra=""))
    real = pipelines.build_ingest_dag

    def flaky(settings: Any, cfg: Any) -> Any:
        if cfg.pipeline == "a":
            raise ValueError("cannot build")
        return real(settings, cfg)

    monkeypatch.setattr(pipelines, "build_ingest_dag", flaky)
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path))
    dags = pipelines.pipeline_dags(load_settings())
    assert set(dags) == {"cdc_a", "cdc_b"}
    assert set(dags["cdc_a"].task_dict) == {"config_error"} and "cannot build" in dags["cdc_a"].doc_md
    assert set(dags["cdc_b"].task_dict) == {"plan", "ingest", "publish"}


def test_dag_ids_of_broken_files_never_collide() -> None:
    from cdc_airflow.config.pipelines import PipelineFile
    from cdc_airflow.config.salvage import Salvaged
    from cdc_airflow.dags.pipelines import broken_dag_id

    pf = PipelineFile(Path("/x/copy of good.yaml"), None, "e", "ConfigError", Salvaged("good", "@hourly"))
    assert broken_dag_id(pf, set()) == "cdc_good"
    assert broken_dag_id(pf, {"cdc_good"}) == "cdc_copy_of_good"
    assert broken_dag_id(pf, {"cdc_good", "cdc_copy_of_good"}) == "cdc_copy_of_good_2"
