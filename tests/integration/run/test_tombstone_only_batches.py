"""A batch holding only Kafka tombstones (null-value records; Debezium's after each ``d``), on the real broker, Spark
and Iceberg.

Such a batch never decides a table's write mode, key or ordering: into a table that does not exist yet it applies
nothing and commits (its cursor moves, the table is not created), and the next batch of keyed changes creates an
upsert table; into a table that exists (made by earlier batches or by a bootstrap) it is staged and merged with the
table's key and ordering: nothing changes on a non-compacted topic, existing keys are deleted on a compacted one.
The ledger counts its records as read and skipped."""

from __future__ import annotations

import pytest

from tests.integration.events import pg, row, tombstone

pytestmark = pytest.mark.integration

KEYS = [None, ["id"]]  # primary_key not configured (the message key) / configured


def ledger_rows(p) -> list[tuple]:
    """(batch_id, status, end_offset, events_read, events_skipped, inserted, deleted) of the incremental batches."""
    return [(r["batch_id"], r["status"], r["end_offset"], r["events_read"], r["events_skipped"], r["inserted"],
             r["deleted"]) for r in p.ledger() if r["mode"] == "incremental"]


def write_mode(p) -> str | None:
    from cdc.iceberg.tables import target_state

    p.spark.catalog.refreshTable(p.target)
    return target_state(p.spark, p.target).write_mode


def bootstrapped(p, rows: list[dict]) -> None:
    """The target as ``cdc.bootstrap.job.run_bootstrap`` leaves it (PostgreSQL): the key's identifier fields, the
    rows at the horizon, its ledger row; no staging table."""
    import pyarrow as pa

    from cdc.bootstrap.job import with_meta, write_ledger_row
    from cdc.config.names import names
    from cdc.iceberg.tables import TargetState, ensure_target
    from cdc.ledger.model import bootstrap_row
    from cdc.ledger.tables import ensure_meta_tables
    from cdc.schema.columns import POSTGRES_COMMIT_ORDERING, Column

    ensure_meta_tables(p.spark, p.cfg)
    cols = [Column("id", pa.int32(), False), Column("name", pa.string()), Column("bio", pa.string())]
    ensure_target(p.spark, TargetState(p.target, exists=False), cols, ("id",), POSTGRES_COMMIT_ORDERING, False)
    df = p.spark.createDataFrame([(r["id"], r["name"], r["bio"]) for r in rows], "id int, name string, bio string")
    with_meta(df, POSTGRES_COMMIT_ORDERING, (50, 50), 1, 1700000000000, False).writeTo(p.target).append()
    n = names(p.cfg, p.table)
    write_ledger_row(p.spark, n.ledger, bootstrap_row(p.cfg.pipeline, p.table.target, p.topic, 1, (50, 50),
                                                      len(rows), None, "boot", "test", {}))


@pytest.mark.parametrize("primary_key", KEYS)
def test_a_new_tables_first_batch_of_only_tombstones_commits_nothing_then_changes_upsert(make_pipe, primary_key):
    p = make_pipe(**({"primary_key": primary_key} if primary_key else {}))
    p.send(tombstone(1), tombstone(2))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"], s["inserted"], s["deleted"]) == \
        ("committed", 2, 2, 0, 0)
    assert not p.spark.catalog.tableExists(p.target)  # nothing decided the table's mode, key or ordering
    p.send(pg("c", 1, row(1, "a"), 100), pg("c", 3, row(3, "c"), 110), pg("u", 1, row(1, "a2"), 120),
           pg("d", 3, row(3, "c"), 130), tombstone(3))
    s = p.run()
    assert (s["status"], s["events_read"], s["inserted"]) == ("committed", 5, 1)
    assert p.rows() == {1: ("a2", None)}
    assert write_mode(p) is None  # upsert
    assert ledger_rows(p) == [(1, "committed", 2, 2, 2, 0, 0), (2, "committed", 7, 5, 1, 1, 0)]


def test_a_new_avro_tables_first_batch_of_only_tombstones_commits_nothing_then_changes_upsert(make_pipe, registry):
    from tests.unit.cdc.decode.connect_avro import AvroWire

    p = make_pipe(fmt="avro", schema_registry={"url": registry.url})
    wire = AvroWire(registry.url, p.topic)
    wire.record(*pg("c", 9, row(9, "x"), 1))  # the connector registered its value schema before (retention took it)
    p.send(wire.record(*tombstone(1)), wire.record(*tombstone(2)))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"], s["inserted"]) == ("committed", 2, 2, 0)
    assert not p.spark.catalog.tableExists(p.target)
    p.send(*(wire.record(*e) for e in (pg("c", 1, row(1, "a"), 100), pg("c", 2, row(2, "b"), 110),
                                        pg("d", 2, row(2, "b"), 120), tombstone(2))))
    s = p.run()
    assert (s["status"], s["inserted"]) == ("committed", 1)
    assert p.rows() == {1: ("a", None)}
    assert write_mode(p) is None


