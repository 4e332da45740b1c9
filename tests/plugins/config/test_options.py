"""The pipeline YAML's ``airflow:`` section (cdc_airflow.config.options): defaults, validation, broken-DAG reporting."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.common.errors import ConfigError
from cdc_airflow.config.options import AirflowConfig, Notifier, default_timeout_minutes, parse_airflow

TABLES = ["inventory.customers", "inventory.orders"]


def test_defaults_and_timeout_sized_from_batch_caps() -> None:
    cfg = parse_airflow(None, "p.yaml", TABLES)
    assert cfg == AirflowConfig()
    assert cfg.ingest_timeout_minutes(500_000) == default_timeout_minutes(500_000) == 37
    assert cfg.ingest_timeout_minutes(100_000) == 24 and cfg.maintenance_timeout_minutes == 180
    assert parse_airflow({"task_timeout_minutes": 45}, "p.yaml", TABLES).ingest_timeout_minutes(500_000) == 45


def test_values() -> None:
    cfg = parse_airflow({"on_failure": "my.alerts:page", "freshness_minutes": 60}, "p.yaml", TABLES)
    assert cfg.on_failure == "my.alerts:page" and cfg.freshness_minutes == {t: 60 for t in TABLES}
    cfg = parse_airflow({"freshness_minutes": {"inventory.orders": 30},
                         "on_failure": {"notifier": "airflow.providers.smtp.notifications.smtp.SmtpNotifier",
                                        "kwargs": {"to": "oncall@example.com"}}}, "p.yaml", TABLES)
    assert cfg.freshness_minutes == {"inventory.orders": 30}
    assert cfg.on_failure == Notifier("airflow.providers.smtp.notifications.smtp.SmtpNotifier",
                                      {"to": "oncall@example.com"})


@pytest.mark.parametrize("raw, key", [
    ({"task_timeout": 5}, "airflow.task_timeout"),
    ({"task_timeout_minutes": 0}, "airflow.task_timeout_minutes"),
    ({"freshness_minutes": {"inventory.nope": 5}}, "airflow.freshness_minutes.inventory.nope"),
    ({"freshness_minutes": "soon"}, "airflow.freshness_minutes"),
    ({"on_failure": "not a path"}, "airflow.on_failure"),
    ({"on_failure": {"notifier": "x.Y", "args": {}}}, "airflow.on_failure.args"),
    ([1], "airflow"),
])
def test_invalid_values_name_file_and_key(raw: object, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^p.yaml: key '{key}'"):
        parse_airflow(raw, "p.yaml", TABLES)


def test_unknown_airflow_key_makes_a_broken_dag_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc_airflow.config.pipelines import load_pipelines
    from cdc_airflow.config.settings import load_settings

    base = ("pipeline: {n}\nformat: json\nkafka: {{bootstrap.servers: x:1}}\ncatalog: {{warehouse: ./wh}}\n"
            "tables: [{{topic: t, target: a.b}}]\n")
    (tmp_path / "bad.yaml").write_text(base.format(n="bad") + "airflow: {on_failur: x.y}\n")
    (tmp_path / "good.yaml").write_text(base.format(n="good") + "airflow: {freshness_minutes: 5}\n"
                                        "metrics: {statsd_host: 127.0.0.1}\n")
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path))
    bad, good = load_pipelines(load_settings())
    assert bad.config is None and "key 'airflow.on_failur': unknown key" in str(bad.error)
    assert good.config is not None and good.error is None
