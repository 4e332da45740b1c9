"""Write modes end to end (real broker → Spark → Iceberg): ``append`` (changelog), ``scd2`` (history), keyless
tables. The randomized oracle covers both modes too (test_oracle.py: also on compacted topics and with PK changes
carrying TOAST placeholders)."""

from __future__ import annotations

from datetime import timezone

import pytest

from tests.integration.events import COLUMNS, PLACEHOLDER, pg, row, tombstone, with_header

pytestmark = pytest.mark.integration
T0 = 1700000000000  # events.pg: source.ts_ms = T0 + lsn


def truncate(lsn: int) -> tuple[None, bytes]:
    return None, pg("t", None, None, lsn)[1]


def changelog(p) -> list[tuple]:
    """(op, id, name, bio, lsn) of every append row, in position order."""
    rows = p.spark.sql(f"SELECT __op, id, name, bio, __lsn FROM {p.target} "
                       "ORDER BY __lsn, id, __op, __kafka_partition, __kafka_offset").collect()  # ties: c before d
    return [tuple(r) for r in rows]


def history(p) -> list[tuple]:
    """(id, name, bio, valid_from lsn, valid_to lsn, is_current, op) of every version."""
    rows = p.spark.sql(f"SELECT id, name, bio, __valid_from, __valid_to, __is_current, __op, __lsn FROM {p.target} "
                       "ORDER BY id, __lsn").collect()
    out = []
    for r in rows:
        start = round(r["__valid_from"].replace(tzinfo=timezone.utc).timestamp() * 1000) - T0
        end = None if r["__valid_to"] is None else round(
            r["__valid_to"].replace(tzinfo=timezone.utc).timestamp() * 1000) - T0
        assert start == r["__lsn"]  # valid_from is source.ts_ms of the starting change
        out.append((r["id"], r["name"], r["bio"], start, end, r["__is_current"], r["__op"]))
    return out



# ---------------------------------------------------------------------------------------------------- append

def test_append_keeps_every_distinct_change_once(make_pipe):
    p = make_pipe(partitions=2, write_mode="append")
    c1, u1 = pg("c", 1, row(1, "a", "long"), 10), pg("u", 1, row(1, "a2", PLACEHOLDER), 20)
    c2 = pg("c", 2, row(2, "b"), 15)
    p.send(c1, u1, c1, partition=0)  # a redelivery within the batch
    p.send(c2, partition=1)
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 3)
    p.send(u1, c1, pg("d", 1, row(1, "a2", "long"), 30), truncate(40), partition=0)  # replays + a delete, truncate
    p.send(pg("u", 2, row(2, "late", None), 12), partition=1)  # late: older than c2, still a change of the log
    s = p.run()
    assert s["inserted"] == 3
    assert changelog(p) == [
        ("c", 1, "a", "long", 10), ("u", 2, "late", None, 12), ("c", 2, "b", None, 15),
        ("u", 1, "a2", "long", 20),  # TOAST placeholder filled from the key's previous change
        ("d", 1, "a2", "long", 30), ("t", None, None, None, 40)]
    p.send(u1, pg("u", 1, row(1, "a3", PLACEHOLDER), 25), partition=0)  # TOAST from the table, late
    assert p.run()["inserted"] == 1
    assert ("u", 1, "a3", "long", 25) in changelog(p)
    assert p.run()["status"] == "empty"
    cols = {f.name for f in p.spark.table(p.target).schema.fields}
    assert {"__op", "__lsn", "__source_ts_ms", "__kafka_partition", "__kafka_offset", "__batch_id",
            "__ingested_at"} <= cols and "__valid_from" not in cols


def test_append_crash_after_merge_then_rerun_adds_nothing_twice(make_pipe):
    from tests.scenarios.harness import raise_at

    p = make_pipe(write_mode="append")
    p.send(*[pg("c", i, row(i, f"n{i}"), i) for i in range(1, 6)], pg("u", 3, row(3, "x"), 9))
    assert raise_at("after_merge", p.run)
    s = p.run()
    assert s["status"] == "empty" and s["recovered_batch_id"] == 1
    assert len(changelog(p)) == 6
    assert [r.status for r in p.ledger()] == ["committed"]


