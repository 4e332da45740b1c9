"""Every merge rule, end to end: real broker → Spark reader → staging → MERGE → Iceberg table → ledger."""

from __future__ import annotations

import re

import pytest

from tests.integration.events import PLACEHOLDER, mysql, pg, tombstone
from tests.scenarios.harness import MERGE_PATHS

pytestmark = pytest.mark.integration


# How a batch meets the target (and tombstones): joined whole (the default for targets this small: in one Spark
# task, cdc.merge.sql.relation), joined whole with the target broadcast, cut to the batch's keys first (cdc.merge.sql.near),
# or in addition with a bloom filter on the MERGE's target scan (cdc.merge.bloom): the default for targets of 1M rows
KEY_FILTER = pytest.mark.parametrize("key_filter", list(MERGE_PATHS.values()), ids=list(MERGE_PATHS))


@KEY_FILTER
def test_inserts_updates_deletes_across_batches(make_pipe, key_filter):
    p = make_pipe(batch=key_filter)
    p.send(pg("r", 1, {"id": 1, "name": "a", "bio": "x"}, 10), pg("r", 2, {"id": 2, "name": "b", "bio": "y"}, 10),
           pg("c", 3, {"id": 3, "name": "c", "bio": "z"}, 20))
    s1 = p.run()
    assert (s1["status"], s1["inserted"], s1["events_read"]) == ("committed", 3, 3)
    p.send(pg("u", 1, {"id": 1, "name": "a2", "bio": "x"}, 30), pg("d", 2, {"id": 2, "name": "b", "bio": "y"}, 40),
           tombstone(2))
    s2 = p.run()
    assert (s2["inserted"], s2["updated"], s2["deleted"], s2["events_skipped"]) == (0, 1, 1, 1)
    assert p.rows() == {1: ("a2", "x"), 3: ("c", "z")}
    assert p.run()["status"] == "empty"
    ledger = p.ledger()
    assert [(r.batch_id, r.start_offset, r.end_offset, r.status) for r in ledger] == [
        (1, 0, 3, "committed"), (2, 3, 6, "committed")]


def test_newest_event_per_key_wins_within_a_batch_and_duplicates_are_harmless(make_pipe):
    p = make_pipe()
    e1, e2 = pg("c", 1, {"id": 1, "name": "v1", "bio": None}, 10), pg("u", 1, {"id": 1, "name": "v2", "bio": None}, 20)
    p.send(e1, e2, e1, e2, e1)  # redelivered duplicates after the newest event
    assert p.run()["inserted"] == 1
    assert p.rows() == {1: ("v2", None)}
    p.send(e1, e2)  # replay in a later batch: e1 is older → ignored; e2 ties on position, later offset → re-applied
    s = p.run()
    assert (s["inserted"], s["updated"]) == (0, 1)
    assert p.rows() == {1: ("v2", None)}
    assert p.rows("__lsn", "__kafka_offset") == {1: (20, 6)}


@KEY_FILTER
def test_out_of_order_delete_is_not_resurrected(make_pipe, key_filter):
    """insert lsn 1, delete lsn 3, update lsn 2 in separate batches → the row stays deleted."""
    p = make_pipe(batch=key_filter)
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1))
    p.run()
    p.send(pg("d", 1, {"id": 1, "name": "a", "bio": None}, 3))
    assert p.run()["deleted"] == 1
    p.send(pg("u", 1, {"id": 1, "name": "late", "bio": None}, 2))
    s = p.run()
    assert (s["inserted"], s["updated"]) == (0, 0)
    assert p.rows() == {}
    p.send(pg("c", 1, {"id": 1, "name": "again", "bio": None}, 4))  # a genuinely newer insert comes back
    p.run()
    assert p.rows() == {1: ("again", None)}


def test_soft_delete_keeps_the_row_flagged_and_blocks_older_events(make_pipe):
    p = make_pipe(delete_mode="soft")
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1), pg("c", 2, {"id": 2, "name": "b", "bio": None}, 2))
    p.run()
    p.send(pg("d", 1, {"id": 1, "name": "a", "bio": None}, 5))
    p.run()
    p.send(pg("u", 1, {"id": 1, "name": "late", "bio": None}, 4))
    p.run()
    assert p.rows("name", "__deleted", "__op") == {1: ("a", True, "d"), 2: ("b", False, "c")}


