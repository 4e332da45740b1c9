"""The offsets ledger: one Iceberg row per (table, batch, topic, partition), partitioned by table.

Lifecycle of a batch (``status``):

* ``claimed`` — written right after planning by the run that will process the batch (``run_id``, ``owner``). The
  claim overwrites the rows of (pipeline, table, batch_id), validated as serializable from the ledger snapshot the
  batch id was chosen from (``TableState.snapshot_id``): of two runs claiming one batch id, the second to commit gets a
  conflict and writes nothing. Each run then re-reads the ledger: a run that sees
  another owner of its batch id, an older pending batch, or a cursor that moved since it planned withdraws its rows
  and refuses with ``ConcurrentRunError``. Reads always drop the cached Iceberg
  metadata first (``_fresh``): another process's claim must be visible.
* ``staged`` — the batch's records are in the staging table; counts per partition are filled in.
* ``committed`` — the target MERGE is done; counts and the target snapshot id are filled in.

The claiming run writes each status as whole rows, validated like the claim from the snapshot since which it knows
nobody else wrote them (``cdc.ledger.write``); a recovered batch, or a write that cannot be validated, is updated row
by row (``run_id`` = this run's).

The next incremental batch of a partition starts at the highest committed ``end_offset`` of incremental batches. A
batch left ``claimed`` or ``staged`` by a run that died is taken over by the next run once its owner is known dead
(same host: the process is gone) or its claim was last renewed more than ``batch.claim_timeout_minutes`` ago (a live
run renews ``claimed_at`` while it works, see ``cdc.ledger.lease``). The host is ``CDC_OWNER_HOST`` when set (containers that
share a hostname must set it to something unique), else the machine's hostname.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from cdc.common.errors import ConcurrentRunError
from cdc.common.sql import lit
from cdc.iceberg.failures import is_commit_conflict
from cdc.kafka.plan import OffsetRange
from cdc.ledger.lease import process_owner
from cdc.ledger.model import cursor_sql
from cdc.ledger.state import LedgerRange, PendingBatch, TableState, with_claim
from cdc.ledger.write import (
    UNVALIDATABLE,
    claim_rows,
    columns_sql,
    commit_values,
    held_rows,
    overwrite_batch,
    rows_sql,
    snapshot_of_write,
    sql_value,
    write_claim,
)

if TYPE_CHECKING:
    from cdc.ledger.write import Held

T = TypeVar("T")
log = logging.getLogger("cdc.ledger")
# A write naming fewer columns than the ledger has (``Ledger._by_name``)
_MISSING_COLUMN = ("CANNOT_FIND_DATA", "Cannot find data for the output column")

_LEDGER_LOCKS: dict[str, threading.RLock] = {}
_LEDGER_LOCKS_GUARD = threading.Lock()


def range_sets(ranges: Sequence[LedgerRange]) -> list[str]:
    """The ``SET`` items of an UPDATE of a batch's rows that write each partition's counts (``LedgerRange``); pure."""

    def per_partition(field: str) -> str:
        cases = " ".join(f"WHEN {int(r.partition)} THEN {int(getattr(r, field))}" for r in ranges)
        return f"{field} = CASE `partition` {cases} ELSE 0 END"

    def per_partition_json(field: str) -> str:
        cases = [f"WHEN {int(r.partition)} THEN {lit(json.dumps(list(getattr(r, field))))}" for r in ranges
                 if getattr(r, field) is not None]
        return f"{field} = " + (f"CASE `partition` {' '.join(cases)} ELSE NULL END" if cases else "NULL")

    return [per_partition("events_read"), per_partition("events_skipped"), per_partition("dead_letters"),
            per_partition_json("max_position"), per_partition_json("server_ids")]


def ledger_lock(ledger: str) -> threading.RLock:
    """One write at a time to a ledger table from this process, whichever table's row it writes.

    Every commit to an Iceberg table replaces its one metadata pointer, so two commits to the ledger at once cannot
    both win: the loser refreshes, re-validates and writes its metadata again (``commit.retry.num-retries``; with a
    ``hadoop`` catalog it may wait seconds for the metadata lock). A group's threads (``cdc.run.group``), each table's
    lease keeper (``cdc.ledger.lease``) and the run itself all write the one ledger. Taking turns in the process costs a few
    hundred milliseconds of waiting for a small write; racing cost ~16 retried commits (each a metadata file) per
    20-table batch and waits of up to 5 s. Runs in other processes still race, and are retried and validated by
    Iceberg as before. Reentrant: a write may call another (a claim's MERGE fallback)."""
    with _LEDGER_LOCKS_GUARD:
        return _LEDGER_LOCKS.setdefault(ledger, threading.RLock())


class Ledger:
    def __init__(self, spark: Any, table_name: str, pipeline: str):
        self.spark, self.name, self.pipeline = spark, table_name, pipeline

    def _lock(self) -> threading.RLock:
        """What every write holds, whichever table's rows it writes: the process's lock of this ledger
        (``ledger_lock``), so the run's own writes, its lease keeper's renewals and the other tables of a group take
        turns."""
        return ledger_lock(self.name)

    def _where(self, table: str) -> str:
        return f"pipeline = {lit(self.pipeline)} AND table_name = {lit(table)}"

    def _write(self, what: str, table: str, sql: str | Callable[[tuple[str, ...]], str], attempts: int = 3) -> None:
        """Run a ledger write (``sql``, or its builder from the ledger's columns: ``_by_name``); conflicts with other
        tables' commits are retried, real races are reported."""
        for attempt in range(attempts):
            try:
                if callable(sql):
                    self._by_name(lambda columns: self.spark.sql(sql(columns)))
                else:
                    with self._lock():
                        self.spark.sql(sql)
                return
            except Exception as exc:
                if not is_commit_conflict(exc):
                    raise
                if attempt == attempts - 1:
                    raise ConcurrentRunError(
                        f"table {table}: ledger {what} kept conflicting with concurrent commits; another run is "
                        "probably processing this table. Retry later") from None
                time.sleep(0.5 * (attempt + 1))

    def _columns(self) -> tuple[str, ...]:
        """The ledger's columns as this session sees them (what a write is resolved against; no Spark job): a newer
        version may have added one, which this version's rows leave NULL (``cdc.ledger.write.rows_sql``)."""
        return tuple(self.spark.table(self.name).columns)

    def _by_name(self, write: Callable[[tuple[str, ...]], Any]) -> Any:
        """``write(columns)`` holding the ledger lock, with the ledger's columns read under it. A write names its
        columns; one that another process (a newer version) added after this session read them fails the write when
        the ledger is resolved afresh ("Cannot find data for the output column"): it runs once more on the columns
        of a refreshed ledger."""
        with self._lock():
            try:
                return write(self._columns())
            except Exception as exc:
                if not any(m in str(exc) for m in _MISSING_COLUMN):
                    raise
            log.info("ledger %s: a column was added while this write was prepared; it is written again",
                     self.name)
            self._fresh()
            return write(self._columns())

    def _fresh(self) -> str:
        """The ledger's name, after dropping Spark/Iceberg's cached metadata for it.

        Iceberg's catalog cache (``cache-enabled``, on by default) keeps the table as this session last loaded or
        wrote it; reads do not see other processes' commits. Every decision here (pending batches, owners, the
        cursor) must see them, so each read starts from the current metadata."""
        try:
            self.spark.catalog.refreshTable(self.name)
        except Exception:  # not created yet: the read below reports it
            pass
        return self.name

    def committed_offsets(self, table: str, topic: str) -> dict[int, int]:
        """Incremental cursor: partition → end of the last committed incremental batch."""

        self._fresh()
        rows = self.spark.sql(cursor_sql(self.name, self.pipeline, table, topic)).collect()
        return {int(r["partition"]): int(r["e"]) for r in rows}

    def next_batch_id(self, table: str) -> int:
        return self.state(table, None).next_batch_id

    def pending(self, table: str) -> PendingBatch | None:
        """The oldest batch that is claimed or staged but not committed."""
        return self.state(table, None).pending

    def state(self, table: str, topic: str | None) -> "TableState":
        """One read of what a run decides from (``TableState``): pending batches and their owners, the newest batch
        id, truncate barriers and, for ``topic``, the committed cursor and positions. A new batch reads it to plan, and
        again right after its claim to check that claim only when the claim cannot tell (``claim``'s ``planned``; the
        fewer ledger reads, the faster a small batch)."""
        return self.states({table: topic})[table]

    def states(self, tables: Mapping[str, str | None]) -> dict[str, "TableState"]:
        """``state`` of each table (table → its topic, or None), all from one ledger read naming one snapshot
        (``cdc.ledger.read``): a group's tables plan from it (``cdc.run.batch.run_batch``) instead of one read each."""
        from cdc.ledger.read import read_states

        self._fresh()
        return read_states(self.spark, self.name, self.pipeline, tables)

    def barrier(self, table: str, before_batch: int) -> tuple[int, ...] | None:
        """Newest truncate position recorded by earlier batches of the table."""
        return self.state(table, None).barrier_before(before_batch)

    def owners(self, table: str, batch_id: int) -> set[str]:
        return self.state(table, None).owners(batch_id)

    def claim(self, table: str, batch_id: int, mode: str, ranges: Sequence[OffsetRange], run_id: str,
              topic: str | None = None, cursor: dict[int, int] | None = None, *, seen: int | None,
              planned: TableState | None = None) -> "TableState":
        """Claim ``batch_id`` for this run, or raise ``ConcurrentRunError`` if another run got it first. ``seen``: the
        ledger snapshot ``batch_id`` was chosen from (``TableState.snapshot_id``; None: the ledger had none).

        Winning the row for ``batch_id`` is not enough: a run that planned while another run's batch was still
        uncommitted (it looked for pending batches just before the other claimed) would process the same offsets.
        So after the claim, the oldest pending batch of the table must be ours and (incremental) the committed
        cursor must still be the one we planned from; otherwise our claim is withdrawn and we refuse. Returns the
        ledger state read for that check (its truncate barriers are the batch's: earlier batches are all committed).

        ``planned``: the state ``seen`` belongs to. When it had no pending batch, ``batch_id`` is its next id and the
        claim committed as the write validated from ``seen``, that read is left out (one Spark job and a metadata
        reload per batch): no run wrote a row of ``batch_id`` since ``seen`` (the validation), and everything the
        check looks for needs one. A new batch of the table (a claim, a cursor reset, a bootstrap) takes the next
        free id, which is ``batch_id`` until a row of it exists; the cursor moves only when a batch commits, and none
        was pending. So the ledger is the planned state plus this claim (``with_claim``). A bootstrap claims its id
        the same way (``cdc.bootstrap.claim``). A cursor reset appends its row without validation: one landing right after the claim is what the read could still catch, and
        the staged mark (validated from the claim's snapshot) refuses it before anything is merged, as it refuses one
        landing after the read."""
        mine = self._append_claim(table, batch_id, mode, ranges, run_id, seen)
        if (mine is not None and planned is not None and planned.pending is None and planned.snapshot_id == seen
                and planned.next_batch_id == batch_id and (cursor is None or planned.cursor == cursor)):
            return with_claim(planned, batch_id, mode, ranges, run_id, process_owner(), mine)
        # One read answers every question about the claim, all about the same ledger state.
        state = self.state(table, topic if cursor is not None else None)
        owners = state.owners(batch_id)
        if owners != {run_id}:
            # Another run's claim won (ours conflicted or found it). Should both rows ever be there (a run of an older
            # version racing this one, or a cursor reset or bootstrap that appended a row under this id), whoever
            # sees another owner withdraws its row: the marks rewrite every row of the batch id (cdc.ledger.write).
            self.release(table, batch_id, run_id)
            raise ConcurrentRunError(
                f"table {table}: batch {batch_id} is being processed by another run "
                f"({', '.join(sorted(owners - {run_id})) or 'it was claimed first'}); this run (claim) stops without "
                "writing. Retry later")
        first = state.pending
        moved = cursor is not None and topic is not None and state.cursor != cursor
        if (first is not None and first.batch_id != batch_id) or moved:
            self.release(table, batch_id, run_id)
            why = (f"batch {first.batch_id} (run {first.run_id}) is still in progress" if first is not None
                   and first.batch_id != batch_id else "another run committed a batch while this one was planning")
            raise ConcurrentRunError(f"table {table}: {why}; this run withdrew its claim on batch {batch_id} and stops "
                                     "without writing. Retry later")
        return state

    def _append_claim(self, table: str, batch_id: int, mode: str, ranges: Sequence[OffsetRange], run_id: str,
                      seen: int | None) -> int | None:
        """Write this run's claim rows for ``batch_id`` unless another claim of it committed since ledger snapshot
        ``seen`` (``cdc.ledger.write``); a conflict is left to ``claim``, which reads who won. The ledger snapshot
        of the claim when it committed as the write validated from ``seen`` (None: it conflicted, it was the
        MERGE, or its snapshot was not found)."""
        from cdc.iceberg.row_commit import now_us

        rows = claim_rows(self.pipeline, table, batch_id, mode, ranges, run_id, process_owner(), now_us())
        write_id = uuid.uuid4().hex
        try:
            validated = self._by_name(lambda columns: write_claim(self.spark, self.name, self.pipeline, table,
                                                                  batch_id, rows, columns, seen, write_id))
        except Exception as exc:
            if not is_commit_conflict(exc):
                raise
            return None
        return snapshot_of_write(self.spark, self.name, write_id) if validated else None

    def reset_cursor(self, table: str, topic: str, batch_id: int, moves: Mapping[int, tuple[int, int]],
                     run_id: str) -> None:
        """Move the table's cursor to new offsets (``partition → (old cursor, new offset)``) with committed ``reset``
        rows (``cdc.ledger.model``); nothing is read or merged. A commit whose state Iceberg cannot tell is retried
        (``_write``): should the first have landed, the rows are there twice, under the same batch id with the same
        ends, and the cursor is the same (the newest row per partition by batch id)."""
        from cdc.iceberg.row_commit import now_us

        zero = dict.fromkeys(("events_read", "events_skipped", "dead_letters", "inserted", "updated", "deleted"), 0)
        at = now_us()
        rows = [{**row, "status": "committed", **zero, "committed_at": at} for row in claim_rows(
            self.pipeline, table, batch_id, "reset",
            [LedgerRange(topic, p, old, new) for p, (old, new) in sorted(moves.items())], run_id, process_owner(), at)]
        self._write("cursor reset", table,
                    lambda columns: f"INSERT INTO {self.name} ({columns_sql(columns)}) {rows_sql(rows, columns)}")

    def release(self, table: str, batch_id: int, run_id: str) -> None:
        """Withdraw this run's claim of a batch it has not staged (nothing else was written for it)."""
        self._write("release", table, f"DELETE FROM {self.name} WHERE {self._where(table)} "
                                      f"AND batch_id = {int(batch_id)} AND run_id = {lit(run_id)} "
                                      "AND status = 'claimed'", attempts=8)

    def take_over(self, table: str, pending: PendingBatch, run_id: str) -> None:
        """Take a dead run's batch over: only if its claim is still exactly the one we judged dead (same run,
        same ``claimed_at``); a claim renewed since then means the owner is alive, and we refuse."""
        seen = ("claimed_at IS NULL" if pending.claimed_at_us is None
                else f"unix_micros(claimed_at) = {int(pending.claimed_at_us)}")
        sql = (f"UPDATE {self.name} SET run_id = {lit(run_id)}, owner = {lit(process_owner())}, "
               f"claimed_at = current_timestamp() WHERE {self._where(table)} AND batch_id = {pending.batch_id} "
               f"AND run_id = {lit(pending.run_id)} AND {seen}")
        self._guarded(table, pending.batch_id, run_id, "take-over",
                      lambda: self._write("take-over", table, sql))  # a conflict (e.g. a ledger rewrite): retried

    def renew(self, table: str, batch_id: int, run_id: str) -> None:
        """Refresh this run's claim of a batch it is still working on (``claimed_at``; see ``cdc.ledger.lease``)."""
        self._write("lease renewal", table, f"UPDATE {self.name} SET claimed_at = current_timestamp() "
                                            f"WHERE {self._where(table)} AND batch_id = {int(batch_id)} "
                                            f"AND run_id = {lit(run_id)} AND status IN ('claimed', 'staged')")

    def update(self, table: str, batch_id: int, run_id: str, sets: Mapping[str, Any], what: str,
               extra: Sequence[str] = ()) -> None:
        """Set ``sets`` (column → value, ``sql_value``) and the ``extra`` SET items (SQL) on the rows of ``batch_id``
        run ``run_id`` holds: a commit's row-level write (``mark_committed``, a bootstrap's ``cdc.bootstrap.claim``)."""
        items = [*(f"{k} = {sql_value(k, v)}" for k, v in sets.items()), *extra]
        self._write(what, table, f"UPDATE {self.name} SET {', '.join(items)} WHERE {self._where(table)} "
                                 f"AND batch_id = {int(batch_id)} AND run_id = {lit(run_id)}")

    def _guarded(self, table: str, batch_id: int, run_id: str, what: str, write: Callable[[], Any]) -> None:
        try:
            with self._lock():
                write()
        except Exception as exc:
            if not is_commit_conflict(exc):
                raise
        owners = self.owners(table, batch_id)  # one read: both questions about the same ledger state
        others = owners - {run_id}
        if others or run_id not in owners:
            raise ConcurrentRunError(
                f"table {table}: batch {batch_id} is being processed by another run ({', '.join(sorted(others))}); "
                f"this run ({what}) stops without writing. Retry later")

    def still_owner(self, table: str, batch_id: int, run_id: str) -> None:
        """Raise if another run took this batch over (our claim outlived batch.claim_timeout_minutes)."""
        owners = self.owners(table, batch_id)
        if owners != {run_id}:
            raise ConcurrentRunError(
                f"table {table}: batch {batch_id} was taken over by another run "
                f"({', '.join(sorted(owners - {run_id}))}) while this one was still working (raise "
                "batch.claim_timeout_minutes?); this run stops. The table stays correct: the other run finishes it")

    def mark_staged(self, table: str, batch_id: int, run_id: str, ranges: Sequence[LedgerRange],
                    barrier: tuple[int, ...] | None, held: "Held | None" = None) -> "Held | None":
        """Record the staged batch's counts. ``held``: this run's claim of it (``cdc.ledger.write``): the rows are
        written whole, validated from ``held.since``; returns what they now hold, for the commit (None: they were
        updated row by row, and the commit will be too). Without ``held`` (a recovered batch) only this run's rows
        are updated (``run_id``); whether it still owns the batch is asked once, before the commit: a run that lost
        its claim and merges anyway is fenced by the MERGE's conditions."""
        if held is not None:
            now = replace(held, ranges=tuple(ranges), barrier=barrier, staged_at_us=time.time_ns() // 1000)
            written, since, _ = self._rewrite(table, run_id, now)
            if written:
                return None if since is None else replace(now, since=since)

        sets = ["status = 'staged'", *range_sets(ranges),
                f"truncate_barrier = {lit(json.dumps(list(barrier))) if barrier else 'NULL'}",
                "staged_at = current_timestamp()"]
        self._write("update", table, f"UPDATE {self.name} SET {', '.join(sets)} WHERE {self._where(table)} "
                                     f"AND batch_id = {int(batch_id)} AND run_id = {lit(run_id)}")
        return None

    def mark_committed(self, table: str, batch_id: int, run_id: str, counts: dict[str, int], snapshot_id: int | None,
                       phase_seconds: dict[str, float], held: "Held | None" = None,
                       ranges: Sequence[LedgerRange] | None = None, barrier: tuple[int, ...] | None = None) -> None:
        """Record the commit; ``held``: what the staged mark wrote (``mark_staged``), rewritten whole with it.
        ``ranges``: the counts of a batch committed without being staged (nothing in it to apply), written with the
        commit in one write (so no batch is ever left ``staged`` without staged rows); ``held`` is then the claim;
        ``barrier``: such a batch's truncate barrier (its truncates into a table not created yet)."""
        from cdc.iceberg.row_commit import now_us

        sets = commit_values(counts, snapshot_id, phase_seconds, now_us())
        if ranges is not None and held is not None:
            held = replace(held, ranges=tuple(ranges), barrier=barrier, staged_at_us=now_us())
        counted = [*range_sets(ranges), "staged_at = current_timestamp()",
                   *([f"truncate_barrier = {lit(json.dumps(list(barrier)))}"] if barrier else [])] \
            if ranges is not None else []
        owner_checked = False  # a rewrite that conflicted has just asked
        if held is not None:
            written, _, owner_checked = self._rewrite(table, run_id, held, sets)
            if written:
                return
        if not owner_checked:
            self.still_owner(table, batch_id, run_id)
        self.update(table, batch_id, run_id, sets, "commit", extra=counted)

    def _rewrite(self, table: str, run_id: str, held: "Held",
                 committed: Mapping[str, Any] | None = None) -> tuple[bool, int | None, bool]:
        """Write a held batch's rows whole (``held_rows``: staged, or committed with ``committed``'s columns),
        validated from ``held.since`` (``cdc.ledger.write``): whether they were written, the ledger snapshot that
        did (None: not found), and whether the batch's owners were read (after a conflict). Not written: the write
        could not be validated, or it conflicted while the batch is still this run's (its own lease renewal, a
        compaction); the caller updates the rows instead. A batch another run took over raises
        ``ConcurrentRunError``."""

        rows = held_rows(self.pipeline, table, held, run_id, process_owner(), committed)
        write_id = uuid.uuid4().hex
        try:
            with self._lock():
                overwrite_batch(self.spark, self.name, self.pipeline, table, held.batch_id, rows, held.since, write_id)
        except Exception as exc:
            mark = "committed" if committed else "staged"
            why = next((m for m in UNVALIDATABLE if m in str(exc)), None)
            if why is not None:
                log.info("table %s: batch %d's %s mark cannot be validated as a rewrite (%s); it is written as a "
                         "row-level UPDATE", table, held.batch_id, mark, why)
                return False, None, False
            if not is_commit_conflict(exc):
                raise
            self.still_owner(table, held.batch_id, run_id)
            log.info("table %s: batch %d's %s mark conflicted with a ledger commit of this run (its lease renewal, or "
                     "a compaction); it is written as a row-level UPDATE", table, held.batch_id, mark)
            return False, None, True
        return True, snapshot_of_write(self.spark, self.name, write_id), False