def test_a_first_batch_of_tombstones_around_a_change_beyond_the_samples_applies_the_change(make_pipe):
    """The planner's samples (the newest and oldest records) show only tombstones; the change between them is
    found and applied."""
    p = make_pipe()
    p.send(*(tombstone(i) for i in range(100, 2200)), pg("c", 1, row(1, "a"), 100),
           *(tombstone(i) for i in range(100, 2200)))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"], s["inserted"]) == ("committed", 4201, 4200, 1)
    assert p.rows() == {1: ("a", None)}


@pytest.mark.parametrize("primary_key", KEYS)
@pytest.mark.parametrize("compacted", [False, True])
def test_after_a_bootstrap_a_batch_of_only_tombstones(make_pipe, primary_key, compacted):
    """Non-compacted: the ``d`` events before the tombstones did the deletes; they change nothing. Compacted: a
    tombstone deletes its key's bootstrap row (``cdc.merge.compaction``: nothing in the batch shows it came before
    the snapshot), one of a key the table does not hold is ignored; the table keeps its mode and key."""
    p = make_pipe(compacted=compacted, **({"primary_key": primary_key} if primary_key else {}))
    bootstrapped(p, [row(1, "a"), row(2, "b"), row(3, "c")])
    p.send(tombstone(2), tombstone(7))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"], s["deleted"]) == \
        ("committed", 2, 2, 1 if compacted else 0)
    p.spark.catalog.refreshTable(p.target)
    assert p.rows() == {1: ("a", None), 3: ("c", None), **({} if compacted else {2: ("b", None)})}
    assert write_mode(p) is None
    assert ledger_rows(p)[-1][1:3] == ("committed", 2)
    p.send(pg("u", 1, row(1, "a2"), 100), pg("c", 4, row(4, "d"), 110))  # and keyed changes still upsert
    s = p.run()
    assert (s["status"], s["inserted"], s["updated"]) == ("committed", 1, 1)
    assert p.rows()[1] == ("a2", None) and p.rows()[4] == ("d", None)


@pytest.mark.parametrize("compacted", [False, True])
def test_after_keyed_batches_a_batch_of_only_tombstones(make_pipe, compacted):
    p = make_pipe(compacted=compacted)
    p.send(pg("c", 1, row(1, "a"), 100), pg("c", 2, row(2, "b"), 110), pg("c", 3, row(3, "c"), 120),
           pg("d", 3, row(3, "c"), 130))
    assert p.run()["status"] == "committed"
    p.send(tombstone(3), tombstone(2))  # 3: the d before it deleted the row; 2: a live row
    s = p.run()
    # tombstones are counted as skipped records (not change events); on a compacted topic their deletes as deleted
    assert (s["status"], s["events_read"], s["events_skipped"], s["deleted"]) == \
        ("committed", 2, 2, 1 if compacted else 0)
    p.spark.catalog.refreshTable(p.target)
    assert p.rows() == ({1: ("a", None)} if compacted else {1: ("a", None), 2: ("b", None)})
    assert ledger_rows(p)[-1][1:4] == ("committed", 6, 2)


def test_a_new_compacted_tables_first_batch_of_only_tombstones_commits_nothing(make_pipe):
    p = make_pipe(compacted=True)
    p.send(tombstone(1))
    s = p.run()
    assert (s["status"], s["events_read"], s["events_skipped"]) == ("committed", 1, 1)
    assert not p.spark.catalog.tableExists(p.target)
    p.send(pg("c", 1, row(1, "a"), 100), pg("c", 2, row(2, "b"), 110), pg("d", 1, row(1, "a"), 120), tombstone(1))
    assert p.run()["status"] == "committed"
    assert p.rows() == {2: ("b", None)}
    assert write_mode(p) is None


def test_a_claimed_batch_of_only_tombstones_left_by_a_dead_run_is_committed_by_the_next(make_pipe, monkeypatch):
    """The run dies right after its claim; the next run takes the batch over and commits it with its counts (the
    row-level ledger update), then goes on."""
    import cdc.run.batch

    class Died(BaseException):  # not Exception: passes the phase wrappers like a dead process
        pass

    def die(point: str) -> None:
        if point == "after_claim":
            raise Died(point)

    p = make_pipe()
    p.send(tombstone(1), tombstone(2), tombstone(3))
    with monkeypatch.context() as m:
        m.setattr(cdc.run.batch, "checkpoint", die)
        with pytest.raises(Died):
            p.run()
    assert [r["status"] for r in p.ledger()] == ["claimed"]
    p.send(pg("c", 1, row(1, "a"), 100))
    s = p.run()
    assert (s["recovered_batch_id"], s["status"], s["batch_id"], s["inserted"]) == (1, "committed", 2, 1)
    assert ledger_rows(p) == [(1, "committed", 3, 3, 3, 0, 0), (2, "committed", 4, 1, 0, 1, 0)]
    assert p.rows() == {1: ("a", None)}
