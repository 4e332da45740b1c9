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

A failover to a replica whose binlog coordinates are only *slightly* lower is no far fall, so MySQL/MariaDB changes
are also checked by the server they come from (``source.server_id``, staged as ``SERVER_ID``; the ids each
partition's changes carried are kept in the ledger, ``server_ids``): a change from a server **never seen in its
partition before** (not committed from it, not at an earlier offset of the batch) whose position is **below** the
highest the partition reached before it (committed, or at an earlier offset of the batch) means the connector now
reads another server's binlog; it is treated like a far fall. A new server at a higher position keeps the order (a
new source in multi-source or circular replication); known servers below it are redeliveries (a connector restart);
an equal position is harmless (ties go to the later Kafka offset). Snapshot reads carry ``server_id`` 0 and count as
no server. A partition whose committed changes recorded no ids (a ledger from before this check) is compared within
the batch only. PostgreSQL events carry no server identity: the LSN's magnitude is their only check. A partition that
committed no change yet is judged against the table (``judged_by_table``): the highest position committed from any
partition, every server id committed from any.

The way on is ``tables[].ordering_epoch``: raise it, and every change of the new epoch wins over what is stored. A
raised epoch starts, in each partition, at the first change whose position fell far back (:data:`PENDING` until a
batch shows it), so the last changes before the failover keep the old epoch even when they share a batch with the
first ones after it, or sit in a partition that had committed nothing yet.
"""

from __future__ import annotations

from dataclasses import replace
from typing import AbstractSet as Set
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from cdc.common.errors import PositionRegression
from cdc.common.sql import lit, q
from cdc.positions.ordering import Ordering
from cdc.schema.columns import KIND, OFFSET, PARTITION, SERVER_ID, align

PG_MIN_DROP = 1 << 30  # bytes of WAL; a restart's redelivery goes back far less
MYSQL_MIN_DROP = 3  # binlog files; a restart's redelivery goes back one at most (files are 1 GiB by default)


KINDS = ("postgresql", "postgresql_lsn", "mysql")
PENDING = 1 << 62  # an epoch's first offset in a partition that has not shown the fall yet (no record reaches it)
NO_SERVER = ("0", "")  # source.server_id of snapshot reads (0): no server


class Fall(NamedTuple):
    """The first change of a partition that its stored changes would hide: Kafka offset, position, the position the
    partition had reached before it and, when a server change showed it, the new server's id."""

    offset: int
    pos: tuple[int, ...]
    reached: tuple[int, ...] | None = None
    server: str | None = None


def server_identity(value: Any) -> str | None:
    """The staged ``SERVER_ID`` of a ``source.server_id`` (``cdc.decode.avro_batch`` computes the same in Arrow)."""
    text = None if value is None else str(value)
    return None if text in NO_SERVER else text


def highest(newest: Mapping[int, tuple[int, ...] | None], previous: Mapping[int, tuple[int, ...]],
            width: int) -> dict[int, tuple[int, ...]]:
    """partition → the highest position it reached: committed before or in this batch (epoch first, when used)."""
    out: dict[int, tuple[int, ...]] = {}
    for p in set(newest) | set(previous):
        known = [x for x in (newest.get(p), align(previous.get(p), width)) if x is not None and len(x) == width]
        if known:
            out[p] = max(known)
    return out


