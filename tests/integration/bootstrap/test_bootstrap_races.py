"""A JDBC bootstrap and ingest batches of the same table meeting, against a real PostgreSQL 15, the real local broker,
Spark and Iceberg: an ingest started while a bootstrap is in flight waits (exit 75) instead of committing rows the
bootstrap's swap would wipe out; a bootstrap killed after its swap is finished by the next ingest before that ingest
merges anything, so the horizon holds for every batch after the swap. The table ends equal to ``SELECT *``."""

from __future__ import annotations

import time

import pytest

from cdc.common.errors import ConcurrentRunError
from tests.integration.bootstrap.history import history_before_bootstrap
from tests.integration.bootstrap.test_bootstrap_postgres import (  # noqa: F401  (fixtures)
    bootstrap_rows,
    load_meta,
    produce,
    setup,
    start_bootstrap,
    table_rows,
)
from tests.integration.cli import finish, summary_of

pytestmark = pytest.mark.integration


def ingest_until_empty(spark, cfg, limit: int = 30) -> None:
    from cdc.run.batch import run_batch

    for _ in range(limit):
        if run_batch(spark, cfg, list(cfg.tables))["tables"][0]["status"] == "empty":
            return
    raise AssertionError(f"still not empty after {limit} batches")


def wait_for_staged(spark, meta: str, target: str, rows: int, proc, timeout: float = 300) -> None:
    """Until the bootstrap's staging table holds the snapshot's rows (the bootstrap is then past its read)."""
    stage = f"lake.{meta}.bootstrap__{target.replace('.', '__')}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"bootstrap ended early: {proc.communicate()}")
        spark.catalog.clearCache()
        if spark.catalog.tableExists(stage):
            spark.catalog.refreshTable(stage)
            if spark.table(stage).count() == rows:
                return
        time.sleep(0.5)
    raise AssertionError("the bootstrap never staged its rows")


def test_an_ingest_meeting_a_bootstrap_in_flight_waits_and_nothing_is_lost(setup, broker, spark):
    from cdc.config.load import load_config

    db, topic, target, config, src = setup
    meta = load_meta(config)
    produce(broker, topic, history_before_bootstrap(src))
    at_snapshot = src.rows()
    proc = start_bootstrap(config, env={"CDC_PAUSE_AT": "bootstrap_before_swap:25"})
    wait_for_staged(spark, meta, target, len(at_snapshot), proc)
    time.sleep(3)  # past its last check: the swap comes next
    produce(broker, topic, src.tx(("c", 10, "n10", "b10"), ("u", 1, "n1-later", "b1-later")))

    cfg = load_config(config)
    from cdc.run.batch import run_batch

    with pytest.raises(ConcurrentRunError, match=f"table {target}: a bootstrap .* is in progress") as err:
        run_batch(spark, cfg, list(cfg.tables))
    assert err.value.exit_code == 75
    res = finish(proc)
    assert res.returncode == 0, res.stderr
    assert summary_of(res)["tables"][0]["status"] == "bootstrapped"
    ingest_until_empty(spark, cfg)
    assert table_rows(spark, target) == src.rows()


def test_a_bootstrap_killed_after_its_swap_is_finished_by_the_next_ingest_first(setup, broker, spark):
    """The ingest before the bootstrap's rerun reads an insert (key 7) whose delete lies past its batch cut: with the
    horizon unknown it would insert the key, and the rerun's horizon would then drop the delete."""
    from cdc.config.load import load_config
    from cdc.run.batch import run_batch

    db, topic, target, config, src = setup
    meta = load_meta(config)
    produce(broker, topic, history_before_bootstrap(src))
    killed = finish(start_bootstrap(config, env={"CDC_KILL_AT": "bootstrap_after_swap"}))
    assert killed.returncode == -9, killed.stderr
    assert bootstrap_rows(spark, meta) == []

    cfg = load_config(config).with_batch(max_records_per_partition=5)
    out = run_batch(spark, cfg, list(cfg.tables))["tables"][0]
    assert [r["batch_id"] for r in bootstrap_rows(spark, meta)] == [1]  # recorded before the batch merged
    assert out["batch_id"] == 2 and 7 not in table_rows(spark, target)
    assert any("bootstrap" in w and "finished" in w for w in out.get("warnings", [])), out

    rerun = finish(start_bootstrap(config))
    assert rerun.returncode == 2 and "--replace" in rerun.stderr, rerun.stderr
    ingest_until_empty(spark, cfg)
    assert table_rows(spark, target) == src.rows()
    assert len(bootstrap_rows(spark, meta)) == 1


