"""jobs/maintenance.py against a recording fake SparkSession (the real Spark run waits for cdc.spark.session)."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cdc_maintenance_job", REPO / "jobs" / "maintenance.py")
maintenance = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(maintenance)  # type: ignore[union-attr]


class FakeSpark:
    def __init__(self, existing: set[str], fail: str | None = None):
        self.sql_log: list[str] = []
        self.existing, self.fail = existing, fail
        self.catalog = SimpleNamespace(tableExists=lambda ident: ident in self.existing)

    def sql(self, text: str) -> Any:
        self.sql_log.append(text)
        if self.fail and self.fail in text:
            raise RuntimeError("boom\nstack")
        rows = [SimpleNamespace(batch_id=3, asDict=lambda: {"n": 1})] if "SELECT DISTINCT batch_id" in text else []
        if "max_position" in text:  # the ledger: positions committed per partition
            rows = [{"partition": 0, "max_position": "[900]", "changes": 4},
                    {"partition": 1, "max_position": "[800]", "changes": 2}]
        first = {"n": 2, "p": [700]} if "SELECT count(*) AS n" in text else None  # tombstones past retention
        return SimpleNamespace(collect=lambda: rows, first=lambda: first)

    def table(self, ident: str) -> Any:
        names = ["id", "__lsn", "__kafka_partition", "__kafka_offset", "__deleted_at"]
        return SimpleNamespace(schema=SimpleNamespace(fields=[SimpleNamespace(name=n) for n in names]))


@pytest.fixture(autouse=True)
def no_table_properties(monkeypatch) -> None:
    """The fake has no JVM: table properties (``cdc.iceberg.tables.table_property``, read through Py4J) are all unset."""
    import cdc.iceberg.tables

    monkeypatch.setattr(cdc.iceberg.tables, "table_property", lambda spark, name, key: None)


def _run(existing: set[str], fail: str | None = None) -> tuple[FakeSpark, Any]:
    from cdc.config.load import load_config

    cfg = load_config(REPO / "pipelines" / "demo.yaml")
    args = maintenance.parse_args(["--config", "x", "--tombstone-retention-hours", "24"])
    spark = FakeSpark(existing, fail)
    m = maintenance.Maintenance(spark, cfg, args, datetime(2024, 5, 8, tzinfo=timezone.utc))
    m.run(cfg.select(["inventory.orders"]))
    return spark, m


def test_all_steps_for_existing_tables() -> None:
    existing = {"lake.inventory.orders", "lake.cdc_meta.staging__inventory__orders",
                "lake.cdc_meta.tombstones__inventory__orders", "lake.cdc_meta.ledger"}
    spark, m = _run(existing)
    sql = "\n".join(spark.sql_log)
    assert ("CALL lake.system.expire_snapshots(table => 'inventory.orders', older_than => "
            "TIMESTAMP '2024-05-01 00:00:00Z', retain_last => 5)") in sql
    assert "CALL lake.system.rewrite_data_files(table => 'inventory.orders')" in sql
    assert "CALL lake.system.rewrite_position_delete_files(table => 'inventory.orders')" in sql
    assert "remove_orphan_files(table => 'inventory.orders', older_than => TIMESTAMP '2024-05-05 00:00:00Z')" in sql
    assert "DELETE FROM lake.cdc_meta.staging__inventory__orders WHERE batch_id IN (3)" in sql
    assert "status = 'committed' AND committed_at < TIMESTAMP '2024-05-05 00:00:00Z'" in sql
    gc = sql.index("ALTER TABLE lake.cdc_meta.tombstones__inventory__orders SET TBLPROPERTIES ('cdc.gc-horizon' = '[700]')")
    assert sql.index("DELETE FROM lake.cdc_meta.tombstones__inventory__orders t WHERE `__deleted_at` < "
                     "TIMESTAMP '2024-05-07 00:00:00Z' AND ((t.`__lsn` < 800))") > gc  # horizon first; only
    # tombstones strictly below what every partition has passed (partition 1 is at 800) go
    assert not [s for s in m.steps if s["error"]]


def test_missing_tables_are_skipped_and_failures_isolated() -> None:
    spark, m = _run({"lake.inventory.orders"}, fail="rewrite_data_files")
    failed = [s for s in m.steps if s["error"]]
    assert [s["action"] for s in failed] == ["rewrite_data_files"] and failed[0]["error"] == "RuntimeError: boom"
    assert any("remove_orphan_files" in s for s in spark.sql_log)  # later steps still ran
    assert not any("staging__" in s for s in spark.sql_log)