def test_keyless_topic_is_appended_with_a_warning(make_pipe):
    p = make_pipe()  # no primary_key, no write_mode; the records have no message key
    records = [(None, pg(op, 1, r, lsn)[1]) for op, r, lsn in
               [("c", row(1, "a"), 1), ("c", row(1, "a"), 2), ("u", row(1, "b"), 3), ("d", row(1, "b"), 4)]]
    p.send(*records)
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 4)
    assert any("no message key" in w and "append" in w for w in s["warnings"])
    p.send(records[1])  # keyless identity = partition/offset: the same change sent again is a new record
    assert p.run()["inserted"] == 1
    assert [(r["__op"], r["name"], r["__kafka_offset"]) for r in p.spark.sql(
        f"SELECT * FROM {p.target} ORDER BY __kafka_offset").collect()] == [
        ("c", "a", 0), ("c", "a", 1), ("u", "b", 2), ("d", "b", 3), ("c", "a", 4)]


def test_keyless_topic_refused_for_upsert_and_table_keeps_its_mode(make_pipe):
    from cdc.common.errors import ConfigError

    p = make_pipe(write_mode="upsert")
    p.send((None, pg("c", 1, row(1, "a"), 1)[1]))
    with pytest.raises(ConfigError, match="needs a primary key"):
        p.run()
    q = make_pipe(write_mode="append")
    q.send(pg("c", 1, row(1, "a"), 1))
    q.run()
    from dataclasses import replace

    q.cfg = replace(q.cfg, tables=(replace(q.table, write_mode="scd2"),))
    q.send(pg("u", 1, row(1, "b"), 2))
    with pytest.raises(ConfigError, match="created with write_mode append"):
        q.run()


# ---------------------------------------------------------------------------------------------------- scd2

def test_scd2_versions_late_changes_duplicates_reinsert_truncate(make_pipe):
    p = make_pipe(partitions=2, write_mode="scd2")
    p.send(pg("c", 1, row(1, "a", "long"), 10), pg("u", 1, row(1, "b", PLACEHOLDER), 30),
           pg("c", 1, row(1, "a", "long"), 10), partition=0)  # duplicate
    p.send(pg("r", 2, row(2, "x"), 5), partition=1)
    p.run()
    assert history(p) == [(1, "a", "long", 10, 30, False, "c"), (1, "b", "long", 30, None, True, "u"),
                          (2, "x", None, 5, None, True, "r")]
    # a late update between the two versions; a delete; a re-insert; replays of everything
    p.send(pg("u", 1, row(1, "late", PLACEHOLDER), 20), pg("d", 1, row(1, "b", "long"), 40),
           pg("c", 1, row(1, "again", "new"), 50), pg("u", 1, row(1, "b", PLACEHOLDER), 30), partition=0)
    p.run()
    assert history(p) == [(1, "a", "long", 10, 20, False, "c"), (1, "late", "long", 20, 30, False, "u"),
                          (1, "b", "long", 30, 40, False, "u"), (1, "again", "new", 50, None, True, "c"),
                          (2, "x", None, 5, None, True, "r")]
    p.send(truncate(60), partition=0)  # closes every current version
    p.send(pg("c", 3, row(3, "after"), 70), partition=1)
    p.run()
    assert [(h[0], h[3], h[4], h[5]) for h in history(p) if h[4] is None or h[4] >= 60] == [
        (1, 50, 60, False), (2, 5, 60, False), (3, 70, None, True)]
    assert p.run()["status"] == "empty"


def test_scd2_track_columns_update_in_place(make_pipe):
    p = make_pipe(write_mode="scd2", track_columns=["name"])
    p.send(pg("c", 1, row(1, "a", "b1"), 10), pg("u", 1, row(1, "a", "b2"), 20),  # bio only: in place
           pg("u", 1, row(1, "z", "b3"), 30))  # name changed: new version
    p.run()
    assert history(p) == [(1, "a", "b2", 10, 30, False, "c"), (1, "z", "b3", 30, None, True, "u")]
    p.send(pg("u", 1, row(1, "z", "b4"), 40), pg("u", 1, row(1, "a", "b2"), 20))  # in place; a replay
    p.run()
    assert history(p) == [(1, "a", "b2", 10, 30, False, "c"), (1, "z", "b4", 30, None, True, "u")]


