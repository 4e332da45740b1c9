"""The CDC status view's data and HTML: ledger reads with pyiceberg from a hadoop-layout warehouse, lag, dead letters
(the app serving them: test_app.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pytest

from tests.plugins.iceberg_ledger import DEAD_LETTERS, LEDGER, T0, HadoopLayoutWriter, ledger_row

YAML = """
pipeline: demo
format: json
kafka: {bootstrap.servers: "127.0.0.1:1"}
catalog: {name: lake, type: hadoop, warehouse: ./wh}
tables:
  - {topic: dbserver1.public.customers, target: inventory.customers, primary_key: [id]}
  - {topic: dbserver1.public.orders, target: inventory.orders, primary_key: [id]}
airflow: {freshness_minutes: 60}
"""
CUST, ORD = "inventory.customers", "inventory.orders"
TARGET = pa.schema([("id", pa.int64()), ("__source_ts_ms", pa.int64()), ("__batch_id", pa.int64())])
TS0 = 1714564800000  # 2024-05-01T12:00:00Z


@pytest.fixture()
def cdc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pipelines dir with demo.yaml and a warehouse holding a ledger (2 batches) and 2 dead letters."""
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    (pipelines / "demo.yaml").write_text(YAML)
    w = HadoopLayoutWriter(pipelines / "wh")
    w.append("cdc_meta.ledger", LEDGER, [
        ledger_row(CUST, 1, 0, 0, 100, status="staged"), ledger_row(CUST, 1, 1, 0, 50, status="staged"),
        ledger_row(CUST, 1, 0, 0, 100), ledger_row(CUST, 1, 1, 0, 50),
        ledger_row("other.table", 9, 0, 0, 999, pipeline="other"),
    ])
    w.append("cdc_meta.ledger", LEDGER, [
        ledger_row(CUST, 2, 0, 100, 120, dead_letters=2), ledger_row(CUST, 2, 1, 50, 50),
        ledger_row(CUST, 3, 0, 0, 500, mode="backfill"),  # backfill does not move incremental offsets
        ledger_row(CUST, 4, 0, 120, 130, status="staged"),
    ])
    w.append("cdc_meta.dead_letters", DEAD_LETTERS, [
        {"pipeline": "demo", "table_name": CUST, "batch_id": 2, "topic": "dbserver1.public.customers",
         "partition": 0, "offset": o, "key": b'{"id": 1}', "value": b"<script>x</script>" * 30,
         "error_class": "DecodeError", "error_message": f"bad record {o}", "created_at": T0} for o in (101, 102)
    ])
    w.append(CUST, TARGET, [{"id": i, "__source_ts_ms": TS0 - 3_600_000 * i, "__batch_id": 1} for i in (1, 2)])
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(pipelines))
    return pipelines


def fake_watermarks(kafka: Mapping[str, Any], topic: str) -> dict[int, int]:
    if topic.endswith("orders"):
        raise RuntimeError("broker down")
    return {0: 125, 1: 50}


def test_committed_offsets_and_batches_from_hadoop_ledger(cdc_home: Path) -> None:
    from cdc_airflow.config.pipelines import load_pipeline
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.monitor.ledger import batches, committed_offsets, read_rows

    cfg = load_pipeline(load_settings(), str(cdc_home / "demo.yaml"))
    rows = read_rows(cfg.catalog, "cdc_meta.ledger", pipeline="demo")
    assert {r["pipeline"] for r in rows} == {"demo"}
    assert committed_offsets(rows, CUST) == {"dbserver1.public.customers": {0: 120, 1: 50}}
    b = batches(rows, CUST, limit=3)
    assert [x["batch_id"] for x in b] == [4, 3, 2]
    assert b[0]["status"] == "staged" and b[2]["status"] == "committed"
    assert b[2]["events_read"] == 20 and b[2]["dead_letters"] == 2 and b[2]["target_snapshot_id"] == 1002
    assert b[2]["phase_seconds"]["merge"] == 2.0 and b[2]["committed_at"].startswith("2024-05-01T12:00:00")
    one = batches(rows, CUST)[-1]  # batch 1: staged + committed rows fold into one committed batch
    assert one["batch_id"] == 1 and one["status"] == "committed" and one["events_read"] == 150


