"""``airflow.tables_per_task``: the planned tables in groups, one mapped spark-submit per group (``dag.test`` with the
fake spark-submit, which reports per table like the real job)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.dags.test_cdc_dag_run import calls, run
from tests.plugins import fake_spark

pytestmark = pytest.mark.airflow

YAML = """
pipeline: dagtest
format: json
kafka: {bootstrap.servers: "127.0.0.1:1"}
catalog: {name: lake, type: hadoop, warehouse: ./wh}
tables:
  - {topic: dbserver1.public.a, target: inv.a, primary_key: [id]}
  - {topic: dbserver1.public.b, target: inv.b, primary_key: [id]}
  - {topic: dbserver1.public.c, target: inv.c, primary_key: [id]}
airflow:
  tables_per_task: 2
  on_failure: tests.dags.alerts_sink:record
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
    watermarks = {f"dbserver1.public.{t}": {0: 4} for t in "abc"}
    offsets = types.ModuleType("cdc.kafka.offsets")
    offsets.high_watermarks = lambda conf, topic, timeout=10: watermarks[topic]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cdc.kafka.offsets", offsets)
    return {"log": tmp_path / "calls.jsonl"}


def tables_of(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--table"]


def test_tables_grouped_into_one_spark_submit_per_group(env: dict[str, Any]) -> None:
    dr, tis = run({"mode": "backfill", "end_offsets": {"dbserver1.public.a": {"0": 3},
                                                       "dbserver1.public.c": {"0": 2}}})
    assert dr.state == "success"
    argvs = sorted(calls(env["log"]), key=tables_of)
    assert [tables_of(a) for a in argvs] == [["inv.a", "inv.b"], ["inv.c"]]
    assert json.loads(argvs[0][argvs[0].index("--end-offsets") + 1]) == {"dbserver1.public.a": {"0": 3}}
    assert json.loads(argvs[1][argvs[1].index("--end-offsets") + 1]) == {"dbserver1.public.c": {"0": 2}}
    labels = {ti.rendered_map_index for (t, _), ti in tis.items() if t == "ingest"}
    assert labels == {"inv.a, inv.b", "inv.c"}
    report = tis[("publish", -1)].xcom_pull(task_ids="publish")
    assert sorted(r["table"] for r in report["tables"]) == ["inv.a", "inv.b", "inv.c"]
    assert report["missing"] == [] and report["totals"]["inserted"] == 9


def test_a_failing_table_fails_its_group_only_and_alerts_name_it(env: dict[str, Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.dags.alerts_sink import recorded

    monkeypatch.setenv("FAKE_SPARK_EXITS", '{"inv.b": 2}')
    dr, tis = run({})
    assert dr.state == "failed"
    states = {ti.rendered_map_index: ti.state for (t, _), ti in tis.items() if t == "ingest"}
    assert states == {"inv.a, inv.b": "failed", "inv.c": "success"}
    [(key, group)] = [(k, ti) for k, ti in tis.items() if k[0] == "ingest" and ti.state == "failed"]
    partial = group.xcom_pull(task_ids="ingest", map_indexes=key[1], key="cdc_partial_summary")
    assert [(t["table"], t["status"]) for t in partial["tables"]] == [("inv.a", "committed"), ("inv.b", "failed")]
    assert tis[("publish", -1)].state == "failed"
    [alert] = [a for a in recorded() if a["task_id"] == "ingest"]
    assert (alert["kind"], alert["error_class"], alert["table"]) == ("terminal", "ConfigError", "inv.a, inv.b")
    assert "inv.b: simulated failure with exit 2" in alert["message"]