@pytest.mark.parametrize("point", ["before_commit"])  # after_log: the subprocess test below; after_merge: oracle
def test_scd2_crash_then_rerun_gives_the_same_history(make_pipe, point):
    from tests.scenarios.harness import raise_at

    p = make_pipe(write_mode="scd2")
    p.send(pg("c", 1, row(1, "a"), 1), pg("c", 2, row(2, "b"), 2))
    p.run()
    p.send(pg("u", 1, row(1, "a2"), 3), pg("d", 2, row(2, "b"), 4), pg("u", 1, row(1, "a3"), 5))
    assert raise_at(point, p.run)
    s = p.run()
    assert s["recovered_batch_id"] == 2 and s["status"] == "empty"
    assert history(p) == [(1, "a", None, 1, 3, False, "c"), (1, "a2", None, 3, 5, False, "u"),
                          (1, "a3", None, 5, None, True, "u"), (2, "b", None, 2, 4, False, "c")]
    assert [r.status for r in p.ledger()] == ["committed", "committed"]


def test_maintenance_keeps_append_and_scd2_tables_working(make_pipe):
    """Maintenance (zero retention: staging dropped, snapshots expired, files rewritten) leaves both modes' tables
    as they were, and a late change afterwards still lands at its place in the history (the change log stays)."""
    import argparse
    from datetime import datetime, timedelta
    from datetime import timezone as tz

    from tests.scenarios.harness import _maintenance

    args = argparse.Namespace(config="-", table=[], staging_retention_hours=0, tombstone_retention_hours=0,
                              snapshot_retention_hours=0, retain_last=1, orphan_retention_hours=1e6)
    for mode in ("append", "scd2"):
        p = make_pipe(write_mode=mode)
        p.send(pg("c", 1, row(1, "a"), 1), pg("u", 1, row(1, "b"), 5), pg("d", 1, row(1, "b"), 9))
        p.run()
        before = changelog(p) if mode == "append" else history(p)
        m = _maintenance().Maintenance(p.spark, p.cfg, args, datetime.now(tz.utc) + timedelta(days=1))
        m.run(p.cfg.tables)
        assert not [s for s in m.steps if s["error"]], m.steps
        assert {s["action"] for s in m.steps} >= {"drop_committed_batches", "expire_snapshots"}
        p.spark.catalog.refreshTable(p.target)
        assert (changelog(p) if mode == "append" else history(p)) == before
        p.send(pg("u", 1, row(1, "late"), 3))
        p.run()
        if mode == "append":
            assert changelog(p) == [("c", 1, "a", None, 1), ("u", 1, "late", None, 3), ("u", 1, "b", None, 5),
                                    ("d", 1, "b", None, 9)]
        else:
            assert history(p) == [(1, "a", None, 1, 3, False, "c"), (1, "late", None, 3, 5, False, "u"),
                                  (1, "b", None, 5, 9, False, "u")]


def test_scd2_job_process_killed_after_the_change_log_then_rerun(make_pipe, tmp_path):
    """A real ``jobs/ingest.py`` SIGKILLs itself (``CDC_KILL_AT``, cdc.common.faults) between the change-log MERGE and the
    target MERGE; the next run takes the batch over and the history is the uninterrupted one."""
    import signal

    import yaml

    from tests.integration.cli import run_cli

    p = make_pipe(write_mode="scd2")
    p.send(pg("c", 1, row(1, "a"), 1), pg("u", 1, row(1, "b"), 3), pg("c", 2, row(2, "x"), 2),
           pg("d", 2, row(2, "x"), 4), pg("u", 1, row(1, "b"), 3))
    raw = {"pipeline": "tests", "kafka": dict(p.cfg.kafka), "format": "json",
           "catalog": {"name": "lake", "type": "hadoop", "warehouse": p.cfg.catalog.warehouse},
           "metadata_namespace": p.cfg.metadata_namespace, "batch": {"read_timeout_seconds": 20},
           "tables": [{"topic": p.topic, "target": p.table.target, "write_mode": "scd2"}]}
    path = tmp_path / "scd2.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = run_cli(path, env={"CDC_KILL_AT": "after_log"})
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    for t in (p.target, f"lake.{p.cfg.metadata_namespace}.ledger"):
        p.spark.catalog.refreshTable(t)
    s = p.run()
    assert s["recovered_batch_id"] == 1 and s["status"] == "empty"
    assert history(p) == [(1, "a", None, 1, 3, False, "c"), (1, "b", None, 3, None, True, "u"),
                          (2, "x", None, 2, 4, False, "c")]


