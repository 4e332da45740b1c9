"""The ledger's staged and committed marks as whole-row rewrites (``cdc.ledger.write``) on real Spark + Iceberg: they
write exactly the rows the row-level UPDATEs write, they refuse a batch another run took over, and they still land
after the run's own lease renewal."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import pytest

from cdc.common.errors import ConcurrentRunError
from cdc.iceberg.tables import iceberg_table
from cdc.ledger.ledger import Ledger
from cdc.ledger.state import LedgerRange
from cdc.ledger.write import WRITE_ID, Held
from tests.integration.events import pg
from tests.integration.iceberg.test_tables import sql_executions

pytestmark = pytest.mark.integration

LONG = "a-pipeline-named-longer-than-sixteen-characters"  # string bounds are cut at 16 unless kept whole


def ledger_of(make_pipe):
    p = make_pipe()
    p.send(pg("c", 1, {"id": 1, "name": "n1", "bio": None}, 1))
    from cdc.ledger.tables import ensure_meta_tables

    ensure_meta_tables(p.spark, p.cfg)  # the metadata tables (a dry run writes nothing)
    return p, f"lake.{p.cfg.metadata_namespace}.ledger"


def claim(led: Ledger, table: str, topic: str, run_id: str) -> Held:
    state = led.state(table, None)
    ranges = (LedgerRange(topic, 0, 0, 10), LedgerRange(topic, 1, 5, 5))
    claimed = led.claim(table, state.next_batch_id, "incremental", ranges, run_id, seen=state.snapshot_id)
    return Held(state.next_batch_id, "incremental", ranges, since=claimed.snapshot_id)


def staged_ranges(topic: str) -> list[LedgerRange]:
    return [LedgerRange(topic, 0, 0, 10, 9, 1, 0, (7, 3), ("1",)), LedgerRange(topic, 1, 5, 5, 0, 0, 0, None, ())]


def rows(spark, ledger: str, pipeline: str, table: str) -> dict[int, list[dict]]:
    spark.catalog.refreshTable(ledger)
    out: dict[int, list[dict]] = {}
    for r in spark.sql(f"SELECT * FROM {ledger} WHERE pipeline = '{pipeline}' AND table_name = '{table}' "
                       "ORDER BY batch_id, `partition`").collect():
        out.setdefault(r["batch_id"], []).append(r.asDict())
    return out


def rewrites(spark, ledger: str) -> int:
    """Ledger snapshots a mark's rewrite committed (the UPDATE fallback leaves no ``cdc.ledger-write``; a claim, which
    also names its write, replaces no file)."""
    spark.catalog.refreshTable(ledger)
    return spark.sql(f"SELECT count(*) FROM {ledger}.snapshots WHERE summary['{WRITE_ID}'] IS NOT NULL "
                     "AND summary['deleted-data-files'] IS NOT NULL").first()[0]


def test_the_rewrites_write_the_rows_the_updates_write(make_pipe):
    """Batch 1 is marked by rewrites, batch 2 by the UPDATEs, from the same inputs: every column but the batch id,
    the run and the times must be equal. The pipeline name is longer than 16 characters: without its whole bounds
    (``LEDGER_SETTINGS``) the rewrite could not tell the claim's file holds only the batch's rows and would fall back
    to the UPDATE."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, LONG), p.table.target
    before = rewrites(p.spark, ledger)
    held = claim(led, table, p.topic, "run-1")
    held = led.mark_staged(table, 1, "run-1", staged_ranges(p.topic), (4, 2), held=held)
    assert held is not None and held.staged_at_us is not None
    led.mark_committed(table, 1, "run-1", {"inserted": 3, "updated": 2, "deleted": 1}, 77, {"merge": 1.5}, held=held)
    assert rewrites(p.spark, ledger) == before + 2

    claim(led, table, p.topic, "run-2")
    assert led.mark_staged(table, 2, "run-2", staged_ranges(p.topic), (4, 2)) is None
    led.mark_committed(table, 2, "run-2", {"inserted": 3, "updated": 2, "deleted": 1}, 77, {"merge": 1.5})
    assert rewrites(p.spark, ledger) == before + 2

    found = rows(p.spark, ledger, LONG, table)
    varying = ("batch_id", "run_id", "claimed_at", "staged_at", "committed_at")
    assert [{k: v for k, v in r.items() if k not in varying} for r in found[1]] == \
           [{k: v for k, v in r.items() if k not in varying} for r in found[2]]
    assert [r["status"] for r in found[1]] == ["committed", "committed"]
    assert all(r["staged_at"] is not None and r["committed_at"] is not None for r in found[1])
    assert led.state(table, p.topic).cursor == {0: 10, 1: 5}