@KEY_FILTER
def test_toast_placeholder_keeps_value_from_batch_and_from_table(make_pipe, key_filter):
    p = make_pipe(batch=key_filter)
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": "long text"}, 1),
           pg("u", 1, {"id": 1, "name": "a2", "bio": PLACEHOLDER}, 2))  # carry within the batch
    p.run()
    assert p.rows() == {1: ("a2", "long text")}
    p.send(pg("u", 1, {"id": 1, "name": "a3", "bio": PLACEHOLDER}, 3))  # carry from the table
    p.run()
    assert p.rows() == {1: ("a3", "long text")}
    p.send(pg("u", 1, {"id": 1, "name": "a4", "bio": None}, 4))  # a real NULL is a value, not a placeholder
    p.run()
    assert p.rows() == {1: ("a4", None)}


def test_truncate_removes_older_rows_and_later_events_apply(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 1), pg("c", 2, {"id": 2, "name": "b", "bio": None}, 2))
    p.run()
    p.send(pg("u", 1, {"id": 1, "name": "a2", "bio": None}, 3), pg("t", None, None, 4),
           pg("c", 3, {"id": 3, "name": "c", "bio": None}, 5))
    s = p.run()
    assert p.rows() == {3: ("c", None)}
    assert s["deleted"] == 2
    p.send(pg("u", 2, {"id": 2, "name": "late", "bio": None}, 3))  # older than the truncate: ignored
    p.run()
    assert p.rows() == {3: ("c", None)}


def test_mysql_binlog_rotation_orders_by_file_then_pos(make_pipe):
    p = make_pipe()
    p.send(mysql("c", 1, {"id": 1, "name": "old-file", "bio": None}, "mysql-bin.000009", 90000))
    p.run()
    p.send(mysql("u", 1, {"id": 1, "name": "new-file", "bio": None}, "mysql-bin.000010", 4),
           mysql("u", 1, {"id": 1, "name": "stale", "bio": None}, "mysql-bin.000009", 90010))
    p.run()
    assert p.rows() == {1: ("new-file", None)}
    assert p.rows("__binlog_file_seq", "__binlog_pos") == {1: (10, 4)}


def test_events_spread_over_partitions_are_read_in_parallel_and_ordered_by_lsn(make_pipe):
    p = make_pipe(partitions=3)
    for part in range(3):
        p.send(*[pg("c", part * 100 + i, {"id": part * 100 + i, "name": f"n{i}", "bio": None}, 10 + i)
                 for i in range(50)], partition=part)
    s = p.run()
    assert s["inserted"] == 150 and len(s["ranges"]) == 3
    assert len(p.rows()) == 150


def test_the_key_filter_reads_the_target_without_shuffling_it_and_keeps_exactly_the_batchs_keys(make_pipe):
    """What ``cdc.merge.sql.near`` hands the classification: the target's rows of the batch's keys, found by a
    broadcast semi-join (a scan of the target, no sort-merge join that would shuffle all of it)."""
    from cdc.merge.sql import MergeSpec, near

    p = make_pipe()
    p.send(*(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 41)))
    p.run()
    spec = MergeSpec(target=p.target, staging="unused", tombstones=None, batch_id=2, key=("id",),
                     columns=("id", "name", "bio"), ordering=("__lsn",), key_filter=True)
    batch = "SELECT id FROM VALUES (3), (17), (17), (99) AS v(id)"
    cut = f"SELECT id, name FROM {near(spec, p.target, batch)}"
    assert sorted(tuple(r) for r in p.spark.sql(cut).collect()) == [(3, "n3"), (17, "n17")]
    plan = "\n".join(r[0] for r in p.spark.sql("EXPLAIN " + cut).collect())
    assert "BroadcastHashJoin" in plan and "LeftSemi" in plan and "SortMergeJoin" not in plan, plan
    whole = MergeSpec(**{**spec.__dict__, "key_filter": False})
    assert near(whole, p.target, batch) == p.target