def test_collect_status(cdc_home: Path) -> None:
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status

    [p] = collect_status(load_settings(), watermarks=fake_watermarks, now_ms=TS0 + 7_500_000)
    assert p["pipeline"] == "demo" and p["error"] is None
    cust, orders = p["tables"]
    # lag in time: now − newest committed __source_ts_ms (the target's manifest bounds); stale: > 60 min with lag
    assert cust["newest_source_ts"] == "2024-05-01T11:00:00Z" and cust["time_lag_seconds"] == 11_100
    assert cust["time_lag"] == "3 h 5 min" and cust["stale"] is True and cust["freshness_minutes"] == 60
    assert cust["dead_letter_classes"] == {"DecodeError": 2}
    assert orders["time_lag_seconds"] is None and orders["stale"] is False  # no lag known (broker down)
    assert cust["partitions"] == [{"partition": 0, "high_watermark": 125, "committed": 120, "lag": 5},
                                  {"partition": 1, "high_watermark": 50, "committed": 50, "lag": 0}]
    assert cust["lag_total"] == 5 and cust["dead_letters"] == 2
    assert cust["snapshot_id"] not in (None, 1003)  # the target table's current snapshot (not the ledger's)
    assert orders["lag_error"].startswith("RuntimeError: broker down") and orders["lag_total"] is None
    assert orders["batches"] == [] and orders["dead_letters"] == 0


def test_status_html_and_dead_letters(cdc_home: Path) -> None:
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import (
        collect_dead_letters,
        collect_status,
        render_dead_letters_html,
        render_status_html,
    )

    html = render_status_html(collect_status(load_settings(), watermarks=fake_watermarks), generated="now")
    assert "Pipeline demo" in html and "inventory.customers" in html and "broker unavailable" in html
    assert "Behind: <span" in html and ">STALE</span>" in html and "(DecodeError: 2)" in html
    assert 'href="./dead-letters/demo/inventory.customers"' in html
    rows = collect_dead_letters(load_settings(), "demo", CUST)
    assert [r["offset"] for r in rows] == [102, 101]
    assert rows[0]["key"] == '{"id": 1}' and rows[0]["value"].endswith("…")
    page = render_dead_letters_html("demo", CUST, rows)
    assert "<script>" not in page and "&lt;script&gt;" in page  # escaped
    hidden = collect_dead_letters(load_settings(), "demo", CUST, raw=False)
    assert [(r["offset"], r["error_class"], r["key"], r["value"], r["error_message"]) for r in hidden] == [
        (102, "DecodeError", None, None, None), (101, "DecodeError", None, None, None)]
    page = render_dead_letters_html("demo", CUST, hidden, raw=False)
    assert "script" not in page and "DecodeError" in page and "Record bytes and error messages are hidden" in page
    with pytest.raises(KeyError):
        collect_dead_letters(load_settings(), "nope", CUST)


def test_missing_ledger_and_broken_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cdc_airflow.config.settings import load_settings
    from cdc_airflow.status.view import collect_status, render_status_html

    (tmp_path / "demo.yaml").write_text(YAML)
    (tmp_path / "bad.yaml").write_text("pipeline: bad\n")
    monkeypatch.setenv("CDC_PIPELINES_DIR", str(tmp_path))
    bad, demo = collect_status(load_settings(), watermarks=fake_watermarks)
    assert "kafka" in bad["error"]
    assert demo["error"] is None and demo["tables"][0]["batches"] == [] and demo["tables"][0]["lag_total"] == 175
    assert "No batches yet" in render_status_html([bad, demo], generated="now")