def test_a_run_s_ingestion_rewrites_its_marks(make_pipe):
    """A real run takes the rewrite path for both marks (the fast path stays in use)."""
    p, ledger = ledger_of(make_pipe)
    before = rewrites(p.spark, ledger)
    assert p.run()["status"] == "committed"
    assert rewrites(p.spark, ledger) == before + 2


@pytest.mark.parametrize("mark", ["staged", "committed"])
def test_a_mark_refuses_a_batch_another_run_took_over(make_pipe, mark):
    """Another run takes the batch over before the mark: the mark raises, and the other run's rows stay as they
    are (a rewrite that was not validated would put this run's back)."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    held = claim(led, table, p.topic, "run-a")
    if mark == "committed":
        held = led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held)
        assert held is not None
    other = Ledger(p.spark.newSession(), ledger, p.cfg.pipeline)  # its own catalog cache
    other.take_over(table, other.state(table, None).pending, "run-b")
    expected = rows(p.spark, ledger, p.cfg.pipeline, table)
    with pytest.raises(ConcurrentRunError, match="taken over by another run"):
        if mark == "staged":
            led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held)
        else:
            led.mark_committed(table, 1, "run-a", {}, None, {}, held=held)
    assert rows(p.spark, ledger, p.cfg.pipeline, table) == expected
    assert {r["run_id"] for r in expected[1]} == {"run-b"}


def test_marks_land_after_the_run_s_own_lease_renewal(make_pipe, caplog):
    """The run's own renewal commits to the batch's rows after ``since``: the rewrite conflicts, the batch is still
    the run's, and the mark is written as the UPDATE instead, which the log says."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    held = claim(led, table, p.topic, "run-a")
    led.renew(table, 1, "run-a")
    with caplog.at_level(logging.INFO, logger="cdc.ledger"):
        assert led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held) is None
    assert f"table {table}: batch 1's staged mark conflicted" in caplog.text
    held = led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None,
                           held=replace(held, since=led.state(table, None).snapshot_id))
    assert held is not None  # from a snapshot after the renewal, the rewrite lands
    led.renew(table, 1, "run-a")
    led.mark_committed(table, 1, "run-a", {"inserted": 9}, None, {}, held=held)
    found = rows(p.spark, ledger, p.cfg.pipeline, table)[1]
    assert [(r["status"], r["run_id"], r["events_read"], r["inserted"]) for r in found] == [
        ("committed", "run-a", 9, 9), ("committed", "run-a", 0, 9)]


def test_a_claim_withdraws_when_another_writer_appended_a_row_under_its_batch_id(make_pipe, monkeypatch):
    """A cursor reset (or a bootstrap) appends a committed row under the next batch id without validation. Landing
    between a claim's commit and its check, it shares the claimed id: the claim must withdraw, or the marks, which
    rewrite every row of the batch id, would delete that row (a bootstrap's horizon, a reset's cursor)."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    other = Ledger(p.spark.newSession(), ledger, p.cfg.pipeline)
    real = Ledger._append_claim

    def claim_then_reset(self, table_, batch_id, *args):
        real(self, table_, batch_id, *args)
        other.reset_cursor(table_, p.topic, batch_id, {0: (0, 3)}, "reset-run")

    monkeypatch.setattr(Ledger, "_append_claim", claim_then_reset)
    with pytest.raises(ConcurrentRunError, match="reset-run"):
        claim(led, table, p.topic, "run-a")
    found = rows(p.spark, ledger, p.cfg.pipeline, table)
    assert [(r["run_id"], r["status"], r["mode"]) for r in found[1]] == [("reset-run", "committed", "reset")]
    assert led.state(table, p.topic).cursor == {0: 3}


def test_a_claim_from_its_planned_state_reads_nothing_back_and_says_what_a_read_would(make_pipe):
    """With the state it planned from (no pending batch), a claim that committed as the validated write returns that
    state plus the claim without reading the ledger again, and the write is no Spark statement either
    (``cdc.iceberg.row_commit``)."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    held = claim(led, table, p.topic, "run-0")  # an earlier batch, committed: a cursor and a last batch id
    led.mark_committed(table, 1, "run-0", {}, None, {}, held=led.mark_staged(
        table, 1, "run-0", staged_ranges(p.topic), None, held=held))
    planned = led.state(table, p.topic)
    assert planned.pending is None and planned.cursor == {0: 10, 1: 5}
    ranges = (LedgerRange(p.topic, 0, 10, 20), LedgerRange(p.topic, 1, 5, 5))
    before = sql_executions(p.spark)
    claimed = led.claim(table, 2, "incremental", ranges, "run-a", p.topic, planned.cursor,
                        seen=planned.snapshot_id, planned=planned)
    assert sql_executions(p.spark) == before
    read = led.state(table, p.topic)
    assert claimed.snapshot_id == read.snapshot_id  # the claim's own snapshot: nothing committed since
    assert replace(claimed, pending=replace(claimed.pending, claimed_at_us=None)) == replace(
        read, pending=replace(read.pending, claimed_at_us=None))
    assert (claimed.pending.batch_id, claimed.pending.run_id, claimed.pending.status) == (2, "run-a", "claimed")