# ---------------------------------------------------------------------------------------------------- ties, new columns

def test_different_changes_of_a_key_at_one_source_position_are_all_kept(make_pipe):
    """Oracle redo records share SCNs (rs_id/ssn, no ordering fields, tell them apart) and a MongoDB transaction's
    events share their cluster time: two updates of one row in one transaction can carry the same position. Both are
    changes, in Kafka order; a redelivery of either (same image, later offset, any batch) still counts once."""
    from tests.integration.events import oracle

    c, u1, u2 = (oracle(op, 1, row(1, n), scn, scn + 5) for op, n, scn in [("c", "a", 100), ("u", "b", 110),
                                                                            ("u", "c", 110)])
    for mode in ("append", "scd2"):
        p = make_pipe(write_mode=mode)
        p.send(c, u1, u2, u1)
        p.run()
        p.send(u2, u1, c)
        assert p.run()["inserted"] == 0
        cols = "name, __op, __is_current" if mode == "scd2" else "name, __op"
        got = [tuple(r) for r in p.spark.sql(f"SELECT {cols} FROM {p.target} ORDER BY __kafka_offset").collect()]
        want = [("a", "c", False), ("b", "u", False), ("c", "u", True)]
        assert got == (want if mode == "scd2" else [w[:2] for w in want]), mode


def test_a_column_added_at_the_source_reaches_append_and_scd2_tables(make_pipe):
    """Schema evolution: a column added in batch 2 becomes a column of the append table, of the scd2 target and of
    its change log; changes from before it (and late ones without it) have it NULL."""
    wide = [*COLUMNS, ("email", "string", True)]
    for mode in ("append", "scd2"):
        p = make_pipe(write_mode=mode)
        p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11))
        p.run()
        p.send(pg("u", 1, {**row(1, "a2"), "email": "a@x"}, 20, wide), pg("c", 3, {**row(3, "c"), "email": "c@x"}, 21,
                                                                         wide))
        p.run()
        p.send(pg("u", 2, row(2, "b2"), 30))  # an event still without the column
        p.run()
        got = p.spark.sql(f"SELECT id, name, email, __lsn FROM {p.target} ORDER BY id, __lsn").collect()
        assert [tuple(r) for r in got] == [(1, "a", None, 10), (1, "a2", "a@x", 20), (2, "b", None, 11),
                                           (2, "b2", None, 30), (3, "c", "c@x", 21)], mode
        if mode == "scd2":
            assert [(h[0], h[1], h[5]) for h in history(p)] == [(1, "a", False), (1, "a2", True), (2, "b", False),
                                                                 (2, "b2", True), (3, "c", True)]
            log = f"lake.{p.cfg.metadata_namespace}.changes__{p.table.target.replace('.', '__')}"
            assert "email" in p.spark.table(log).columns


# ---------------------------------------------------------------------------------------------------- compacted topics

COMPACT = {"cleanup.policy": "compact"}


def compacted_batches(p) -> None:
    """Batch 1: creates of 1, 2, 4, 5. Batch 2: compaction removed the d events of 1, 3, 4, 5 (tombstones left);
    key 2's d is still there; key 4 moved partitions (its newer change stays). Batch 3: key 5's real delete turns up
    (a redelivery in the same partition) and key 1's tombstone is redelivered."""
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 4, row(4, "moves"), 12),
           pg("c", 5, row(5, "e"), 13), partition=0)
    p.run()
    p.send(tombstone(1), pg("c", 3, row(3, "c"), 30), tombstone(3), tombstone(4), pg("d", 2, row(2, "b"), 20),
           tombstone(2), tombstone(5), tombstone(6), partition=0)  # 6: nothing known of it, ignored
    p.send(pg("u", 4, row(4, "moved"), 50), partition=1)
    p.run()


