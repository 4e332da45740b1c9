"""Target layout and snapshot provenance, end to end: real broker → job → Iceberg table metadata.

partition_by / sort_by / properties are applied when the target is created and evolved on later runs (only when they
differ); a layout naming an unknown column fails before the batch is claimed; every target commit of a batch carries
cdc.batch-id / cdc.pipeline / cdc.end-offsets in its snapshot summary.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cdc.common.errors import ConfigError
from cdc.config.table_layout import parse_layout
from tests.integration.events import pg

pytestmark = pytest.mark.integration


def partitioning(spark, table):
    from cdc.config.table_layout import partitioning_of

    return partitioning_of([(r[0] or "", r[1] or "") for r in spark.sql(f"DESCRIBE TABLE {table}").collect()])


def props(spark, table):
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def summaries(spark, table):
    return [(r["operation"], dict(r["summary"])) for r in
            spark.sql(f"SELECT operation, summary FROM {table}.snapshots ORDER BY committed_at").collect()]


def with_layout(pipe, **layout):
    t = replace(pipe.table, layout=parse_layout(layout))
    pipe.cfg = replace(pipe.cfg, tables=(t,))
    return pipe


def test_layout_on_create_then_evolved_idempotently_with_snapshot_provenance(make_pipe):
    p = with_layout(make_pipe(partitions=2), partition_by=["bucket(4, id)", "name"], sort_by=["name DESC"],
                    properties={"write.merge.mode": "copy-on-write", "write.distribution-mode": "hash",
                                "write.target-file-size-bytes": 1048576})
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 10), pg("c", 2, {"id": 2, "name": "b", "bio": None}, 11))
    p.send(pg("c", 3, {"id": 3, "name": "c", "bio": None}, 12), partition=1)
    s1 = p.run()
    assert s1["status"] == "committed" and s1["inserted"] == 3
    assert partitioning(p.spark, p.target) == ["bucket(4, id)", "name"]
    pr = props(p.spark, p.target)
    assert pr["sort-order"] == "name DESC NULLS LAST"
    assert (pr["write.merge.mode"], pr["write.delete.mode"], pr["format-version"]) == ("copy-on-write",
                                                                                         "merge-on-read", "2")
    assert (pr["write.distribution-mode"], pr["write.target-file-size-bytes"]) == ("hash", "1048576")
    snaps = summaries(p.spark, p.target)
    assert [op for op, _ in snaps] == ["append"]  # the MERGE into the empty table
    sm = snaps[-1][1]
    assert (sm["cdc.batch-id"], sm["cdc.pipeline"]) == (str(s1["batch_id"]), "tests")
    assert json.loads(sm["cdc.end-offsets"]) == {p.topic: {"0": 2, "1": 1}}
    files = p.spark.sql(f"SELECT partition FROM {p.target}.files").collect()
    assert sorted(f["partition"]["name"] for f in files) == ["a", "b", "c"]

    # Second run, same layout: no ALTER (no new metadata beyond the batch's own snapshot); update + delete carry ids.
    from cdc.iceberg.tables import apply_layout

    assert apply_layout(p.spark, p.target, p.table.layout) == []
    p.send(pg("u", 1, {"id": 1, "name": "a2", "bio": None}, 20), pg("d", 2, {"id": 2, "name": "b", "bio": None}, 21))
    s2 = p.run()
    assert (s2["updated"], s2["deleted"]) == (1, 1)
    later = [sm for _, sm in summaries(p.spark, p.target)][1:]
    assert later and all(sm.get("cdc.batch-id") == str(s2["batch_id"]) for sm in later)
    assert json.loads(later[-1]["cdc.end-offsets"]) == {p.topic: {"0": 4, "1": 1}}

    # Evolved layout: partition field swapped, sort order dropped, a property changed; a property no longer named
    # (write.merge.mode) stays as the table has it.
    with_layout(p, partition_by=["bucket(4, id)", "truncate(2, name)"], sort_by=[],
                properties={"write.target-file-size-bytes": 2097152})
    p.send(pg("c", 5, {"id": 5, "name": "eee", "bio": None}, 30))
    s3 = p.run()
    assert s3["inserted"] == 1
    assert partitioning(p.spark, p.target) == ["bucket(4, id)", "truncate(2, name)"]
    pr = props(p.spark, p.target)
    assert "sort-order" not in pr
    assert (pr["write.merge.mode"], pr["write.target-file-size-bytes"]) == ("copy-on-write", "2097152")
    assert apply_layout(p.spark, p.target, p.table.layout) == []
    with_layout(p)  # no layout keys at all: the table keeps its partitioning, and no statement runs
    assert apply_layout(p.spark, p.target, p.table.layout) == []
    assert p.run()["status"] == "empty" and partitioning(p.spark, p.target) == ["bucket(4, id)", "truncate(2, name)"]
    assert p.rows() == {1: ("a2", None), 3: ("c", None), 5: ("eee", None)}


def test_unknown_layout_column_fails_before_the_claim_naming_the_table(make_pipe):
    p = with_layout(make_pipe(), partition_by=["days(created_at)"])
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 10))
    with pytest.raises(ConfigError) as exc:
        p.run()
    assert f"table {p.table.target}: partition_by 'days(created_at)' names column 'created_at'" in str(exc.value)
    assert exc.value.exit_code == 2
    assert p.ledger() == [] and not p.spark.catalog.tableExists(p.target)
    with_layout(p, partition_by=["days(__ingested_at)"])  # fixed: the same batch goes through
    assert p.run()["inserted"] == 1
    assert partitioning(p.spark, p.target) == ["days(__ingested_at)"]


class _Died(Exception):
    """Stands in for a run dying after the batch was staged (not a CdcError: nothing is released)."""


def test_a_recovered_staged_batch_carries_its_offsets_in_the_snapshot_summary(make_pipe, monkeypatch):
    import cdc.run.batch

    p = make_pipe(partitions=2)
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 10), pg("c", 2, {"id": 2, "name": "b", "bio": None}, 11))
    p.send(pg("c", 3, {"id": 3, "name": "c", "bio": None}, 12), partition=1)

    def die_after_staged(point):
        if point == "after_staged":
            raise _Died(point)

    monkeypatch.setattr(cdc.run.batch, "checkpoint", die_after_staged)
    with pytest.raises(_Died):
        p.run()
    monkeypatch.undo()
    assert [r.status for r in p.ledger()] == ["staged", "staged"]
    s = p.run()  # finishes batch 1 from staging (no Kafka read), then finds nothing new
    assert (s["recovered_batch_id"], s["status"]) == (1, "empty")
    (op, sm), = summaries(p.spark, p.target)
    assert (sm["cdc.batch-id"], sm["cdc.pipeline"]) == ("1", "tests")
    assert json.loads(sm["cdc.end-offsets"]) == {p.topic: {"0": 2, "1": 1}}