def test_a_row_appended_under_a_claim_that_read_nothing_back_stops_its_staged_mark(make_pipe):
    """A cursor reset (or a bootstrap) appends its row under the next batch id without validation, so it can land
    right after a claim that did not read the ledger back (``Ledger.claim``'s ``planned``). The staged mark, validated
    from the claim's snapshot, refuses before anything is merged; the run then withdraws its claim and the reset's
    row stays."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    planned = led.state(table, p.topic)
    ranges = (LedgerRange(p.topic, 0, 0, 10), LedgerRange(p.topic, 1, 5, 5))
    claimed = led.claim(table, 1, "incremental", ranges, "run-a", p.topic, planned.cursor,
                        seen=planned.snapshot_id, planned=planned)
    Ledger(p.spark.newSession(), ledger, p.cfg.pipeline).reset_cursor(table, p.topic, 1, {0: (0, 3)}, "reset-run")
    held = Held(1, "incremental", ranges, since=claimed.snapshot_id)
    with pytest.raises(ConcurrentRunError, match="reset-run"):
        led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held)
    led.release(table, 1, "run-a")  # what the run does on that error (cdc.run)
    found = rows(p.spark, ledger, p.cfg.pipeline, table)
    assert [(r["run_id"], r["status"], r["mode"]) for r in found[1]] == [("reset-run", "committed", "reset")]
    assert led.state(table, p.topic).cursor == {0: 3}


def test_a_claim_from_its_planned_state_that_another_claim_beat_reads_who_won(make_pipe):
    """Another run claimed the same batch id after this one planned: the validated write conflicts, the claim reads
    the ledger back as without a planned state, and refuses."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    planned = led.state(table, p.topic)
    ranges = (LedgerRange(p.topic, 0, 0, 10),)
    other = Ledger(p.spark.newSession(), ledger, p.cfg.pipeline)
    other.claim(table, 1, "incremental", ranges, "run-b", seen=other.state(table, None).snapshot_id)
    with pytest.raises(ConcurrentRunError, match="run-b"):
        led.claim(table, 1, "incremental", ranges, "run-a", p.topic, planned.cursor, seen=planned.snapshot_id,
                  planned=planned)
    assert {r["run_id"] for r in rows(p.spark, ledger, p.cfg.pipeline, table)[1]} == {"run-b"}


class HeldInside:
    """A session whose first SQL statement waits for ``release`` (after setting ``inside``): a ledger write caught
    in the middle, holding whatever it holds."""

    def __init__(self, spark):
        self._spark, self.inside, self.release = spark, threading.Event(), threading.Event()

    def sql(self, query: str):
        self.inside.set()
        assert self.release.wait(120), "never released"
        return self._spark.sql(query)

    def __getattr__(self, name: str):
        return getattr(self._spark, name)


def test_one_process_s_writes_to_the_ledger_take_turns(make_pipe):
    """Two tables' ledger writes from two threads and sessions of one process (a group's tables, cdc.run.group) commit
    one after the other: while table A's write is in progress, table B's waits instead of racing it into an Iceberg
    commit retry (a metadata file each, and with a hadoop catalog a wait of seconds for its lock). Without the
    process's ledger lock B's small INSERT commits within a second or two, long before A is let go."""
    p, ledger = ledger_of(make_pipe)
    slow = HeldInside(p.spark.newSession())
    a, b = Ledger(slow, ledger, p.cfg.pipeline), Ledger(p.spark.newSession(), ledger, p.cfg.pipeline)
    ta = threading.Thread(target=a.reset_cursor, args=("table_a", p.topic, 1, {0: (0, 1)}, "run-a"))
    tb = threading.Thread(target=b.reset_cursor, args=("table_b", p.topic, 1, {0: (0, 2)}, "run-b"))
    ta.start()
    assert slow.inside.wait(60)
    tb.start()
    tb.join(12)
    b_committed_while_a_wrote = not tb.is_alive()
    slow.release.set()
    ta.join(120)
    tb.join(120)
    assert not b_committed_while_a_wrote
    assert a.state("table_a", p.topic).cursor == {0: 1} and b.state("table_b", p.topic).cursor == {0: 2}


