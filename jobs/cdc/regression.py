"""Source positions that went far backwards: a database failover, ``RESET MASTER``, a blue-green switch or a move to a
new PostgreSQL cluster. Changes at lower positions than the table holds count as "older" and would be skipped
silently, so such a batch fails first.

Every staged change of an incremental batch is compared with the highest position its partition reached: the newest
committed from it before (ledger ``max_position``) or the newest in this batch, whichever is higher. (Comparing only
the batch's newest position misses the common case: one batch holding the last changes before the failover and the
first after it.) Going backwards a little is normal (a connector restart redelivers what it had not committed);
*far* backwards is not:

* MySQL/MariaDB: the binlog file number drops by three or more, to half of what it was or less (``RESET MASTER``
  starts again at ``.000001``; a replica's own, much lower, binlog numbering);
* PostgreSQL: the LSN drops by 1 GiB or more, to half of what it was or less (a new cluster starts its WAL near
  zero);
* explicit ``ordering:`` lists: not checked (their meaning is unknown).

The way on is ``tables[].ordering_epoch``: raise it, and every change of the new epoch wins over what is stored. A
raised epoch starts, in each partition, at the first change whose position fell far back (:data:`PENDING` until a
batch shows it), so the last changes before the failover keep the old epoch even when they share a batch with the
first ones after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import AbstractSet as Set, Mapping, Sequence

from cdc.errors import PositionRegression
from cdc.layout import align
from cdc.ordering import Ordering
from cdc.sql import q

PG_MIN_DROP = 1 << 30  # bytes of WAL; a restart's redelivery goes back far less
MYSQL_MIN_DROP = 3  # binlog files; a restart's redelivery goes back one at most (files are 1 GiB by default)


KINDS = ("postgresql", "postgresql_lsn", "mysql")
PENDING = 1 << 62  # an epoch's first offset in a partition that has not shown the fall yet (no record reaches it)


def highest(newest: Mapping[int, tuple[int, ...] | None], previous: Mapping[int, tuple[int, ...]],
            width: int) -> dict[int, tuple[int, ...]]:
    """partition → the highest position it reached: committed before or in this batch (epoch first, when used)."""
    out: dict[int, tuple[int, ...]] = {}
    for p in set(newest) | set(previous):
        known = [x for x in (newest.get(p), align(previous.get(p), width)) if x is not None and len(x) == width]
        if known:
            out[p] = max(known)
    return out


def _far(kind: str, top: int, value: int) -> bool:
    """The rule, on the one column it reads (binlog file number / LSN); ``far_back_sql`` writes the same in SQL."""
    drop = MYSQL_MIN_DROP if kind == "mysql" else PG_MIN_DROP
    return top - value >= drop and value <= top // 2


def _column(kind: str, lead: int, width: int) -> int:
    return lead if kind == "mysql" else width - 1  # binlog file number first; the LSN last


def could_fall(kind: str, lead: int, hi: Mapping[int, tuple[int, ...]],
               lowest: Mapping[int, tuple[int | None, ...] | None]) -> bool:
    """Cheap test before ``first_far_back_sql``: can any partition hold a change that fell far back? (``lowest``: each
    ordering column's lowest value in the batch, per partition; the rule is monotone in its column.)"""
    if kind not in KINDS:
        return False
    for p, top in hi.items():
        low = lowest.get(p)
        i = _column(kind, lead, len(top))
        if low is not None and len(low) == len(top) and low[i] is not None and _far(kind, top[i], low[i]):
            return True
    return False


def far_back_sql(kind: str, columns: Sequence[str], lead: int, hi: Mapping[int, tuple[int, ...]]) -> str | None:
    """SQL predicate over staged changes: the record's position fell far below its partition's ``hi`` (same epoch);
    None when the ordering is not checked or nothing is known."""
    if kind not in KINDS or not hi:
        return None
    i = _column(kind, lead, len(columns))  # as _far: down by 3 binlog files / 1 GiB of WAL or more, to half or less
    c, drop = q(columns[i]), MYSQL_MIN_DROP if kind == "mysql" else PG_MIN_DROP
    parts = []
    for p, top in sorted(hi.items()):
        conds = [f"__partition = {int(p)}"] + ([f"{q(columns[0])} = {int(top[0])}"] if lead else [])
        v = int(top[i])
        conds.append(f"{v} - {c} >= {drop} AND {c} <= {v // 2}")
        parts.append("(" + " AND ".join(conds) + ")")
    return " OR ".join(parts)


def first_far_back_sql(staging: str, batch_id: int, kind: str, columns: Sequence[str], lead: int,
                       hi: Mapping[int, tuple[int, ...]]) -> str | None:
    """partition → the first staged change (offset, position) that fell far back; None: nothing to check."""
    pred = far_back_sql(kind, columns, lead, hi)
    if pred is None:
        return None
    position = "array(" + ", ".join(f"CAST({q(c)} AS BIGINT)" for c in columns) + ")"
    return (f"SELECT __partition AS p, min(named_struct('o', __offset, 'pos', {position})) AS first FROM {staging} "
            f"WHERE batch_id = {int(batch_id)} AND __kind = 'change' AND ({pred}) GROUP BY __partition")


def settle(table: str, topic: str, ordering: Ordering, found: Mapping[int, tuple[int, tuple[int, ...]]],
           hi: Mapping[int, tuple[int, ...]], movable: Set[int] = frozenset()) -> Ordering:
    """Where positions fell far back (``found``: partition → first such offset and its position): start the newest
    epoch there when it waits for that (:data:`PENDING`, or a start set by this very run: ``movable``), else raise
    ``PositionRegression`` (nothing merged)."""
    epochs = ordering.epochs or ()
    newest = epochs[-1] if epochs else None
    starts = dict(newest[1]) if newest else {}
    lead = 0 if ordering.epochs is None else 1
    for p, (offset, pos) in sorted(found.items()):
        if newest is not None and (starts.get(p) == PENDING or p in movable):
            starts[p] = offset
            continue
        epoch = ordering.epoch or 0
        raise PositionRegression(
            f"table {table}: topic {topic} partition {p} offset {offset}: source positions went far backwards "
            f"({list(pos[lead:])}, while this partition had reached {list(hi[p][lead:])}): a database failover, "
            "RESET MASTER or a move to a new server? Changes at lower positions would be ignored as older than the "
            "table. Nothing was merged. If the source really restarted its log, set tables[].ordering_epoch to "
            f"{epoch + 1} for this table (the new epoch starts in each partition where its positions fell, and its "
            "changes always win) and rerun; otherwise re-snapshot the table")
    if newest is None or starts == dict(newest[1]):
        return ordering
    return replace(ordering, epochs=(*epochs[:-1], (newest[0], tuple(sorted(starts.items())))))