def test_append_on_a_compacted_topic_a_kafka_tombstone_appends_its_delete_once(make_pipe):
    p = make_pipe(partitions=2, write_mode="append", topic_config=COMPACT)
    compacted_batches(p)
    assert sorted(changelog(p), key=str) == sorted([
        ("c", 1, "a", None, 10), ("d", 1, None, None, 10),  # at the position of the change it followed
        ("c", 2, "b", None, 11), ("c", 4, "moves", None, 12), ("d", 4, None, None, 12),
        ("c", 5, "e", None, 13), ("d", 5, None, None, 13),
        ("d", 2, "b", None, 20),  # the real d is there: no second one
        ("c", 3, "c", None, 30), ("d", 3, None, None, 30), ("u", 4, "moved", None, 50)], key=str)
    compacted = p.spark.sql(f"SELECT __kafka_partition, __source_ts_ms FROM {p.target} WHERE id = 3 AND __op = 'd'")
    assert [tuple(r) for r in compacted.collect()] == [(2147483647, T0 + 30)]
    p.send(tombstone(1), pg("d", 5, row(5, "e"), 25), partition=0)
    s = p.run()
    assert (s["inserted"], s["deleted"]) == (1, 1)  # key 5's real delete replaces the compacted one
    rows = changelog(p)
    assert ("d", 5, "e", None, 25) in rows and ("d", 5, None, None, 13) not in rows
    assert len(rows) == 11 and rows.count(("d", 1, None, None, 10)) == 1
    p.run(mode="backfill", bounds=_bounds(p.topic, {0: 0, 1: 0}))  # a replay of everything adds nothing
    assert changelog(p) == rows


def test_scd2_on_a_compacted_topic_a_kafka_tombstone_closes_the_current_version(make_pipe):
    p = make_pipe(partitions=2, write_mode="scd2", topic_config=COMPACT)
    compacted_batches(p)
    assert history(p) == [
        (1, "a", None, 10, 10, False, "c"),  # closed at the time of the change the tombstone followed
        (2, "b", None, 11, 20, False, "c"), (3, "c", None, 30, 30, False, "c"),
        (4, "moves", None, 12, 12, False, "c"), (4, "moved", None, 50, None, True, "u"),  # the newer change wins
        (5, "e", None, 13, 13, False, "c")]
    p.send(tombstone(1), pg("d", 5, row(5, "e"), 25), pg("c", 1, row(1, "again"), 60), partition=0)
    p.run()
    assert history(p)[:2] == [(1, "a", None, 10, 10, False, "c"), (1, "again", None, 60, None, True, "c")]
    assert history(p)[-1] == (5, "e", None, 13, 25, False, "c")  # the real delete's time


def _bounds(topic: str, start: dict[int, int]):
    from tests.scenarios.test_correctness_scenarios import _bounds as bounds

    return bounds(topic, start=start)


# ---------------------------------------------------------------------------------------------------- PK changes + TOAST

OLD, NEW = "__debezium.oldkey", "__debezium.newkey"


def moved_delete(old: int, lsn: int):  # UPDATE ... SET id = <new> WHERE id = <old>, REPLICA IDENTITY DEFAULT
    return pg("d", old, {"id": old, "name": None, "bio": None}, lsn)