def test_only_a_large_targets_join_is_cut_to_the_batchs_keys(make_pipe, monkeypatch):
    """``batch.key_filter_min_target_rows``: the classification cuts a target of that many rows (and the tombstones)
    to the batch's keys; a smaller target is joined whole (the cut's own Spark jobs would cost more). Same rows."""
    import cdc.merge.apply

    statements: list[str] = []
    classify_sql = cdc.merge.apply.classify_sql

    def recorded(spec, newest):
        statements.append(classify_sql(spec, newest))
        return statements[-1]

    monkeypatch.setattr(cdc.merge.apply, "classify_sql", recorded)
    for threshold, cut in ((31, False), (30, True)):  # the target holds 30 rows when the second batch merges
        p = make_pipe(batch={"key_filter_min_target_rows": threshold})
        p.send(*(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 31)))
        p.run()
        p.send(pg("u", 5, {"id": 5, "name": "five", "bio": "b"}, 40),
               pg("d", 7, {"id": 7, "name": "n7", "bio": None}, 41),
               pg("u", 9, {"id": 9, "name": "old", "bio": None}, 3))  # older than the table's row: skipped
        s = p.run()
        assert (s["inserted"], s["updated"], s["deleted"]) == (0, 1, 1)
        assert statements[-1].count("LEFT SEMI JOIN") == (2 if cut else 0), statements[-1]
        rows = p.rows("name", "bio")
        assert len(rows) == 29 and 7 not in rows and rows[5] == ("five", "b") and rows[9] == ("n9", None)


def thirty_rows_then_four_changes(p) -> None:
    """Batch 1: keys 1-30; batch 2 (into a target of 30 rows): an update, a delete, an insert and an update older
    than the table's row (skipped)."""
    p.send(*(pg("c", i, {"id": i, "name": f"n{i}", "bio": None}, i) for i in range(1, 31)))
    p.run()
    p.send(pg("u", 5, {"id": 5, "name": "five", "bio": "b"}, 40),
           pg("d", 7, {"id": 7, "name": "n7", "bio": None}, 41),
           pg("c", 31, {"id": 31, "name": "n31", "bio": None}, 42),
           pg("u", 9, {"id": 9, "name": "old", "bio": None}, 3))  # older than the table's row: skipped
    s = p.run()
    assert (s["inserted"], s["updated"], s["deleted"]) == (1, 1, 1), s


def test_a_small_batch_into_a_small_target_is_classified_in_one_task_with_the_same_rows(make_pipe, monkeypatch):
    """``batch.one_task_max_target_rows``: a batch the driver could read, into a target (and tombstones) of at most
    that many rows, is classified without a shuffle or a broadcast (every table one partition, hash joins: one Spark
    task, ``cdc.merge.sql.relation``); a larger target is broadcast as before. The same rows either way."""
    import cdc.merge.apply

    plans: list[str] = []
    classify_sql = cdc.merge.apply.classify_sql

    def explained(spec, newest):
        stmt = classify_sql(spec, newest)
        plans.append("\n".join(r[0] for r in p.spark.sql("EXPLAIN " + stmt).collect()))
        return stmt

    monkeypatch.setattr(cdc.merge.apply, "classify_sql", explained)
    for threshold, one_task in ((30, True), (29, False)):  # the target holds 30 rows when the second batch merges
        p = make_pipe(batch={"one_task_max_target_rows": threshold})
        thirty_rows_then_four_changes(p)
        plan = plans[-1]
        if one_task:
            assert "Exchange" not in plan and plan.count("ShuffledHashJoin") == 2, plan
        else:
            assert "BroadcastExchange" in plan and "ShuffledHashJoin" not in plan, plan
        rows = p.rows("name", "bio")
        assert len(rows) == 30 and 7 not in rows and rows[5] == ("five", "b") and rows[9] == ("n9", None)
        assert rows[31] == ("n31", None)


def bloom_filtered_scans(plan: str) -> set[str]:
    """The tables whose scan a plan filters with a runtime bloom filter (``might_contain(..., xxhash64(<column>``)."""
    columns = set(re.findall(r"might_contain\(.*?xxhash64\(([^,]+),", plan))
    return {table for table, read in re.findall(r"BatchScan (\S+?)\[([^\]]*)\]", plan)
            if columns & set(read.split(", "))}


