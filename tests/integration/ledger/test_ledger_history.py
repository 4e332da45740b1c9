"""The job keeps the ledger's snapshot history short (``cdc.ledger.expiry``) on real Spark + Iceberg: after its
tables, a run expires the ledger snapshots older than the ledger's ``history.expire.max-snapshot-age-ms`` and the
files only they referenced, keeps every ledger row, and the next runs go on from the same cursor."""

from __future__ import annotations

import logging
import os

import pytest

from cdc.ledger import expiry as ledger_history
from cdc.ledger.ledger import Ledger
from tests.integration.events import pg

pytestmark = pytest.mark.integration


def snapshots(spark, ledger: str) -> int:
    spark.catalog.refreshTable(ledger)
    return spark.sql(f"SELECT count(*) FROM {ledger}.snapshots").first()[0]


def files_on_disk(spark, ledger: str) -> tuple[set[str], set[str]]:
    """The ledger's data files in its location, and (second set) those its current snapshot references."""
    spark.catalog.refreshTable(ledger)
    current = {r[0].removeprefix("file:") for r in spark.sql(f"SELECT file_path FROM {ledger}.files").collect()}
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {ledger}").where("col_name = 'Location'").first()[1]
    root = os.path.join(location.removeprefix("file:"), "data")
    disk = {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet")}
    return disk, current


def runs(p, first_key: int, count: int) -> None:
    for k in range(first_key, first_key + count):
        p.send(pg("c", k, {"id": k, "name": f"n{k}", "bio": None}, k))
        assert p.run()["status"] == "committed"


def test_a_run_expires_ledger_snapshots_older_than_the_ledger_s_maximum_age(make_pipe, monkeypatch, caplog):
    p = make_pipe()
    ledger = f"lake.{p.cfg.metadata_namespace}.ledger"
    runs(p, 1, 3)  # a claim, a staged and a committed mark each: the marks replace the claim's file
    before = snapshots(p.spark, ledger)
    disk, current = files_on_disk(p.spark, ledger)
    replaced_before = disk - current
    assert before >= 9 and len(replaced_before) >= 6
    monkeypatch.setattr(ledger_history, "EXPIRE_AT_LEAST", 5)
    p.spark.sql(f"ALTER TABLE {ledger} SET TBLPROPERTIES ('{ledger_history.MAX_AGE_PROPERTY}' = '1')")
    with caplog.at_level(logging.INFO, logger="cdc.ledger"):
        runs(p, 4, 1)
    assert f"ledger {ledger}: expired" in caplog.text
    assert snapshots(p.spark, ledger) == 1  # Iceberg keeps the current one (history.expire.min-snapshots-to-keep)
    disk, current = files_on_disk(p.spark, ledger)
    # The replaced files went with the snapshots that referenced them; Iceberg deletes the one the current snapshot
    # replaced (the batch's staged file) when that snapshot expires.
    replaced = p.spark.sql(f"SELECT summary['deleted-data-files'] FROM {ledger}.snapshots").first()[0]
    assert len(disk - current) == int(replaced or 0) < len(replaced_before)
    assert ledger_history.expire_history(p.spark, ledger) == 0  # the snapshot log was cut too: nothing due again
    assert [r["batch_id"] for r in p.ledger()] == [1, 2, 3, 4]  # every row stays (the audit trail)
    assert Ledger(p.spark, ledger, p.cfg.pipeline).state(p.table.target, p.topic).cursor == {0: 4}
    runs(p, 5, 1)
    assert p.rows() == {k: (f"n{k}", None) for k in range(1, 6)}


def test_a_run_keeps_ledger_snapshots_younger_than_the_maximum_age(make_pipe, monkeypatch):
    """With the ledger's default (24 hours), nothing a test's runs commit is old enough: the history only grows."""
    p = make_pipe()
    ledger = f"lake.{p.cfg.metadata_namespace}.ledger"
    monkeypatch.setattr(ledger_history, "EXPIRE_AT_LEAST", 1)
    runs(p, 1, 2)
    before = snapshots(p.spark, ledger)
    runs(p, 3, 1)
    assert snapshots(p.spark, ledger) == before + 3
    props = {r["key"]: r["value"] for r in p.spark.sql(f"SHOW TBLPROPERTIES {ledger}").collect()}
    assert props[ledger_history.MAX_AGE_PROPERTY] == str(24 * 3600 * 1000)


def test_a_ledger_that_keeps_more_snapshots_than_are_due_is_not_expired_again_and_again(make_pipe, monkeypatch):
    """``history.expire.min-snapshots-to-keep`` above the due count: Iceberg would expire nothing, so the run does not
    try (under the ledger lock, every run); it used to, and to log the due count as expired."""
    p = make_pipe()
    ledger = f"lake.{p.cfg.metadata_namespace}.ledger"
    runs(p, 1, 2)
    before = snapshots(p.spark, ledger)
    monkeypatch.setattr(ledger_history, "EXPIRE_AT_LEAST", 2)
    future = 10**13  # every snapshot is older than a day by then
    p.spark.sql(f"ALTER TABLE {ledger} SET TBLPROPERTIES ('{ledger_history.MIN_KEEP_PROPERTY}' = '{before - 1}')")
    assert ledger_history.expire_history(p.spark, ledger, now_ms=future) == 0  # one would go: fewer than 2
    assert snapshots(p.spark, ledger) == before
    p.spark.sql(f"ALTER TABLE {ledger} SET TBLPROPERTIES ('{ledger_history.MIN_KEEP_PROPERTY}' = '{before - 3}')")
    assert ledger_history.expire_history(p.spark, ledger, now_ms=future) == 3  # what went, not what was due
    assert snapshots(p.spark, ledger) == before - 3


def test_snapshots_a_branch_keeps_are_not_expired_again_and_again(make_pipe, monkeypatch, caplog):
    """A branch of the ledger (e.g. an auditor's) with its own retention keeps the snapshots the main branch's
    count says are due: Iceberg would remove none, so the run commits no expiry (it used to, every run, and log it)."""
    p = make_pipe()
    ledger = f"lake.{p.cfg.metadata_namespace}.ledger"
    runs(p, 1, 2)
    before = snapshots(p.spark, ledger)
    monkeypatch.setattr(ledger_history, "EXPIRE_AT_LEAST", 2)
    p.spark.sql(f"ALTER TABLE {ledger} CREATE BRANCH audit WITH SNAPSHOT RETENTION {before} SNAPSHOTS")
    metadata = p.spark.sql(f"SELECT count(*) FROM {ledger}.metadata_log_entries").first()[0]
    with caplog.at_level(logging.INFO, logger="cdc.ledger"):
        assert ledger_history.expire_history(p.spark, ledger, now_ms=10**13) == 0
    assert "expired" not in caplog.text
    p.spark.catalog.refreshTable(ledger)
    assert p.spark.sql(f"SELECT count(*) FROM {ledger}.metadata_log_entries").first()[0] == metadata  # no commit
    assert snapshots(p.spark, ledger) == before
    p.spark.sql(f"ALTER TABLE {ledger} DROP BRANCH audit")
    assert ledger_history.expire_history(p.spark, ledger, now_ms=10**13) == before - 1  # the current one stays
