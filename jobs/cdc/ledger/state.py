"""What one read of the ledger says about a table (``Ledger.state``): its ranges, its oldest pending batch and the
state a new batch is planned and checked from. Pure: built from the rows the read returned (``table_state``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from cdc.kafka.plan import OffsetRange
from cdc.ledger.model import committed_cursor, known_servers, newest_positions


@dataclass(frozen=True)
class LedgerRange(OffsetRange):
    """A batch's range as the ledger holds it: the offsets, and once staged what the batch read there."""

    events_read: int = 0
    events_skipped: int = 0
    dead_letters: int = 0
    max_position: tuple[int, ...] | None = None
    server_ids: tuple[str, ...] | None = None  # the server ids of the partition's changes (cdc.positions.regression)


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


@dataclass(frozen=True)
class TableState:
    """A table's ledger as one read saw it (``Ledger.state``)."""

    pending: PendingBatch | None  # the oldest claimed or staged batch
    # batch id → the runs that hold rows of it, whatever their status: a claim is the batch's only writer only if
    # no other run's row has its id (a cursor reset or a bootstrap appends a committed row under the next id)
    run_ids: Mapping[int, frozenset[str]]
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


def oldest_pending(rows: Sequence[Mapping[str, Any]]) -> PendingBatch | None:
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
    """``TableState`` from the table's ledger rows (pure; ``Ledger.state`` reads them all)."""

    run_ids: dict[int, set[str]] = {}
    for r in rows:
        run_ids.setdefault(int(r["batch_id"]), set()).add(r["run_id"])
    mine = [{**r, "table_name": table} for r in rows if topic is not None and r["topic"] == topic]
    committed = [r for r in mine if r["status"] == "committed" and r["mode"] == "incremental"]
    return TableState(
        pending=oldest_pending(rows), run_ids={b: frozenset(s) for b, s in run_ids.items()},
        last_batch_id=max((int(r["batch_id"]) for r in rows), default=None),
        cursor=committed_cursor(mine, table).get(topic, {}) if topic is not None else {},
        positions=newest_positions(r for r in committed if r["max_position"] is not None),
        servers=known_servers(committed),
        barriers=tuple(sorted((int(r["batch_id"]), tuple(json.loads(r["truncate_barrier"]))) for r in rows
                              if r["truncate_barrier"])),
        snapshot_id=snapshot_id)


def with_claim(planned: TableState, batch_id: int, mode: str, ranges: Sequence[OffsetRange], run_id: str,
               owner: str, snapshot_id: int) -> TableState:
    """``planned`` (a state without pending batches) plus the claim of ``batch_id`` that ledger snapshot
    ``snapshot_id`` committed: what ``Ledger.state`` reads right after that claim when nothing else was written
    (``Ledger.claim``); pure."""
    claimed = tuple(LedgerRange(r.topic, r.partition, r.start, r.end) for r in ranges)
    return replace(planned, pending=PendingBatch(batch_id, mode, "claimed", claimed, run_id, owner, None),
                   run_ids={**planned.run_ids, batch_id: frozenset({run_id})},
                   last_batch_id=max(batch_id, planned.last_batch_id or 0), snapshot_id=snapshot_id)
