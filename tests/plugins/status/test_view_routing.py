"""The status view of a pipeline with a ``topic_pattern`` entry: it lists the tables of the topics the pattern
matches on the broker now; without the broker it shows why and still lists the explicit tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique

YAML = """
pipeline: routed
format: json
kafka: {{bootstrap.servers: "{bootstrap}"}}
catalog: {{name: lake, type: hadoop, warehouse: ./wh}}
tables:
  - {{topic_pattern: '{prefix}\\.public\\.(.*)', target: 'routed.$1', primary_key: [id]}}
  - {{topic: '{prefix}.explicit', target: routed.explicit, primary_key: [id]}}
"""


def status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bootstrap: str, prefix: str) -> dict[str, Any]:
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status

    (tmp_path / "pipelines").mkdir(exist_ok=True)
    (tmp_path / "pipelines" / "routed.yaml").write_text(YAML.format(bootstrap=bootstrap, prefix=prefix))
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path / "pipelines"))
    [entry] = collect_status(load_settings(), watermarks=lambda kafka, topic: {0: 3})
    return entry


def test_status_lists_resolved_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broker: Any) -> None:
    prefix = unique("strt")
    for t in (f"{prefix}.public.customers", f"{prefix}.public.orders", f"{prefix}.explicit"):
        broker.create_topic(t)
    entry = status(tmp_path, monkeypatch, broker.bootstrap, prefix)
    assert {t["table"]: t["topic"] for t in entry["tables"]} == {
        "routed.customers": f"{prefix}.public.customers", "routed.orders": f"{prefix}.public.orders",
        "routed.explicit": f"{prefix}.explicit"}
    assert all(t["lag_total"] == 3 for t in entry["tables"])


def test_status_without_broker_names_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = status(tmp_path, monkeypatch, "127.0.0.1:1", "nobroker")
    assert entry["error"].startswith("cannot resolve topic_pattern tables: KafkaUnavailable")
    assert [t["table"] for t in entry["tables"]] == ["routed.explicit"]