def judged_by_table(partitions: Iterable[int], previous: Mapping[int, tuple[int, ...]],
                    known: Mapping[int, Set[str]], width: int,
                    peers: Mapping[int, tuple[int, ...] | None] | None = None
                    ) -> tuple[dict[int, tuple[int, ...]], dict[int, Set[str]]]:
    """``previous`` / ``known`` with every partition of ``partitions`` that committed no change yet judged against
    the table: the highest position committed from any partition, every server id committed from any; with
    ``peers`` (partition → its newest position in this batch; a table's first batch under a raised epoch, when
    nothing was committed) also the other partitions' newest. (All partitions of a table read one log: a partition
    that came late to a failover holds changes from before it, or from after it, like the others. Judged only against
    each other, a late partition's old changes would start the new epoch and outrank changes made after the
    failover.)"""
    fresh = [p for p in partitions if p not in previous]
    tops = [x for x in (align(v, width) for v in previous.values()) if x is not None and len(x) == width]
    out, ids = dict(previous), (frozenset().union(*known.values()) if known else None)
    for p in fresh:
        seen = tops + [x for q, x in (peers or {}).items() if q != p and x is not None and len(x) == width]
        if seen:
            out[p] = max(seen)
    return out, {**({p: ids for p in fresh if tops} if ids is not None else {}), **known}


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
        conds = [f"{q(PARTITION)} = {int(p)}"] + ([f"{q(columns[0])} = {int(top[0])}"] if lead else [])
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
    return (f"SELECT {q(PARTITION)} AS p, min(named_struct('o', {q(OFFSET)}, 'pos', {position})) AS first "
            f"FROM {staging} "
            f"WHERE batch_id = {int(batch_id)} AND {q(KIND)} = 'change' AND ({pred}) GROUP BY {q(PARTITION)}")


def unknown_servers(batch: Mapping[int, Sequence[str] | None], known: Mapping[int, Set[str]]
                    ) -> dict[int, frozenset[str]]:
    """partition → the servers its staged changes came from that it never committed changes from (``known``:
    partition → committed ids; a partition that recorded none is absent). Cheap test before ``first_new_server_sql``."""
    out = {p: frozenset(ids) - frozenset(known.get(p, ())) for p, ids in batch.items() if ids}
    return {p: ids for p, ids in out.items() if ids}


def first_new_server_sql(staging: str, batch_id: int, columns: Sequence[str], new: Mapping[int, Set[str]]) -> str:
    """``p, s, o, pos, before`` rows: the first staged change (offset order) of each server in ``new`` (partition →
    ids), its position and the highest position of the partition's changes at earlier offsets of the batch."""
    position = "array(" + ", ".join(f"CAST({q(c)} AS BIGINT)" for c in columns) + ")"
    sid = q(SERVER_ID)
    which = " OR ".join(f"(p = {int(p)} AND s IN ({', '.join(lit(i) for i in sorted(ids))}))"
                        for p, ids in sorted(new.items()))
    return (f"SELECT p, s, o, pos, before FROM (SELECT {q(PARTITION)} AS p, {sid} AS s, {q(OFFSET)} AS o, "
            f"{position} AS pos, "
            f"max({position}) OVER (PARTITION BY {q(PARTITION)} ORDER BY {q(OFFSET)} "
            f"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 "
            f"PRECEDING) AS before, row_number() OVER (PARTITION BY {q(PARTITION)}, {sid} ORDER BY {q(OFFSET)}) AS n "
            f"FROM {staging} WHERE batch_id = {int(batch_id)} AND {q(KIND)} = 'change') WHERE n = 1 AND ({which})")


def new_server_falls(firsts: Iterable[tuple[int, str, int, Sequence[int], Sequence[int] | None]],
                     known: Mapping[int, Set[str]], previous: Mapping[int, tuple[int, ...]], width: int
                     ) -> dict[int, Fall]:
    """The server rule (module doc) on ``first_new_server_sql``'s rows ``(partition, server, offset, position,
    highest position at earlier offsets of the batch)``: partition → its first change from a server never seen in
    it whose position is below the highest the partition reached before it (``previous``: committed positions,
    used where ``known`` recorded ids)."""
    out: dict[int, Fall] = {}
    for p, server, offset, pos, before in firsts:
        if server_identity(server) is None or server in known.get(p, ()):
            continue
        committed = align(previous.get(p), width) if p in known else None
        seen = [tuple(x) for x in (before, committed) if x is not None and len(x) == width]
        reached = max(seen) if seen else None
        if reached is not None and tuple(pos) < reached and (p not in out or offset < out[p].offset):
            out[p] = Fall(int(offset), tuple(pos), reached, server)
    return out


