"""Replaying an already committed range (``--mode backfill --start-offsets/--end-offsets``) changes nothing."""

from __future__ import annotations

import json

import pytest

from devtools.debezium import ChangeEventGenerator, GeneratorConfig, JsonSerializer, produce, redeliver
from tests.scenarios.reliability import cli, ledger_rows, pipeline, target, topic

pytestmark = pytest.mark.integration


def snapshot(spark, raw):
    spark.catalog.refreshTable(target(raw))
    rows = sorted((r.asDict() for r in spark.table(target(raw)).collect()), key=lambda r: r["id"])
    snap = spark.sql(f"SELECT snapshot_id FROM {target(raw)}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    return rows, snap


@pytest.mark.parametrize("delete_mode,truncate", [("hard", False), ("soft", True)])
def test_replaying_committed_offsets_changes_nothing(spark, broker, warehouse, tmp_path, delete_mode, truncate):
    import random

    raw = pipeline(broker, warehouse, delete_mode=delete_mode)
    gen = ChangeEventGenerator(31 + truncate, GeneratorConfig(partitions=1, toast_fraction=0.3))
    records = gen.snapshot(6) + gen.random_ops(30, {"insert": 4, "update": 5, "delete": 1.5, "change_pk": 0.5,
                                                    "truncate": 0.0})
    if truncate:
        records += gen.truncate() + gen.random_ops(8)
    records = redeliver(records, random.Random(5), restarts=1)
    n = produce(broker.bootstrap, topic(raw), records, JsonSerializer())
    assert cli(raw, tmp_path, "--max-records", str(n // 2)).code == 0
    assert cli(raw, tmp_path).code == 0
    before_rows, before_snap = snapshot(spark, raw)
    ledger_before = [r.asDict() for r in ledger_rows(spark, raw)]

    t = topic(raw)
    for start, end in ((0, n), (n // 3, n // 3 + 7)):
        res = cli(raw, tmp_path, "--mode", "backfill", "--start-offsets", json.dumps({t: {"0": start}}),
                  "--end-offsets", json.dumps({t: {"0": end}}), "--max-records", "20")
        assert res.code == 0, res.stderr
        s = json.loads(res.stdout.splitlines()[-1])["tables"][0]
        assert (s["status"], s["inserted"], s["updated"]) == ("committed", 0, 0), s
        if not truncate:
            assert s["deleted"] == 0, s
        rows, snap = snapshot(spark, raw)
        assert rows == before_rows  # every column, metadata included: no row was rewritten
        if not truncate:
            assert snap == before_snap  # not even an empty commit

    ledger = [r.asDict() for r in ledger_rows(spark, raw)]
    assert ledger[:len(ledger_before)] == ledger_before  # earlier batches untouched
    extra = ledger[len(ledger_before):]
    assert extra and all(r["mode"] == "backfill" and r["status"] == "committed" for r in extra)
    from cdc.ledger.ledger import Ledger

    cursor = Ledger(spark, f"lake.{raw['metadata_namespace']}.ledger", "rel").committed_offsets(
        raw["tables"][0]["target"], t)
    assert cursor == {0: n}  # the incremental cursor did not move
    res = cli(raw, tmp_path)
    assert json.loads(res.stdout.splitlines()[-1])["tables"][0]["status"] == "empty"
