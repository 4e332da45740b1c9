"""jobs/maintenance.py on real Spark + Iceberg: compaction and snapshot expiry keep the table's content; committed
staging batches and old tombstones are dropped once past their retention."""

from __future__ import annotations

import argparse
import importlib.util
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import REPO
from tests.integration.events import pg

pytestmark = pytest.mark.integration

_spec = importlib.util.spec_from_file_location("cdc_maintenance_job", REPO / "jobs" / "maintenance.py")
maintenance = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(maintenance)  # type: ignore[union-attr]


def args(**hours):
    base = dict(config="-", table=[], staging_retention_hours=72, tombstone_retention_hours=168,
                snapshot_retention_hours=168, retain_last=1, orphan_retention_hours=72)
    return argparse.Namespace(**{**base, **hours})


def test_maintenance_compacts_and_garbage_collects(make_pipe):
    p = make_pipe()
    p.send(*[pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 21)])
    p.run()
    p.send(*[pg("u", i, {"id": i, "name": f"u{i}", "bio": None}, 100 + i) for i in range(1, 11)],
           pg("d", 20, {"id": 20, "name": "n20", "bio": None}, 200),
           pg("u", 1, {"id": 1, "name": "u1", "bio": None}, 210))  # past the delete: its tombstone can go
    p.run()
    before = p.rows()
    names = maintenance.helper_tables(p.cfg, p.table)
    spark = p.spark
    assert spark.table(names[1]).count() == 1

    # Retentions not reached yet: nothing is dropped.
    m = maintenance.Maintenance(spark, p.cfg, args(), datetime.now(timezone.utc))
    m.run(p.cfg.tables)
    assert not [s for s in m.steps if s["error"]], m.steps
    assert spark.sql(f"SELECT DISTINCT batch_id FROM {names[0]}").count() == 2

    # A day later with zero retention: committed staged batches and the tombstone go, the table stays the same.
    later = datetime.now(timezone.utc) + timedelta(days=1)
    m = maintenance.Maintenance(spark, p.cfg, args(staging_retention_hours=0, tombstone_retention_hours=0,
                                                   snapshot_retention_hours=0), later)
    m.run(p.cfg.tables)
    assert not [s for s in m.steps if s["error"]], m.steps
    actions = {s["action"] for s in m.steps}
    assert {"expire_snapshots", "rewrite_data_files", "rewrite_position_delete_files", "remove_orphan_files",
            "drop_committed_batches", "gc_tombstones"} <= actions
    spark.catalog.refreshTable(names[0])
    assert spark.table(names[0]).count() == 0
    assert spark.table(names[1]).count() == 0
    spark.catalog.refreshTable(p.target)
    assert p.rows() == before
    assert len(before) == 19
    p.send(pg("c", 21, {"id": 21, "name": "n21", "bio": None}, 300))  # ingestion continues afterwards
    assert p.run()["inserted"] == 1


def test_the_ledger_is_compacted_and_a_run_that_loaded_it_before_still_records_its_batch(make_pipe):
    """Every batch adds a ledger file; a run's ledger reads open them all (0.26 s at 10 batches, 1.3 s at 600), so
    maintenance rewrites the ledger's small files. A run whose session loaded the ledger before the rewrite then
    updates rows in files that are gone: its write conflicts, is retried on the current ledger and lands."""
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange

    p = make_pipe()
    for i in range(1, 4):
        p.send(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i))
        p.run()
    spark, ledger = p.spark, f"lake.{p.cfg.metadata_namespace}.ledger"
    files = lambda: spark.sql(f"SELECT count(*) FROM {ledger}.files").first()[0]  # noqa: E731
    rows = lambda: sorted(tuple(r) for r in spark.sql(  # noqa: E731
        f"SELECT batch_id, `partition`, start_offset, end_offset, status, run_id FROM {ledger}").collect())
    stale = Ledger(spark.newSession(), ledger, p.cfg.pipeline)  # another run: its own catalog cache
    state = stale.state(p.table.target, p.topic)
    stale.claim(p.table.target, state.next_batch_id, "incremental", [LedgerRange(p.topic, 0, 3, 3)], "run-x",
                seen=state.snapshot_id)
    spark.catalog.refreshTable(ledger)
    before, count = rows(), files()
    assert count >= 4

    m = maintenance.Maintenance(spark, p.cfg, args(), datetime.now(timezone.utc))
    m.run(p.cfg.tables)
    assert not [s for s in m.steps if s["error"]], m.steps
    assert "rewrite_data_files" in {s["action"] for s in m.steps if s["table"] == ledger}
    spark.catalog.refreshTable(ledger)
    assert files() == 1 and rows() == before

    stale.mark_staged(p.table.target, 4, "run-x", [LedgerRange(p.topic, 0, 3, 3)], None)
    stale.mark_committed(p.table.target, 4, "run-x", {}, None, {})
    spark.catalog.refreshTable(ledger)
    assert [r[4] for r in rows()] == ["committed"] * 4
    p.send(pg("c", 9, {"id": 9, "name": "n9", "bio": None}, 9))  # ingestion continues from the same cursor
    assert p.run()["inserted"] == 1
    plan = stale.state(p.table.target, p.topic)  # a run plans, the ledger is rewritten, then it claims
    assert files() > 1
    maintenance.Maintenance(spark, p.cfg, args(), datetime.now(timezone.utc)).run(p.cfg.tables)
    spark.catalog.refreshTable(ledger)
    assert files() == 1
    stale.claim(p.table.target, plan.next_batch_id, "incremental", [LedgerRange(p.topic, 0, 4, 4)], "run-y",
                topic=p.topic, cursor=plan.cursor, seen=plan.snapshot_id)  # a rewrite is no conflicting claim
    assert stale.state(p.table.target, None).owners(plan.next_batch_id) == {"run-y"}