def test_a_transaction_committed_in_the_wal_before_the_snapshot_but_invisible_to_it_is_applied(setup, postgres, broker,
                                                                                              spark):
    """PostgreSQL writes a commit record before it makes the transaction visible: a transaction T2 whose commit
    record precedes a visible T1's may still be running for a snapshot taken in between. Debezium streams in commit
    record order, so T2's changes sit *below* the newest change the snapshot saw, and a horizon taken as that
    position would drop them although the snapshot lacks them. Made real here the way synchronous replication makes
    it: T2 commits while ``synchronous_standby_names`` names a standby that never answers, so its commit record is
    written and flushed but it stays in the process array (running, invisible) until its wait is cancelled; T1
    commits with ``synchronous_commit = local`` and is visible at once."""
    import threading

    from cdc.bootstrap.postgres_types import lsn_to_int
    from cdc.config.load import load_config
    from tests.integration.bootstrap.test_bootstrap_postgres import pg_event, wait_for_snapshot

    db, topic, target, config, src = setup
    produce(broker, topic, src.tx(("c", 1, "n1", "b1"), ("c", 2, "n2", "b2")))
    postgres.execute("ALTER SYSTEM SET synchronous_standby_names = 'a_standby_that_never_answers'")
    postgres.execute("SELECT pg_reload_conf()")
    waiting = postgres.connect(db)
    waiting.execute("SET synchronous_commit = on")  # the test server's default is off
    try:
        t2 = {}

        def commit_t2() -> None:
            with waiting.transaction():
                t2["xid"] = int(waiting.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
                waiting.execute("UPDATE customers SET name = 'n1-t2', bio = 'b1-t2' WHERE id = 1")
                t2["lsn"] = lsn_to_int(waiting.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])
            # returns once the wait is cancelled: "the transaction has already committed locally"

        thread = threading.Thread(target=commit_t2, daemon=True)
        thread.start()
        pid = waiting.info.backend_pid
        deadline = time.monotonic() + 30
        while not postgres.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event = 'SyncRep'",
                                   (pid,)):
            assert time.monotonic() < deadline, "T2 never waited for the standby"
            time.sleep(0.05)
        t2_commit = src.lsn()  # its commit record is written: the WAL is past it
        t1 = postgres.connect(db)
        t1.execute("SET synchronous_commit = local")
        with t1.transaction():
            t1_xid = int(t1.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            t1.execute("UPDATE customers SET name = 'n2-t1', bio = 'b2-t1' WHERE id = 2")
            t1_lsn = src.lsn()
        # Debezium streams T2 first (its commit record is first), then T1, whose sequence starts at T2's commit
        produce(broker, topic, [pg_event("u", {"id": 1, "name": "n1-t2", "bio": "b1-t2"}, t2["lsn"], src.last_commit,
                                         t2["xid"]),
                                pg_event("u", {"id": 2, "name": "n2-t1", "bio": "b2-t1"}, t1_lsn, t2_commit, t1_xid)])
        proc = start_bootstrap(config, env={"CDC_PAUSE_AT": "bootstrap_after_snapshot:3"})
        wait_for_snapshot(postgres, db, proc)  # taken while T2 still waits: it sees T1, not T2
        postgres.execute("SELECT pg_cancel_backend(%s)", (pid,))
        thread.join(30)
        res = finish(proc)
    finally:
        postgres.execute("ALTER SYSTEM RESET synchronous_standby_names")
        postgres.execute("SELECT pg_reload_conf()")
        waiting.close()
    assert res.returncode == 0, res.stderr
    assert table_rows(spark, target)[1] == ("n1", "b1")  # the snapshot did not see T2
    ingest_until_empty(spark, load_config(config))
    assert table_rows(spark, target) == src.rows() == {1: ("n1-t2", "b1-t2"), 2: ("n2-t1", "b2-t1")}