def check(spark: Any, staging: str, batch_id: int, table: str, topic: str, ordering: Ordering,
          counts: Mapping[int, Any], previous: Mapping[int, tuple[int, ...]], known: Mapping[int, Set[str]],
          peers: bool = False) -> Ordering:
    """Both rules on a staged incremental batch (``counts``: ``cdc.stage.stats.PartitionCounts``; ``previous`` / ``known``:
    committed positions / server ids per partition; ``peers``: judge partitions without committed changes by the
    batch's other partitions too, see ``judged_by_table``): the ordering with a pending epoch started where the first
    hidden change is, or ``PositionRegression`` (``settle``). The usual batch costs no query."""
    width = len(ordering.columns)
    previous, known = judged_by_table(counts, previous, known, width,
                                      {p: c.max_position for p, c in counts.items()} if peers else None)
    hi = highest({p: c.max_position for p, c in counts.items()}, previous, width)
    lead = 0 if ordering.epochs is None else 1
    found: dict[int, Fall] = {}
    if could_fall(ordering.kind, lead, hi, {p: c.min_columns for p, c in counts.items()}):
        sql = first_far_back_sql(staging, batch_id, ordering.kind, ordering.columns, lead, hi)
        found = {int(r["p"]): Fall(int(r["first"]["o"]), tuple(int(v) for v in r["first"]["pos"]), hi[int(r["p"])])
                 for r in spark.sql(sql).collect()}  # could_fall: a checked kind and a known position, so a query
    new = unknown_servers({p: c.server_ids for p, c in counts.items()}, known) if ordering.kind == "mysql" else {}
    if new:  # a server this partition never committed changes from: below what the partition reached?
        rows = spark.sql(first_new_server_sql(staging, batch_id, ordering.columns, new)).collect()
        firsts = [(int(r["p"]), r["s"], int(r["o"]), [int(v) for v in r["pos"]],
                   None if r["before"] is None else [int(v) for v in r["before"]]) for r in rows]
        for p, fall in new_server_falls(firsts, known, previous, width).items():
            if p not in found or fall.offset < found[p].offset:
                found[p] = fall
    return settle(table, topic, ordering, found, hi)


def settle(table: str, topic: str, ordering: Ordering, found: Mapping[int, tuple[Any, ...]],
           hi: Mapping[int, tuple[int, ...]]) -> Ordering:
    """Where a partition's first hidden change is (``found``: partition → ``Fall``, or (offset, position) of a far
    fall): start the newest epoch there when it waits for that (:data:`PENDING`), else raise ``PositionRegression``
    (nothing merged)."""
    epochs = ordering.epochs or ()
    newest = epochs[-1] if epochs else None
    starts = dict(newest[1]) if newest else {}
    lead = 0 if ordering.epochs is None else 1
    for p, raw in sorted(found.items()):
        fall = Fall(*raw)
        if newest is not None and starts.get(p) == PENDING:
            starts[p] = fall.offset
            continue
        epoch, reached = ordering.epoch or 0, fall.reached or hi[p]
        where = f"table {table}: topic {topic} partition {p} offset {fall.offset}: "
        way_on = ("Nothing was merged. If the source really moved, set tables[].ordering_epoch to "
                  f"{epoch + 1} for this table (the new epoch starts in each partition at its first change that "
                  "would be hidden, and its changes always win) and rerun; otherwise re-snapshot the table")
        if fall.server is not None:
            raise PositionRegression(
                where + f"a change from server_id {fall.server} (source.server_id), never seen in this partition, is "
                f"at position {list(fall.pos[lead:])}, below the {list(reached[lead:])} this partition had reached: "
                "the connector reads another server's binlog now (a failover to a replica?), and this server's changes "
                "would be ignored as older than the table. " + way_on)
        raise PositionRegression(
            where + f"source positions went far backwards ({list(fall.pos[lead:])}, while this partition had "
            f"reached {list(reached[lead:])}): a database failover, RESET MASTER or a move to a new server? Changes "
            "at lower positions would be ignored as older than the table. " + way_on)
    if newest is None or starts == dict(newest[1]):
        return ordering
    return replace(ordering, epochs=(*epochs[:-1], (newest[0], tuple(sorted(starts.items())))))
