"""The correctness review's scenarios 1-4 and 7, ties and explicit ordering, end to end on the real broker, Spark and
Iceberg (one test per scenario; 5, 6 and 11 in test_correctness_failover.py, all of them through the CLI in
test_correctness_cli.py).

Each test spells out its Debezium events (``tests.integration.events``) so the expected table is obvious; the
randomized oracle (``tests/scenarios/harness.py``) covers the same classes in random combinations.
"""

from __future__ import annotations

import importlib.util
import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import REPO
from tests.integration.events import PLACEHOLDER, pg, row, tombstone, with_header

pytestmark = pytest.mark.integration



# ---- scenario 1: tombstone GC vs late / replayed events -------------------------------------------------------------

_spec = importlib.util.spec_from_file_location("cdc_maintenance_job_s1", REPO / "jobs" / "maintenance.py")
maintenance = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(maintenance)  # type: ignore[union-attr]


def gc_tombstones(p, dropped=None):
    m = maintenance.Maintenance(p.spark, p.cfg, _gc_args(), datetime.now(timezone.utc) + timedelta(hours=1))
    m.run(p.cfg.tables)
    assert not [s for s in m.steps if s["error"]], m.steps
    if dropped is not None:
        assert [s["result"]["dropped"] for s in m.steps if s["action"] == "gc_tombstones"] == [dropped]
        return
    tomb = maintenance.helper_tables(p.cfg, p.table)[1]
    p.spark.catalog.refreshTable(tomb)
    assert p.spark.table(tomb).count() == 0


def test_scenario_01_tombstone_gc_then_a_late_update_or_a_replay_does_not_resurrect(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 100), pg("c", 2, row(2, "b"), 110))
    p.run()
    p.send(pg("d", 1, row(1, "a"), 200), tombstone(1), pg("u", 2, row(2, "b"), 210))  # the partition passes 200
    p.run()
    gc_tombstones(p)
    p.send(pg("u", 1, row(1, "late"), 150))  # a lagging partition delivers an older update
    s = p.run()
    assert (s["inserted"], s["updated"]) == (0, 0)
    assert p.rows() == {2: ("b", None)}
    replay = p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0}))  # the whole topic again
    assert replay["inserted"] == 0
    assert p.rows() == {2: ("b", None)}
    p.send(pg("c", 1, row(1, "again"), 300))  # newer than the horizon: a real re-insert
    p.run()
    assert p.rows() == {1: ("again", None), 2: ("b", None)}


def _bounds(topic, start=None, end=None):
    from cdc.common.cli_contract import BackfillBounds, Bounds

    return BackfillBounds(Bounds(), {topic: Bounds(start_offsets=start or {}, end_offsets=end or {})})


def test_scenario_01_gc_keeps_tombstones_a_lagging_partition_has_not_passed(make_pipe):
    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a"), 100), pg("d", 1, row(1, "a"), 200))
    p.send(pg("c", 5, row(5, "e"), 50), partition=1)  # partition 1 has only reached position 50
    p.run()
    gc = maintenance.Maintenance(p.spark, p.cfg, _gc_args(), datetime.now(timezone.utc) + timedelta(hours=1))
    gc.run(p.cfg.tables)
    assert [s["result"]["dropped"] for s in gc.steps if s["action"] == "gc_tombstones"] == [0]
    p.send(pg("c", 7, row(7, "first time, late"), 150), pg("u", 1, row(1, "late"), 150), partition=1)
    p.run()
    assert p.rows() == {5: ("e", None), 7: ("first time, late", None)}  # inserted; 1 stays deleted
    p.send(pg("c", 8, row(8, "h"), 300), partition=1)
    p.send(pg("c", 9, row(9, "i"), 310), partition=0)
    p.run()
    gc_tombstones(p)  # now both partitions are past 200: the tombstone goes, the horizon stays
    p.send(pg("u", 1, row(1, "replayed"), 150), partition=1)
    p.run()
    assert sorted(p.rows()) == [5, 7, 8, 9]