def test_a_large_targets_merge_shuffles_only_the_batchs_keys_by_a_bloom_filter_on_its_scan(make_pipe, monkeypatch):
    """``batch.bloom_filter_min_target_rows``: the MERGE into a target of that many rows puts a bloom filter of the
    batch's keys (Spark's runtime filter, ``might_contain``) on the target's scan; a smaller target's scan has
    none. Same rows either way, and the session's settings are back after the MERGE (``row_deltas: false``: this
    small batch would otherwise be written without a MERGE, ``cdc.merge.target_write``)."""
    import cdc.merge.apply

    plans: list[str] = []
    merge_target_sql = cdc.merge.apply.merge_target_sql

    def explained(spec, source, **kw):
        stmt = merge_target_sql(spec, source, **kw)
        plans.append("\n".join(r[0] for r in p.spark.sql("EXPLAIN " + stmt).collect()))
        return stmt

    monkeypatch.setattr(cdc.merge.apply, "merge_target_sql", explained)
    broadcast = "spark.sql.autoBroadcastJoinThreshold"
    for threshold, bloom in ((31, False), (30, True)):  # the target holds 30 rows when the second batch merges
        p = make_pipe(batch={"bloom_filter_min_target_rows": threshold, "row_deltas": False})
        before = p.spark.conf.get(broadcast)
        thirty_rows_then_four_changes(p)
        assert (p.target in bloom_filtered_scans(plans[-1])) == bloom, plans[-1]
        rows = p.rows("name", "bio")
        assert len(rows) == 30 and 7 not in rows and rows[5] == ("five", "b") and rows[9] == ("n9", None)
        assert p.spark.conf.get(broadcast) == before


@pytest.mark.parametrize("path", ["whole", "key-filter", "merge"])
def test_a_small_batch_writes_its_tombstones_as_one_row_delta_and_they_fence_as_the_merge_does(make_pipe, path):
    """A batch the driver read writes its tombstones through Iceberg's API (``cdc.merge.tombstone_write``: a row delta,
    no Spark MERGE, so no ``spark.app.id`` in the snapshot's summary), replacing a key's older tombstone; with
    ``driver_read_max_records: 0`` the MERGE writes them. Either way: one tombstone per key at its newest delete,
    and a late older change cannot resurrect the row."""
    from cdc.config.names import names

    batch = {"whole": {}, "key-filter": MERGE_PATHS["key-filter"], "merge": {"driver_read_max_records": 0}}[path]
    p = make_pipe(batch=batch)
    tombstones = names(p.cfg, p.table).tombstones
    p.send(pg("c", 1, {"id": 1, "name": "a", "bio": None}, 10), pg("c", 2, {"id": 2, "name": "b", "bio": None}, 11))
    p.run()
    p.send(pg("d", 1, {"id": 1, "name": "a", "bio": None}, 20), pg("d", 9, {"id": 9, "name": "x", "bio": None}, 21))
    assert p.run()["deleted"] == 1  # 9 had no row: remembered only
    p.send(pg("c", 1, {"id": 1, "name": "again", "bio": None}, 30))
    p.run()
    p.send(pg("d", 1, {"id": 1, "name": "again", "bio": None}, 40), pg("d", 2, {"id": 2, "name": "b", "bio": None}, 41))
    assert p.run()["deleted"] == 2
    spark = p.spark
    spark.catalog.refreshTable(tombstones)
    got = sorted(tuple(r) for r in spark.sql(f"SELECT id, __lsn, __kafka_offset FROM {tombstones}").collect())
    assert got == [(1, 40, 5), (2, 41, 6), (9, 21, 3)]
    summaries = [r[0] for r in spark.sql(f"SELECT summary FROM {tombstones}.snapshots ORDER BY committed_at").collect()]
    by_spark = ["spark.app.id" in s for s in summaries]
    assert by_spark == ([True, True] if path == "merge" else [False, False])
    if path != "merge":
        assert summaries[1]["added-position-deletes"] == "1"  # key 1's first tombstone, replaced
    p.send(pg("u", 1, {"id": 1, "name": "late", "bio": None}, 35),
           pg("c", 9, {"id": 9, "name": "late", "bio": None}, 15))
    late = p.run()
    assert (late["inserted"], late["updated"], late["events_read"]) == (0, 0, 2)
    assert p.rows() == {}