def test_a_claim_still_lands_when_a_compacted_file_mixes_a_renamed_pipeline_s_rows(make_pipe):
    """A pipeline renamed to a new name starts its batch ids at 1 again. Once maintenance has rewritten the ledger,
    one file holds both pipelines' rows of the table, and the claim's overwrite cannot delete just its batch's rows
    from it ("Cannot delete file where some, but not all, rows match filter"). The claim then falls back to the
    MERGE (``cdc.ledger.write``) instead of refusing every run."""
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables

    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "n1", "bio": None}, 1))
    ensure_meta_tables(p.spark, p.cfg)  # the metadata tables (a dry run writes nothing)
    spark, ledger = p.spark, f"lake.{p.cfg.metadata_namespace}.ledger"
    for pipeline, batches in (("before-rename", (1, 2, 3)), (p.cfg.pipeline, (1,))):
        led = Ledger(spark, ledger, pipeline)
        for b in batches:
            state = led.state(p.table.target, None)
            led.claim(p.table.target, b, "incremental", [LedgerRange(p.topic, 0, b, b)], f"{pipeline}-{b}",
                      seen=state.snapshot_id)
            led.mark_committed(p.table.target, b, f"{pipeline}-{b}", {}, None, {})
    maintenance.Maintenance(spark, p.cfg, args(), datetime.now(timezone.utc)).run(p.cfg.tables)
    spark.catalog.refreshTable(ledger)
    assert spark.sql(f"SELECT count(*) FROM {ledger}.files").first()[0] == 1
    led = Ledger(spark, ledger, p.cfg.pipeline)
    state = led.state(p.table.target, None)
    assert state.next_batch_id == 2
    led.claim(p.table.target, 2, "incremental", [LedgerRange(p.topic, 0, 2, 2)], "run-2", seen=state.snapshot_id)
    assert led.state(p.table.target, None).owners(2) == {"run-2"}


def test_maintenance_removes_the_ledger_s_orphan_files_past_their_retention(make_pipe):
    """The ingest job expires the ledger's old snapshots itself (cdc.ledger.expiry); a file it could not delete
    then (credentials without delete permission) is an orphan, which maintenance removes once past the orphan
    retention, like a target's. A younger one stays (a write in flight may be about to commit it)."""
    import os
    import time

    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "n1", "bio": None}, 1))
    p.run()
    spark, ledger = p.spark, f"lake.{p.cfg.metadata_namespace}.ledger"
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {ledger}").where("col_name = 'Location'").first()[1]
    data = os.path.join(location.removeprefix("file:"), "data")
    old, young = os.path.join(data, "orphan-old.parquet"), os.path.join(data, "orphan-young.parquet")
    for path in (old, young):
        with open(path, "wb") as f:
            f.write(b"PAR1")
    four_days_ago = time.time() - 4 * 24 * 3600
    os.utime(old, (four_days_ago, four_days_ago))
    m = maintenance.Maintenance(spark, p.cfg, args(), datetime.now(timezone.utc))
    m.run(p.cfg.tables)
    assert not [s for s in m.steps if s["error"]], m.steps
    assert not os.path.exists(old) and os.path.exists(young)
    p.send(pg("c", 2, {"id": 2, "name": "n2", "bio": None}, 2))
    assert p.run()["inserted"] == 1