def test_scenario_01_gc_keeps_a_tombstone_at_the_position_a_partition_has_only_partly_read(make_pipe):
    """A PK change is a delete and a create at one position (soak seed 115). A batch ending between them has
    committed that position, but not every event at it: GC dropped the delete's tombstone and set the horizon there,
    and the create, a first-time change of a key absent from the table at a position at the horizon, was ignored."""
    p = make_pipe()
    p.send(pg("c", 18, row(18, "a"), 10),
           with_header(pg("d", 18, row(18, "a"), 20), "__debezium.newkey", 21), tombstone(18),
           with_header(pg("c", 21, row(21, "a"), 20), "__debezium.oldkey", 18))  # UPDATE ... SET id = 21
    p.cfg = p.cfg.with_batch(max_records_per_partition=3)
    p.run()  # offsets 0..2: the create at position 20 is not read yet
    gc_tombstones(p, dropped=0)
    p.cfg = p.cfg.with_batch(max_records_per_partition=500_000)
    p.run()
    assert p.rows() == {21: ("a", None)}


def test_scenario_01_gc_ignores_positions_a_backfill_ahead_of_the_cursor_committed(make_pipe):
    """A backfill ahead of the cursor commits newer positions than the cursor has passed. Counted by the GC
    watermark, they let GC drop a tombstone and raise the horizon above changes the cursor has not read yet: the
    first-time insert of key 7 (position 150, behind the cursor) was then ignored as "forgotten" for good."""
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 100), pg("c", 7, row(7, "first time"), 150), pg("c", 3, row(3, "c"), 200),
           pg("d", 3, row(3, "c"), 300), tombstone(3), pg("u", 1, row(1, "a2"), 400))
    p.cfg = p.cfg.with_batch(max_records_per_partition=1)
    p.run()  # the cursor is at offset 1
    p.cfg = p.cfg.with_batch(max_records_per_partition=500_000)
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 2}))  # offsets 2..5, positions up to 400
    gc_tombstones(p, dropped=0)  # the cursor has passed position 100 only: key 3's tombstone at 300 stays
    p.run()
    assert p.rows() == {1: ("a2", None), 7: ("first time", None)}


def _gc_args():
    import argparse

    return argparse.Namespace(config="-", table=[], staging_retention_hours=72, tombstone_retention_hours=0,
                              snapshot_retention_hours=168, retain_last=1, orphan_retention_hours=72)


# ---- scenario 2: primary-key change + TOAST --------------------------------------------------------------------------

def test_scenario_02_pk_change_with_toast_takes_the_old_keys_value_in_one_batch(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a", "long text"), 10))
    p.run()
    # UPDATE ... SET id = 2 WHERE id = 1 under REPLICA IDENTITY DEFAULT: delete(1) + create(2) at one LSN, bio unchanged
    p.send(pg("d", 1, {"id": 1, "name": None, "bio": None}, 20), tombstone(1),
           pg("c", 2, row(2, "a", PLACEHOLDER), 20))
    p.run()
    assert p.rows() == {2: ("a", "long text")}


def test_scenario_02_pk_change_with_toast_value_from_the_same_batch(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a", "v1"), 10), pg("u", 1, row(1, "a2", "v2"), 15),
           pg("d", 1, {"id": 1, "name": None, "bio": None}, 20), pg("c", 2, row(2, "a2", PLACEHOLDER), 20),
           pg("u", 2, row(2, "a3", PLACEHOLDER), 30))
    p.run()
    assert p.rows() == {2: ("a3", "v2")}


OLD, NEW = "__debezium.oldkey", "__debezium.newkey"


def moved_delete(old, lsn):  # UPDATE ... SET id = <new> WHERE id = <old>: the delete, as Debezium sends it
    return pg("d", old, {"id": old, "name": None, "bio": None}, lsn)


def test_scenario_02_pk_change_across_batches_create_first_takes_the_old_rows_value(make_pipe):
    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a", "long text"), 10))
    p.run()
    # the move's create arrives first (the old key's partition lags): key 1's row is still there, older than L = 20
    p.send(with_header(pg("c", 2, row(2, "a", PLACEHOLDER), 20), OLD, 1), partition=1)
    p.run()
    assert p.rows() == {1: ("a", "long text"), 2: ("a", "long text")}
    p.send(with_header(moved_delete(1, 20), NEW, 2), tombstone(1))
    p.run()
    assert p.rows() == {2: ("a", "long text")}


def test_scenario_02_pk_change_across_batches_create_first_ignores_a_newer_old_row(make_pipe):
    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a", "long text"), 10), pg("u", 1, row(1, "b", "newer"), 30))
    p.run()  # key 1's row is at 30, after the move at 20: not what the column held at 20
    p.send(with_header(pg("c", 2, row(2, "a", PLACEHOLDER), 20), OLD, 1), partition=1)
    p.run()
    assert p.rows() == {1: ("b", "newer"), 2: ("a", None)}


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_scenario_02_pk_change_across_batches_delete_first_keeps_the_value_for_the_create(make_pipe, delete_mode):
    p = make_pipe(partitions=2, delete_mode=delete_mode)
    p.send(pg("c", 1, row(1, "a", "v1"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "a", "long text"), 15), with_header(moved_delete(1, 20), NEW, 2), tombstone(1))
    p.run()  # the move's delete (its image: the value of the batch's update) in one batch ...
    p.send(with_header(pg("c", 2, row(2, "a2", PLACEHOLDER), 20), OLD, 1),
           pg("u", 2, row(2, "a3", PLACEHOLDER), 30), partition=1)
    p.run()  # ... its create in the next one
    live = {k: v for k, v in p.rows("name", "bio", *(["__deleted"] if delete_mode == "soft" else [])).items()
            if delete_mode == "hard" or not v[2]}
    assert {k: v[:2] for k, v in live.items()} == {2: ("a3", "long text")}
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0, 1: 0}))  # a replay changes nothing
    assert p.rows()[2] == ("a3", "long text")


