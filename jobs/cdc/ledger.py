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

The next incremental batch of a partition starts at the highest committed ``end_offset`` of incremental batches. A
batch left ``claimed`` or ``staged`` by a run that died is taken over by the next run once its owner is known dead
(same host: the process is gone) or its claim was last renewed more than ``batch.claim_timeout_minutes`` ago (a live
run renews ``claimed_at`` while it works, see ``cdc.lease``). The host is ``CDC_OWNER_HOST`` when set (containers that
share a hostname must set it to something unique), else the machine's hostname.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence, TypeVar

from cdc.errors import ConcurrentRunError
from cdc.sql import lit

T = TypeVar("T")
_CONFLICT_MARKERS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException",
                     "Found conflicting files", "AlreadyExistsException")


@dataclass(frozen=True)
class LedgerRange:
    topic: str
    partition: int
    start: int
    end: int
    events_read: int = 0
    events_skipped: int = 0
    dead_letters: int = 0
    max_position: tuple[int, ...] | None = None
    server_ids: tuple[str, ...] | None = None  # the server ids of the partition's changes (cdc.regression)


@dataclass(frozen=True)
class PendingBatch:
    batch_id: int
    mode: str
    status: str  # claimed | staged
    ranges: tuple[LedgerRange, ...]
    run_id: str
    owner: str
    claimed_at_us: int | None  # epoch microseconds (zone-free: read with unix_micros, never as a local datetime)

    @property
    def claimed_at(self) -> str:
        """The claim's time for messages, in UTC."""
        if self.claimed_at_us is None:
            return "never"
        return datetime.fromtimestamp(self.claimed_at_us / 1e6, tz=timezone.utc).isoformat(timespec="seconds")


def owner_host() -> str:
    return os.environ.get("CDC_OWNER_HOST") or socket.gethostname()


def process_owner() -> str:
    """``host:pid:start`` of this process (start time makes PID reuse harmless)."""
    return f"{owner_host()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_alive(owner: str, claimed_at_us: int | None, lease_seconds: float, now: float | None = None) -> bool:
    """Is the run that owns a pending batch still running? Same host: ask the OS; else trust the lease.

    ``claimed_at_us`` is epoch microseconds, so the age does not depend on any process's time zone."""
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host == owner_host() and pid.isdigit() and start != "?":
        return _start_time(int(pid)) == start
    if claimed_at_us is None:
        return False
    age = (time.time() if now is None else now) - claimed_at_us / 1e6
    return age < lease_seconds


def is_commit_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return any(m in text for m in _CONFLICT_MARKERS)


