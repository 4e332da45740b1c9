"""Compacted topics on the real broker, Spark and Iceberg: a Kafka tombstone deletes its key's row whatever brought
the row, unless the row came from a later record of the tombstone's partition (``cdc.merge.compaction``): rows of a
JDBC bootstrap (partition -1), rows from before a ``--reset-cursor`` (the old topic's offsets, higher than the new
one's), rows from another partition (partitions were added); in upsert, append and scd2 mode."""

from __future__ import annotations

import time

import pytest

from tests.integration.events import pg, row, tombstone

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


def recreate_topic(p, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    """Delete the pipe's topic and create it again (its offsets restart at 0, as after a topic was re-created or
    the cluster moved)."""
    admin = p.broker.admin()  # kept alive until its futures resolve
    for f in admin.delete_topics([p.topic]).values():
        f.result(10)
    deadline = time.monotonic() + 30
    while True:
        try:
            p.broker.create_topic(p.topic, partitions=partitions, config=config)
            return
        except Exception:  # noqa: BLE001 - the deletion may still be in progress
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def add_partitions(p, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    admin = p.broker.admin()  # kept alive until its futures resolve
    for f in admin.create_partitions([NewPartitions(p.topic, total)]).values():
        f.result(10)
    deadline = time.monotonic() + 20
    while len(admin.list_topics(topic=p.topic, timeout=10).topics[p.topic].partitions) < total:
        assert time.monotonic() < deadline, "the new partitions did not show up"
        time.sleep(0.2)


def bootstrapped(p, rows: list[dict], horizon: tuple[int, int], soft: bool = False) -> None:
    """The target as a PostgreSQL JDBC bootstrap leaves it (``cdc.bootstrap.job``): its rows at the horizon with
    Kafka partition/offset -1, and its ledger row."""
    import pyarrow as pa

    from cdc.bootstrap.job import with_meta, write_ledger_row
    from cdc.config.names import names
    from cdc.iceberg.tables import TargetState, ensure_target
    from cdc.ledger.model import bootstrap_row
    from cdc.ledger.tables import ensure_meta_tables
    from cdc.schema.columns import POSTGRES_COMMIT_ORDERING, Column

    ensure_meta_tables(p.spark, p.cfg)
    cols = [Column("id", pa.int32(), False), Column("name", pa.string()), Column("bio", pa.string())]
    ensure_target(p.spark, TargetState(p.target, exists=False), cols, ("id",), POSTGRES_COMMIT_ORDERING, soft)
    df = p.spark.createDataFrame([(r["id"], r["name"], r["bio"]) for r in rows], "id int, name string, bio string")
    with_meta(df, POSTGRES_COMMIT_ORDERING, horizon, 1, 1700000000000, soft).writeTo(p.target).append()
    write_ledger_row(p.spark, names(p.cfg, p.table).ledger, bootstrap_row(
        p.cfg.pipeline, p.table.target, p.topic, 1, horizon, len(rows), None, "boot", "test", {}))


def live(p) -> dict[int, str]:
    """id → name of the target's rows that are not (soft-)deleted."""
    p.spark.catalog.refreshTable(p.target)
    df = p.spark.table(p.target)
    if "__deleted" in df.columns:
        df = df.where("NOT __deleted")
    return {r["id"]: r["name"] for r in df.collect()}


def reset_to_a_new_topic(p, records: list, partitions: int = 1) -> None:
    """The topic re-created (its offsets restart at 0, below the cursor), ``records`` written to it, the cursor
    reset (``--reset-cursor``)."""
    recreate_topic(p, partitions)
    p.send(*records)
    assert p.run(mode="reset")["status"] == "reset"


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_a_tombstone_deletes_a_bootstrap_row_unless_the_batch_shows_it_came_before_the_horizon(make_pipe,
                                                                                                delete_mode):
    p = make_pipe(compacted=True, delete_mode=delete_mode)
    bootstrapped(p, [row(i, f"boot{i}") for i in (1, 2, 3, 4)], (50, 50), soft=delete_mode == "soft")
    p.send(tombstone(2), pg("c", 2, row(2, "re-created before the snapshot"), 40),  # 2: deleted and back by then
           pg("c", 5, row(5, "e"), 60), tombstone(3),  # 3: its d (after the snapshot) was compacted away
           tombstone(4))  # 4: likewise, with nothing after it
    s = p.run()
    assert (s["status"], s["deleted"]) == ("committed", 2)
    assert live(p) == {1: "boot1", 2: "boot2", 5: "e"}
    p.send(pg("u", 3, row(3, "an old change, replayed"), 45), pg("c", 4, row(4, "again"), 70))
    p.run()
    assert live(p) == {1: "boot1", 2: "boot2", 4: "again", 5: "e"}


def test_a_tombstone_deletes_a_row_from_before_a_cursor_reset_whose_old_offset_is_higher(make_pipe):
    p = make_pipe(compacted=True)
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12),
           pg("c", 4, row(4, "d"), 13), pg("u", 4, row(4, "d2"), 14), pg("c", 6, row(6, "f"), 15))  # cursor 6
    p.run()
    # the new cluster: key 4 and 3 deleted (their d events compacted away), tombstones at offsets 1 and 2
    reset_to_a_new_topic(p, [pg("c", 5, row(5, "e"), 100), tombstone(4), tombstone(3), pg("u", 2, row(2, "b2"), 101)])
    s = p.run()
    assert (s["status"], s["deleted"]) == ("committed", 2)
    assert live(p) == {1: "a", 2: "b2", 5: "e", 6: "f"}