def test_scenario_02_pk_change_delete_first_crash_between_target_and_tombstone_merge(make_pipe):
    from tests.scenarios.harness import raise_at

    p = make_pipe(partitions=2)
    p.send(pg("c", 1, row(1, "a", "long text"), 10))
    p.run()
    p.send(with_header(moved_delete(1, 20), NEW, 2), tombstone(1))
    assert raise_at("after_merge", p.run)  # row 1 is gone, its tombstone not written yet
    p.run()  # takes the batch over: the image computed before the crash is kept
    assert p.rows() == {}
    p.send(with_header(pg("c", 2, row(2, "a", PLACEHOLDER), 20), OLD, 1), partition=1)
    p.run()
    assert p.rows() == {2: ("a", "long text")}


# ---- scenario 3: the lease check does not depend on the host's time zone --------------------------------------------

@pytest.fixture
def new_york():
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_scenario_03_a_live_claim_from_another_host_blocks_in_any_time_zone(make_pipe, new_york):
    from cdc.common.errors import ConcurrentRunError
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables

    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10))
    ledger_name = f"lake.{p.cfg.metadata_namespace}.ledger"
    ensure_meta_tables(p.spark, p.cfg)  # the metadata tables (a dry run writes nothing)
    ledger = Ledger(p.spark, ledger_name, p.cfg.pipeline)
    ledger.claim(p.table.target, 1, "incremental", [LedgerRange(p.topic, 0, 0, 1)], "other-run",
                 seen=ledger.state(p.table.target, None).snapshot_id)
    p.spark.sql(f"UPDATE {ledger_name} SET owner = 'elsewhere:1:1', claimed_at = current_timestamp()")
    with pytest.raises(ConcurrentRunError):  # renewed a moment ago on another host: alive, whatever TZ says
        p.run()


# ---- scenario 4: fenced writes -------------------------------------------------------------------------------------

def test_scenario_04_a_stale_writer_cannot_regress_a_row(make_pipe, monkeypatch):
    import cdc.merge.apply

    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10), pg("c", 2, row(2, "b"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "stale"), 20), pg("d", 2, row(2, "b"), 20), pg("c", 3, row(3, "stale"), 20))

    def newer_owner_commits(point):  # between classification and MERGE another owner commits newer changes
        if point == "after_classify":
            p.spark.sql(f"UPDATE {p.target} SET name = 'new', __last_commit_lsn = 30, __lsn = 30 WHERE id IN (1, 2)")
            p.spark.sql(f"INSERT INTO {p.target} VALUES (3, 'new', NULL, 30, 30, 'c', 0, 0, 99, 9, current_timestamp())")

    monkeypatch.setattr(cdc.merge.apply, "checkpoint", newer_owner_commits)
    p.run()
    assert p.rows() == {1: ("new", None), 2: ("new", None), 3: ("new", None)}