class Ledger:
    def __init__(self, spark: Any, table_name: str, pipeline: str):
        self.spark, self.name, self.pipeline = spark, table_name, pipeline
        # One ledger write at a time per table and process: the lease keeper's renewals (a thread) never race this
        # run's own claim/staged/committed updates of the table into an Iceberg commit conflict. Writes of different
        # tables (a group's threads, cdc.group) run at once: the ledger is partitioned by table, so their commits
        # touch different files and Iceberg retries the metadata swap (commit.retry.num-retries) without a conflict.
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()

    def _lock(self, table: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault(table, threading.RLock())

    def _where(self, table: str) -> str:
        return f"pipeline = {lit(self.pipeline)} AND table_name = {lit(table)}"

    def _write(self, what: str, table: str, sql: str, attempts: int = 3) -> None:
        """Run a ledger write; conflicts with other tables' commits are retried, real races are reported."""
        for attempt in range(attempts):
            try:
                with self._lock(table):
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
        from cdc.ledger_model import cursor_sql

        self._fresh()
        rows = self.spark.sql(cursor_sql(self.name, self.pipeline, table, topic)).collect()
        return {int(r["partition"]): int(r["e"]) for r in rows}

    def next_batch_id(self, table: str) -> int:
        self._fresh()
        row = self.spark.sql(f"SELECT max(batch_id) AS b FROM {self.name} WHERE {self._where(table)}").first()
        return 1 if row is None or row["b"] is None else int(row["b"]) + 1

    def pending(self, table: str) -> PendingBatch | None:
        """The oldest batch that is claimed or staged but not committed."""
        self._fresh()
        return _pending([r.asDict() for r in self.spark.sql(
            f"SELECT *, unix_micros(claimed_at) AS claimed_at_us FROM {self.name} WHERE {self._where(table)} "
            "AND status IN ('claimed', 'staged')").collect()])

    def state(self, table: str, topic: str | None) -> "TableState":
        """One read of what a run decides from (``TableState``): pending batches and their owners, the newest batch
        id, truncate barriers and, for ``topic``, the committed cursor and positions. A new incremental batch reads it
        twice: to plan, and right after its claim to check that claim (the fewer ledger reads, the faster a small
        batch: each is a Spark job)."""
        from cdc.ledger_model import CURSOR_MODES

        from cdc.tables import snapshot_id

        self._fresh()
        seen = snapshot_id(self.spark, self.name)  # before the query: a claim validated from it is never laxer
        modes = ", ".join(lit(m) for m in CURSOR_MODES)
        committed = ("FALSE" if topic is None else
                     f"(topic = {lit(topic)} AND status = 'committed' AND mode IN ({modes}))")
        rows = self.spark.sql(
            "SELECT batch_id, mode, topic, `partition`, start_offset, end_offset, status, events_read, events_skipped, "
            "dead_letters, run_id, owner, claimed_at_us, max_position, server_ids, truncate_barrier, top FROM ("
            f"SELECT *, unix_micros(claimed_at) AS claimed_at_us, max(batch_id) OVER (PARTITION BY table_name) AS top FROM {self.name} "
            f"WHERE {self._where(table)}) WHERE status IN ('claimed', 'staged') OR truncate_barrier IS NOT NULL "
            f"OR batch_id = top OR {committed}").collect()
        return table_state([r.asDict() for r in rows], table, topic, seen)

    def barrier(self, table: str, before_batch: int) -> tuple[int, ...] | None:
        """Newest truncate position recorded by earlier batches of the table."""
        self._fresh()
        rows = self.spark.sql(
            f"SELECT DISTINCT truncate_barrier FROM {self.name} WHERE {self._where(table)} "
            f"AND batch_id < {int(before_batch)} AND truncate_barrier IS NOT NULL").collect()
        found = [tuple(json.loads(r[0])) for r in rows if r[0]]
        return max(found) if found else None

    def owners(self, table: str, batch_id: int) -> set[str]:
        self._fresh()
        rows = self.spark.sql(f"SELECT DISTINCT run_id FROM {self.name} WHERE {self._where(table)} "
                              f"AND batch_id = {int(batch_id)}").collect()
        return {r[0] for r in rows}

    def claim(self, table: str, batch_id: int, mode: str, ranges: Sequence[LedgerRange], run_id: str,
              topic: str | None = None, cursor: dict[int, int] | None = None, *, seen: int | None) -> "TableState":
        """Claim ``batch_id`` for this run, or raise ``ConcurrentRunError`` if another run got it first. ``seen``: the
        ledger snapshot ``batch_id`` was chosen from (``TableState.snapshot_id``; None: the ledger had none).

        Winning the row for ``batch_id`` is not enough: a run that planned while another run's batch was still
        uncommitted (it looked for pending batches just before the other claimed) would process the same offsets.
        So after the claim, the oldest pending batch of the table must be ours and (incremental) the committed
        cursor must still be the one we planned from; otherwise our claim is withdrawn and we refuse. Returns the
        ledger state read for that check (its truncate barriers are the batch's: earlier batches are all committed)."""
        self._append_claim(table, batch_id, mode, ranges, run_id, seen)
        # One read answers every question about the claim, all about the same ledger state.
        state = self.state(table, topic if cursor is not None else None)
        owners = state.owners(batch_id)
        if owners != {run_id}:
            # Another run's claim won (ours conflicted or found it). Should both rows ever be there (a run of an older
            # version racing this one), whoever sees another owner withdraws its row.
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

    def _append_claim(self, table: str, batch_id: int, mode: str, ranges: Sequence[LedgerRange], run_id: str,
                      seen: int | None) -> None:
        """Write this run's claim rows for ``batch_id`` unless another claim of it committed since ledger snapshot
        ``seen`` (``cdc.ledger_claim``); a conflict is left to ``claim``, which reads who won."""
        from cdc.ledger_claim import claim_rows_sql, write_claim

        rows = claim_rows_sql(self.pipeline, table, batch_id, mode, ranges, run_id, process_owner())
        try:
            with self._lock(table):
                write_claim(self.spark, self.name, self.pipeline, table, batch_id, rows, seen)
        except Exception as exc:
            if not is_commit_conflict(exc):
                raise

    def reset_cursor(self, table: str, topic: str, batch_id: int, moves: Mapping[int, tuple[int, int]],
                     run_id: str) -> None:
        """Move the table's cursor to new offsets (``partition → (old cursor, new offset)``) with committed ``reset``
        rows (``cdc.ledger_model``); nothing is read or merged."""
        values = ", ".join(
            f"({lit(self.pipeline)}, {lit(table)}, {int(batch_id)}, 'reset', {lit(topic)}, {int(p)}, {int(old)}, "
            f"{int(new)}, 'committed', 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, current_timestamp(), {lit(run_id)}, "
            f"{lit(process_owner())}, current_timestamp(), NULL, NULL)" for p, (old, new) in sorted(moves.items()))
        self._write("cursor reset", table, f"INSERT INTO {self.name} VALUES {values}")

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
        """Refresh this run's claim of a batch it is still working on (``claimed_at``; see ``cdc.lease``)."""
        self._write("lease renewal", table, f"UPDATE {self.name} SET claimed_at = current_timestamp() "
                                            f"WHERE {self._where(table)} AND batch_id = {int(batch_id)} "
                                            f"AND run_id = {lit(run_id)} AND status IN ('claimed', 'staged')")

    def _guarded(self, table: str, batch_id: int, run_id: str, what: str, write: Callable[[], Any]) -> None:
        try:
            with self._lock(table):
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
                    barrier: tuple[int, ...] | None) -> None:
        """Only this run's rows are updated (``run_id``); whether it still owns the batch is asked once, before the
        commit (``mark_committed``): a run that lost its claim and merges anyway is fenced by the MERGE's
        conditions, and a check here would only stop it earlier, for one more ledger read per batch."""
        def per_partition(field: str) -> str:
            cases = " ".join(f"WHEN {int(r.partition)} THEN {int(getattr(r, field))}" for r in ranges)
            return f"{field} = CASE `partition` {cases} ELSE 0 END"

        def per_partition_json(field: str) -> str:
            cases = [f"WHEN {int(r.partition)} THEN {lit(json.dumps(list(getattr(r, field))))}" for r in ranges
                     if getattr(r, field) is not None]
            return f"{field} = " + (f"CASE `partition` {' '.join(cases)} ELSE NULL END" if cases else "NULL")

        sets = ["status = 'staged'", per_partition("events_read"), per_partition("events_skipped"),
                per_partition("dead_letters"),
                f"truncate_barrier = {lit(json.dumps(list(barrier))) if barrier else 'NULL'}",
                per_partition_json("max_position"), per_partition_json("server_ids"),
                "staged_at = current_timestamp()"]
        self._write("update", table, f"UPDATE {self.name} SET {', '.join(sets)} WHERE {self._where(table)} "
                                     f"AND batch_id = {int(batch_id)} AND run_id = {lit(run_id)}")

    def mark_committed(self, table: str, batch_id: int, run_id: str, counts: dict[str, int], snapshot_id: int | None,
                       phase_seconds: dict[str, float]) -> None:
        self.still_owner(table, batch_id, run_id)
        sets = [
            "status = 'committed'",
            *(f"{k} = {int(counts.get(k, 0))}" for k in ("inserted", "updated", "deleted")),
            f"target_snapshot_id = {int(snapshot_id) if snapshot_id is not None else 'NULL'}",
            f"phase_seconds = {lit(json.dumps({k: round(v, 3) for k, v in phase_seconds.items()}))}",
            "committed_at = current_timestamp()",
        ]
        self._write("commit", table, f"UPDATE {self.name} SET {', '.join(sets)} WHERE {self._where(table)} "
                                     f"AND batch_id = {int(batch_id)} AND run_id = {lit(run_id)}")