def test_every_ledger_write_lands_on_a_ledger_a_newer_version_gave_another_column(make_pipe):
    """During a rolling upgrade a newer version may have added a ledger column (ensure_meta_tables adds columns at
    the end). This version's writes name their columns, so each still lands and leaves the new column NULL: the claim
    and the marks (whole-row overwrites) and a cursor reset (an INSERT, which a positional column list would fail:
    "not enough data columns")."""
    p, ledger = ledger_of(make_pipe)
    p.spark.sql(f"ALTER TABLE {ledger} ADD COLUMN a_newer_column string")
    p.spark.sql(f"ALTER TABLE {ledger} ALTER COLUMN events_read FIRST")  # and one out of this version's order
    led, table = Ledger(p.spark.newSession(), ledger, p.cfg.pipeline), p.table.target
    held = claim(led, table, p.topic, "run-a")
    held = led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held)
    assert held is not None
    led.mark_committed(table, 1, "run-a", {"inserted": 9}, None, {}, held=held)
    led.reset_cursor(table, p.topic, 2, {0: (10, 4)}, "reset-run")
    found = rows(p.spark, ledger, p.cfg.pipeline, table)
    assert [(r["status"], r["run_id"], r["events_read"], r["inserted"], r["a_newer_column"]) for r in found[1]] == [
        ("committed", "run-a", 9, 9, None), ("committed", "run-a", 0, 9, None)]
    assert [(r["mode"], r["start_offset"], r["end_offset"], r["events_read"], r["a_newer_column"])
            for r in found[2]] == [("reset", 10, 4, 0, None)]
    assert led.state(table, p.topic).cursor == {0: 4, 1: 5}


def test_a_committed_mark_after_its_own_lease_renewal_reads_the_owners_once(make_pipe, monkeypatch):
    """The committed mark's rewrite conflicts with the run's own lease renewal: the ledger asks once whether the
    batch is still the run's (a Spark job on the ledger) and then writes the UPDATE; it used to ask a second time."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    held = led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=claim(led, table, p.topic, "run-a"))
    assert held is not None
    led.renew(table, 1, "run-a")
    asked = []
    real = Ledger.owners
    monkeypatch.setattr(Ledger, "owners", lambda self, *a: asked.append(a) or real(self, *a))
    led.mark_committed(table, 1, "run-a", {"inserted": 9}, None, {}, held=held)
    assert asked == [(table, 1)]
    assert [(r["status"], r["inserted"]) for r in rows(p.spark, ledger, p.cfg.pipeline, table)[1]] == [
        ("committed", 9), ("committed", 9)]


def test_writes_land_when_another_process_added_a_ledger_column_this_session_has_not_seen(make_pipe, monkeypatch):
    """A newer version (another process, its own catalog cache) adds a ledger column. The claim and the marks go
    through Iceberg's API with the table as this session holds it: they land, the new column NULL. A statement naming
    the columns (the cursor reset's INSERT) that read them before the change fails ("Cannot find data for the output
    column"): the ledger reads them again after a refresh and writes once more. That read's staleness is made here:
    the race's timing is the only thing simulated."""
    p, ledger = ledger_of(make_pipe)
    led, table = Ledger(p.spark, ledger, p.cfg.pipeline), p.table.target
    stale = led._columns()
    iceberg_table(p.spark, ledger)  # loaded into this session's cache before the change
    p.spark.newSession().sql(f"ALTER TABLE {ledger} ADD COLUMN a_newer_column string")
    held = claim(led, table, p.topic, "run-a")
    held = led.mark_staged(table, 1, "run-a", staged_ranges(p.topic), None, held=held)
    led.mark_committed(table, 1, "run-a", {"inserted": 9}, None, {}, held=held)
    reads = []
    real = Ledger._columns
    monkeypatch.setattr(Ledger, "_columns", lambda self: stale if reads.append(1) or len(reads) % 2 else real(self))
    led.reset_cursor(table, p.topic, 2, {0: (10, 4)}, "reset-run")
    found = rows(p.spark, ledger, p.cfg.pipeline, table)
    assert [(r["status"], r["inserted"], r["a_newer_column"]) for r in found[1]] == [
        ("committed", 9, None), ("committed", 9, None)]
    assert [(r["mode"], r["end_offset"], r["a_newer_column"]) for r in found[2]] == [("reset", 4, None)]
    assert len(reads) == 2  # the INSERT read the columns twice
