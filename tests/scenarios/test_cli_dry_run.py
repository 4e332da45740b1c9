"""``--dry-run`` writes nothing: on a fresh warehouse it plans and reads, and afterwards the warehouse holds no table
(no metadata tables, no ledger row, no staging, no target); the real run after it starts from the same offsets.
The job as users run it: `python jobs/ingest.py` in a subprocess (own JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import unique
from tests.integration.events import pg, produce
from tests.scenarios.test_cli import ingest, write_config

pytestmark = pytest.mark.integration


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_dry_run_on_a_fresh_warehouse_leaves_it_empty(tmp_path, broker):
    topic, target = unique("dbserver1.public.dry_"), f"{unique('dry')}.customers"
    broker.create_topic(topic, partitions=2)
    produce(broker.bootstrap, topic, [pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in (1, 2, 3)])
    warehouse = tmp_path / "fresh-warehouse"
    config = write_config(tmp_path, broker.bootstrap, warehouse, topic, target)

    for args in (("--dry-run",), ("--dry-run", "--mode", "backfill")):
        proc, summary = ingest(config, *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        [t] = summary["tables"]
        assert t["status"] == "dry_run" and t["events_read"] == 3
        assert files(warehouse) == [], files(warehouse)  # no namespace, no ledger, no staging, no target

    proc, summary = ingest(config)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [t] = summary["tables"]
    assert (t["status"], t["batch_id"], t["inserted"]) == ("committed", 1, 3)
    assert files(warehouse) != []