@dataclass(frozen=True)
class TableState:
    """A table's ledger as one read saw it (``Ledger.state``)."""

    pending: PendingBatch | None  # the oldest claimed or staged batch
    run_ids: Mapping[int, frozenset[str]]  # pending batch id → the runs that hold rows of it
    last_batch_id: int | None
    cursor: dict[int, int]  # the topic's committed cursor (empty without a topic)
    positions: dict[int, tuple[int, ...]]  # partition → newest committed source position (``max_position``)
    servers: dict[int, frozenset[str]]  # partition → server ids committed (``server_ids``; absent: none recorded)
    barriers: tuple[tuple[int, tuple[int, ...]], ...]  # (batch id, truncate barrier) of every row that has one
    snapshot_id: int | None = None  # the ledger snapshot the read started from (None: none yet); a claim checks it

    @property
    def next_batch_id(self) -> int:
        return 1 if self.last_batch_id is None else self.last_batch_id + 1

    def owners(self, batch_id: int) -> set[str]:
        return set(self.run_ids.get(batch_id, ()))

    def barrier_before(self, batch_id: int) -> tuple[int, ...] | None:
        """``Ledger.barrier``: the newest truncate barrier of earlier batches."""
        found = [b for i, b in self.barriers if i < batch_id]
        return max(found) if found else None