def test_scenario_04_a_tombstone_another_process_wrote_since_classification_wins(make_pipe, monkeypatch):
    """Between this run's classification and its MERGE, a run that took the batch over (a second Spark session: its own
    Iceberg catalog and table cache, as another process has) records a newer delete of key 1: the stale create of
    key 1 must not bring it back. The MERGE guards against tombstones written since classification; this run's
    catalog still caches the tombstones table as classification read it, so the guard must see past that cache."""
    import cdc.merge.apply

    p = make_pipe()
    p.send(pg("c", 2, row(2, "b"), 10))
    p.run()
    p.send(pg("c", 1, row(1, "stale"), 20), pg("u", 2, row(2, "b2"), 20))
    tombstones = f"{p.cfg.catalog.name}.{p.cfg.metadata_namespace}.tombstones__{p.table.target.replace('.', '__')}"

    def another_run_deletes_key_1(point):
        if point == "after_classify":
            other = p.spark.newSession()
            fixed = {"id": "1", "__kafka_partition": "0", "__kafka_offset": "99", "__deleted_at": "current_timestamp()"}
            values = [f"{fixed.get(c, '30')} AS `{c}`" for c in other.table(tombstones).columns]  # the rest: ordering
            other.sql(f"INSERT INTO {tombstones} SELECT {', '.join(values)}")

    monkeypatch.setattr(cdc.merge.apply, "checkpoint", another_run_deletes_key_1)
    p.run()
    assert p.rows() == {2: ("b2", None)}


def test_scenario_04_take_over_rechecks_the_claim_it_read(make_pipe):
    from cdc.common.errors import ConcurrentRunError
    from cdc.ledger.ledger import Ledger
    from cdc.ledger.state import LedgerRange
    from cdc.ledger.tables import ensure_meta_tables

    p = make_pipe()
    p.send(pg("c", 1, row(1, "a"), 10))
    ensure_meta_tables(p.spark, p.cfg)  # the metadata tables (a dry run writes nothing)
    ledger = Ledger(p.spark, f"lake.{p.cfg.metadata_namespace}.ledger", p.cfg.pipeline)
    ledger.claim(p.table.target, 1, "incremental", [LedgerRange(p.topic, 0, 0, 1)], "run-a",
                 seen=ledger.state(p.table.target, None).snapshot_id)
    seen = ledger.pending(p.table.target)
    time.sleep(1.1)
    ledger.renew(p.table.target, 1, "run-a")  # the owner is alive after all: it renewed since we looked
    with pytest.raises(ConcurrentRunError):
        ledger.take_over(p.table.target, seen, "run-b")
    assert ledger.owners(p.table.target, 1) == {"run-a"}


# ---- scenario 7: TOAST carry respects positions and deletes ---------------------------------------------------------

def test_scenario_07_toast_is_not_carried_from_an_event_older_than_the_table_row(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, row(1, "a", "current"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "x", "older"), 5),  # a late, older event in the batch
           pg("u", 1, row(1, "b", PLACEHOLDER), 20))
    p.run()
    assert p.rows() == {1: ("b", "current")}


def test_scenario_07_toast_is_never_carried_from_a_deleted_image(make_pipe):
    p = make_pipe(delete_mode="soft")
    p.send(pg("c", 1, row(1, "a", "before delete"), 10))
    p.run()
    p.send(pg("d", 1, row(1, "a", "before delete"), 20))
    p.run()
    p.send(pg("u", 1, row(1, "b", PLACEHOLDER), 30))  # its real base (a re-insert) was never seen
    p.run()
    assert p.rows("name", "bio", "__deleted") == {1: ("b", None, False)}


# ---- ties and explicit ordering ------------------------------------------------------------------------------------

def test_equal_positions_are_broken_by_the_kafka_offset_across_batches(make_pipe):
    p = make_pipe()
    p.send(pg("r", 1, row(1, "first"), 10))
    p.run()
    p.send(pg("r", 1, row(1, "second"), 10))  # same position, later offset in the same partition
    p.run()
    assert p.rows() == {1: ("second", None)}
    p.run(mode="backfill", bounds=_bounds(p.topic, start={0: 0}, end={0: 1}))  # replay of the first: older
    assert p.rows() == {1: ("second", None)}


def test_explicit_ordering_works_across_batches(make_pipe):
    p = make_pipe(ordering=["source.lsn"])
    p.send(pg("c", 1, row(1, "a"), 10))
    p.run()
    p.send(pg("u", 1, row(1, "b"), 20), pg("u", 1, row(1, "old"), 15))
    s = p.run()
    assert s["status"] == "committed"
    assert p.rows("name", "__ord_source_lsn") == {1: ("b", 20)}