def pk_moves(p) -> None:
    """Batch 1: 1 and 3 created with a TOASTed bio. Batch 2: 1 → 2 in one batch (headers), 3 → 4 without headers
    (the delete at the same position tells), 2 → 5 chained. Batch 3: 5 → 6 whose create arrives before its delete
    (another partition) and takes key 5's value from what is stored."""
    p.send(pg("c", 1, row(1, "a", "long 1"), 10), pg("c", 3, row(3, "c", "long 3"), 11),
           pg("u", 3, row(3, "c2", PLACEHOLDER), 12), partition=0)
    p.run()
    p.send(with_header(moved_delete(1, 20), NEW, 2), tombstone(1), with_header(pg("c", 2, row(2, "a", PLACEHOLDER), 20), OLD, 1),
           moved_delete(3, 21), tombstone(3), pg("c", 4, row(4, "c2", PLACEHOLDER), 21),
           with_header(moved_delete(2, 22), NEW, 5), with_header(pg("c", 5, row(5, "a", PLACEHOLDER), 22), OLD, 2),
           partition=0)
    p.run()
    p.send(with_header(pg("c", 6, row(6, "z", PLACEHOLDER), 30), OLD, 5), partition=1)
    p.run()
    p.send(with_header(moved_delete(5, 30), NEW, 6), tombstone(5), partition=0)
    p.run()


def test_append_pk_change_create_takes_the_old_keys_toast_value(make_pipe):
    p = make_pipe(partitions=2, write_mode="append")
    pk_moves(p)
    got = {(r[0], r[1]): r[3] for r in changelog(p) if r[0] == "c"}
    assert got == {("c", 1): "long 1", ("c", 3): "long 3", ("c", 2): "long 1", ("c", 4): "long 3",
                   ("c", 5): "long 1", ("c", 6): "long 1"}


def test_scd2_pk_change_create_takes_the_old_keys_toast_value(make_pipe):
    p = make_pipe(partitions=2, write_mode="scd2")
    pk_moves(p)
    assert [(h[0], h[2], h[4]) for h in history(p)] == [
        (1, "long 1", 20), (2, "long 1", 22), (3, "long 3", 12), (3, "long 3", 21), (4, "long 3", None),
        (5, "long 1", 30), (6, "long 1", None)]


# ---------------------------------------------------------------------------------------------------- stale writers

def test_scd2_a_stale_writer_cannot_corrupt_the_history(make_pipe, monkeypatch):
    """A run that lost its claim merges late: between its classification and its MERGE another owner took the batch
    over and committed a newer batch (versions from lsn 30). The stale run's actions for keys a newer batch wrote
    are dropped (the history stays the newer owner's); a key no newer batch wrote still gets them."""
    import cdc.merge.apply

    p = make_pipe(write_mode="scd2")
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "stale"), 20), pg("d", 2, row(2, "b"), 20), pg("c", 3, row(3, "c"), 20))
    newer = [  # (id, name, from, to, op, batch): batch 2 as the stale run computes it, then batch 3 (lsn 30)
        (1, "a", 10, 20, "c", 2), (1, "stale", 20, 30, "u", 2), (1, "new", 30, None, "u", 3),
        (2, "b", 10, 20, "c", 2), (2, "new", 30, None, "c", 3)]

    def newer_owner_commits(point):
        if point != "after_classify":
            return
        cols = p.spark.table(p.target).columns
        sel = []
        for i, name, start, end, op, batch in newer:
            v = {"id": str(i), "name": f"'{name}'", "__valid_from": f"timestamp_millis({T0 + start})",
                 "__valid_to": "CAST(NULL AS TIMESTAMP)" if end is None else f"timestamp_millis({T0 + end})",
                 "__is_current": str(end is None).lower(), "__op": f"'{op}'", "__source_ts_ms": str(T0 + start),
                 "__kafka_partition": "0", "__kafka_offset": str(start), "__batch_id": str(batch),
                 "__ingested_at": "current_timestamp()"}
            sel.append("SELECT " + ", ".join(f"{v.get(c, str(start) if c.startswith('__') else 'NULL')} AS `{c}`"
                                             for c in cols))
        p.spark.sql(f"DELETE FROM {p.target} WHERE id IN (1, 2)")
        p.spark.sql(f"INSERT INTO {p.target} " + " UNION ALL ".join(sel))

    monkeypatch.setattr(cdc.merge.apply, "checkpoint", newer_owner_commits)
    p.run()
    assert history(p) == [
        (1, "a", None, 10, 20, False, "c"), (1, "stale", None, 20, 30, False, "u"), (1, "new", None, 30, None, True, "u"),
        (2, "b", None, 10, 20, False, "c"), (2, "new", None, 30, None, True, "c"),
        (3, "c", None, 20, None, True, "c")]