def _pending(rows: Sequence[Mapping[str, Any]]) -> PendingBatch | None:
    rows = sorted((r for r in rows if r["status"] in ("claimed", "staged")),
                  key=lambda r: (r["batch_id"], r["topic"], r["partition"]))
    if not rows:
        return None
    mine = [r for r in rows if r["batch_id"] == rows[0]["batch_id"]]
    return PendingBatch(
        batch_id=int(mine[0]["batch_id"]), mode=mine[0]["mode"], status=mine[0]["status"],
        ranges=tuple(LedgerRange(r["topic"], r["partition"], r["start_offset"], r["end_offset"],
                                 r["events_read"] or 0, r["events_skipped"] or 0, r["dead_letters"] or 0)
                     for r in mine),
        run_id=mine[0]["run_id"], owner=mine[0]["owner"] or "", claimed_at_us=mine[0]["claimed_at_us"])


def table_state(rows: Sequence[Mapping[str, Any]], table: str, topic: str | None,
                snapshot_id: int | None = None) -> TableState:
    """``TableState`` from ledger rows (pure; ``Ledger.state`` selects the rows it needs)."""
    from cdc.ledger_model import committed_cursor, known_servers, newest_positions

    run_ids: dict[int, set[str]] = {}
    for r in rows:
        if r["status"] in ("claimed", "staged"):
            run_ids.setdefault(int(r["batch_id"]), set()).add(r["run_id"])
    mine = [{**r, "table_name": table} for r in rows if topic is not None and r["topic"] == topic]
    committed = [r for r in mine if r["status"] == "committed" and r["mode"] == "incremental"]
    return TableState(
        pending=_pending(rows), run_ids={b: frozenset(s) for b, s in run_ids.items()},
        last_batch_id=max((int(r["batch_id"]) for r in rows), default=None),
        cursor=committed_cursor(mine, table).get(topic, {}) if topic is not None else {},
        positions=newest_positions(r for r in committed if r["max_position"] is not None),
        servers=known_servers(committed),
        barriers=tuple(sorted((int(r["batch_id"]), tuple(json.loads(r["truncate_barrier"]))) for r in rows
                              if r["truncate_barrier"])),
        snapshot_id=snapshot_id)