def test_a_tombstone_deletes_a_row_from_another_partition_after_partitions_were_added(make_pipe):
    p = make_pipe(compacted=True)
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12))
    p.run()
    add_partitions(p, 2)  # keys 2 and 3 hash to partition 1 now
    p.send(pg("u", 2, row(2, "moved"), 40), partition=1)
    p.run()
    p.send(tombstone(3), partition=1)  # 3 deleted after the move (its d compacted away)
    p.send(tombstone(2), pg("c", 4, row(4, "d"), 25), partition=0)  # 2's old delete: before a change at 25 < 40
    s = p.run()
    assert (s["status"], s["deleted"]) == ("committed", 1)
    assert live(p) == {1: "a", 2: "moved", 4: "d"}


# ------------------------------------------------------------------------------------------------ append and scd2

T0 = 1700000000000  # events.pg: source.ts_ms = T0 + lsn


def changelog(p) -> list[tuple]:
    """append: (op, id, name, lsn) of every row, in position order (a compacted delete after its change)."""
    rows = p.spark.sql(f"SELECT __op, id, name, __lsn FROM {p.target} "
                       "ORDER BY __lsn, id, __kafka_partition, __kafka_offset").collect()
    return [tuple(r) for r in rows]


def history(p) -> list[tuple]:
    """scd2: (id, name, valid_from lsn, valid_to lsn, is_current) of every version."""
    from datetime import timezone

    def lsn(ts) -> int | None:
        return None if ts is None else round(ts.replace(tzinfo=timezone.utc).timestamp() * 1000) - T0

    rows = p.spark.sql(f"SELECT id, name, __valid_from, __valid_to, __is_current FROM {p.target} "
                       "ORDER BY id, __valid_from").collect()
    return [(r["id"], r["name"], lsn(r["__valid_from"]), lsn(r["__valid_to"]), r["__is_current"]) for r in rows]


