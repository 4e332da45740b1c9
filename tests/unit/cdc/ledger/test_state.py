"""cdc.ledger.table_state: what one ledger read tells a run, and ``with_claim``: what it would tell right after a
claim (pure; the Spark side is in the integration tests)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cdc.ledger.state import LedgerRange, table_state, with_claim


def row(batch: int, status: str, mode: str = "incremental", topic: str = "t", partition: int = 0, end: int = 0,
        run: str = "r", position: str | None = None, barrier: str | None = None, servers: str | None = None
        ) -> dict[str, Any]:
    return {"batch_id": batch, "mode": mode, "topic": topic, "partition": partition, "start_offset": 0,
            "end_offset": end, "status": status, "events_read": 1, "events_skipped": 0, "dead_letters": 0,
            "run_id": run, "owner": f"h:{run}", "claimed_at_us": 5, "max_position": position,
            "truncate_barrier": barrier, "server_ids": servers}


ROWS = [
    row(1, "committed", end=10, position="[100]", servers='["1"]'),
    row(1, "committed", partition=1, end=4, position="[90]", servers="[]"),
    row(2, "committed", mode="backfill", end=3, position="[50]", barrier="[40]", servers='["8"]'),
    row(3, "committed", end=20, position="[80]", servers='["1", "2"]'),  # a redelivered older change
    row(4, "committed", mode="reset", partition=1, end=2),
    row(5, "committed", topic="other", end=99, position="[999]", barrier="[70]"),
    row(7, "claimed", end=30, run="b", servers='["9"]'), row(7, "claimed", partition=1, end=8, run="b"),
    row(6, "staged", end=25, run="a"), row(6, "staged", end=25, run="c"),
]


def test_cursor_positions_and_next_batch_id_of_the_topic() -> None:
    s = table_state(ROWS, "db.t", "t")
    assert s.cursor == {0: 20, 1: 2}  # newest committed incremental/reset row per partition; backfills never move it
    assert s.positions == {0: (100,), 1: (90,)}  # newest by position, committed incremental rows of the topic only
    assert s.servers == {0: {"1", "2"}, 1: set()}  # every server id of the same rows (partition 1: snapshot reads)
    assert s.next_batch_id == 8


def test_pending_is_the_oldest_uncommitted_batch_and_owners_per_batch() -> None:
    """Owners are the runs holding any row of a batch id, committed ones too (a claim that shares its id with a
    committed row of another writer withdraws)."""
    s = table_state(ROWS, "db.t", "t")
    assert s.pending is not None and s.pending.batch_id == 6 and s.pending.status == "staged"
    assert s.owners(6) == {"a", "c"} and s.owners(7) == {"b"} and s.owners(3) == {"r"} and s.owners(99) == set()


def test_barrier_before_a_batch_is_the_newest_of_earlier_rows() -> None:
    s = table_state(ROWS, "db.t", "t")
    assert s.barrier_before(2) is None and s.barrier_before(3) == (40,) and s.barrier_before(8) == (70,)


def test_no_topic_and_no_rows() -> None:
    s = table_state(ROWS, "db.t", None)
    assert s.cursor == {} and s.positions == {} and s.servers == {} and s.next_batch_id == 8
    empty = table_state([], "db.t", "t")
    assert empty.pending is None and empty.next_batch_id == 1 and empty.cursor == {} and empty.barrier_before(9) is None


def test_a_claim_added_to_a_state_reads_as_the_same_rows_with_the_claim_would() -> None:
    planned_rows = [r for r in ROWS if r["status"] == "committed"]
    planned = table_state(planned_rows, "db.t", "t", snapshot_id=11)
    # a claim's rows, as the ledger holds them: no counts yet
    claim = [{**row(6, "claimed", end=e, partition=p, run="me"), "start_offset": s_, "events_read": None,
              "events_skipped": None, "dead_letters": None} for p, s_, e in ((0, 20, 40), (1, 2, 9))]
    ranges = [LedgerRange("t", 0, 20, 40), LedgerRange("t", 1, 2, 9)]
    derived = with_claim(planned, 6, "incremental", ranges, "me", "h:me", snapshot_id=12)
    read = table_state(planned_rows + claim, "db.t", "t", snapshot_id=12)
    assert derived.pending is not None and derived.pending.claimed_at_us is None  # unknown without the read
    assert derived == replace(read, pending=replace(read.pending, claimed_at_us=None))
    assert derived.next_batch_id == 7 and derived.owners(6) == {"me"}