@pytest.mark.parametrize("write_mode", ["append", "scd2"])
def test_modes_a_tombstone_follows_changes_from_before_a_cursor_reset(make_pipe, write_mode):
    p = make_pipe(compacted=True, write_mode=write_mode)
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12),
           pg("u", 3, row(3, "c2"), 13), pg("c", 6, row(6, "f"), 14))  # cursor 5
    p.run()
    reset_to_a_new_topic(p, [pg("c", 5, row(5, "e"), 100), tombstone(3), tombstone(2), pg("u", 6, row(6, "f2"), 101)])
    assert p.run()["status"] == "committed"
    if write_mode == "append":  # each delete right after the newest change of its key
        assert changelog(p) == [("c", 1, "a", 10), ("c", 2, "b", 11), ("d", 2, None, 11), ("c", 3, "c", 12),
                                ("u", 3, "c2", 13), ("d", 3, None, 13), ("c", 6, "f", 14), ("c", 5, "e", 100),
                                ("u", 6, "f2", 101)]
    else:  # each key's last version closed at the time of that change
        assert history(p) == [(1, "a", 10, None, True), (2, "b", 11, 11, False), (3, "c", 12, 13, False),
                              (3, "c2", 13, 13, False), (5, "e", 100, None, True), (6, "f", 14, 101, False),
                              (6, "f2", 101, None, True)]


@pytest.mark.parametrize("write_mode", ["append", "scd2"])
def test_modes_a_tombstone_follows_a_change_from_another_partition_after_partitions_were_added(make_pipe,
                                                                                               write_mode):
    p = make_pipe(compacted=True, write_mode=write_mode)
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 11), pg("c", 3, row(3, "c"), 12))
    p.run()
    add_partitions(p, 2)
    p.send(pg("u", 2, row(2, "moved"), 40), partition=1)
    p.run()
    p.send(tombstone(3), partition=1)  # follows 3's change in partition 0
    p.send(tombstone(2), pg("c", 4, row(4, "d"), 25), partition=0)  # before a change at 25: not after 2's at 40
    assert p.run()["status"] == "committed"
    if write_mode == "append":
        assert changelog(p) == [("c", 1, "a", 10), ("c", 2, "b", 11), ("d", 2, None, 11), ("c", 3, "c", 12),
                                ("d", 3, None, 12), ("c", 4, "d", 25), ("u", 2, "moved", 40)]
    else:
        assert history(p) == [(1, "a", 10, None, True), (2, "b", 11, 11, False), (2, "moved", 40, None, True),
                              (3, "c", 12, 12, False), (4, "d", 25, None, True)]


KNOWN_LIMIT = ("a tombstone whose d was compacted away, at the end of a batch, with its key's re-creation in the next "
               "one: docs/failure-modes.md, compacted topics")


@pytest.mark.xfail(strict=True, reason=KNOWN_LIMIT)
def test_a_batch_cut_between_a_tombstone_and_its_keys_re_creation_before_the_snapshot(make_pipe):
    """Key 2 deleted and re-created before the bootstrap snapshot (its ``d`` compacted away), the batch ending right
    after the tombstone: the batch cannot tell the tombstone came before the snapshot."""
    p = make_pipe(compacted=True)
    bootstrapped(p, [row(i, f"boot{i}") for i in (1, 2)], (50, 50))
    p.send(tombstone(2), pg("c", 2, row(2, "re-created before the snapshot"), 40), pg("c", 5, row(5, "e"), 60))
    p.cfg = p.cfg.with_batch(max_records_per_partition=1)
    for _ in range(5):
        if p.run()["status"] == "empty":
            break
    assert live(p) == {1: "boot1", 2: "boot2", 5: "e"}


@pytest.mark.xfail(strict=True, reason=KNOWN_LIMIT)
def test_a_replay_after_a_backward_cursor_reset_cut_between_a_tombstone_and_a_re_creation(make_pipe):
    """The same topic replayed from offset 0 (``--reset-cursor`` backwards): key 1's tombstone, then its re-creation,
    in two batches."""
    p = make_pipe(compacted=True)
    p.send(pg("c", 1, row(1, "a"), 10), tombstone(1), pg("c", 1, row(1, "a again"), 30), pg("c", 2, row(2, "b"), 40))
    p.run()
    assert live(p) == {1: "a again", 2: "b"}
    from tests.scenarios.test_correctness_scenarios import _bounds

    assert p.run(mode="reset", bounds=_bounds(p.topic, start={0: 0}))["status"] == "reset"
    p.cfg = p.cfg.with_batch(max_records_per_partition=2)
    for _ in range(5):
        if p.run()["status"] == "empty":
            break
    assert live(p) == {1: "a again", 2: "b"}
