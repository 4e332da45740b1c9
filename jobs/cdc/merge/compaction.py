"""Compacted topics: which stored row or change of key k a Kafka tombstone of k (partition p, offset o) follows.

Compaction may have removed the ``d`` event a tombstone followed, so the tombstone stands for that delete. It carries
no source position; what it deletes is what came before it. A row (upsert) or stored change (append, scd2) of k came
before it unless it came from a *later record of p*:

* from p at a lower offset, since p's newest cursor reset (``--reset-cursor``; ``epoch_start_sql``): before it;
* from p at its offset or above, since that reset (a backfill's replay, or this batch's earlier attempt): later;
* from anywhere else, i.e. a JDBC bootstrap (partition -1), another partition (partitions were added, so keys moved),
  or p before the reset (the old topic's offsets mean nothing now): before it, unless the batch shows otherwise.
  A partition holds its changes in source order, so the delete came before every change of p after o: when one of
  those is at or below the row's source position (``__after``, ``before_next_sql``), the row may be newer than the
  delete (k was deleted, then re-created before the bootstrap snapshot, in the other partition, or before the old
  records a moved cluster replays) and is left alone. Rows this batch wrote itself (a rerun after a crash) count
  only as the first rule says, so a rerun decides as the first attempt did.

``cdc.merge.sql.changes_sql`` (upsert, ``compaction_deletes_sql``) and ``cdc.merge.modes.compacted`` (append, scd2)
place the delete after the newest of what it follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from cdc.common.sql import key_join, q
from cdc.positions.sql import position_value, tuple_gt
from cdc.schema.columns import (
    BATCH_ID,
    DELETED,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    KIND,
    MOVED,
    NEW_KEY,
    OFFSET,
    OLD_KEY,
    OP,
    PARTITION,
    SOURCE_TS_MS,
    UNAVAILABLE,
)

if TYPE_CHECKING:
    from cdc.merge.spec import MergeSpec

# Kafka partition/offset of a delete derived from a Kafka tombstone on a compacted topic (its real ones are unknown).
COMPACTED_DELETE = (2147483647, 9223372036854775807)

AFTER = "`__after`"  # a tombstone's: the least source position among the batch's changes after it in its partition


def _struct(t: str, ordering: Sequence[str]) -> str:
    return "named_struct(" + ", ".join(f"'o{i}', {position_value(t, o)}" for i, o in enumerate(ordering)) + ")"


def _fields(ordering: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"o{i}" for i in range(len(ordering)))


def tombstones_sql(staging: str, batch_id: int, key: Sequence[str], ordering: Sequence[str]) -> str:
    """The batch's Kafka tombstones with a key: the key columns, ``__partition``, ``__offset`` and ``__after``
    (a struct ``o0, o1, ...`` of the ordering columns; NULL when no change follows it in its partition)."""
    keys = ", ".join(q(k) for k in key)
    after = (f"min(IF({q(KIND)} = 'change', {_struct('s', ordering)}, NULL)) OVER (PARTITION BY {q(PARTITION)} "
             f"ORDER BY {q(OFFSET)} DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS {AFTER}")
    rows = (f"SELECT {keys}, {q(PARTITION)}, {q(OFFSET)}, {q(KIND)}, {after} FROM {staging} s "
            f"WHERE batch_id = {int(batch_id)} AND {q(KIND)} IN ('change', 'tombstone')")
    return (f"SELECT {keys}, {q(PARTITION)}, {q(OFFSET)}, {AFTER} FROM ({rows}) "
            f"WHERE {q(KIND)} = 'tombstone' AND {q(key[0])} IS NOT NULL")


def epoch_start_sql(resets: Sequence[tuple[int, int]], b: str) -> str:
    """The batch id from which rows of tombstone ``b``'s partition come from its current offsets: its newest cursor
    reset's (``resets``: (partition, batch id)), else 0."""
    if not resets:
        return "0"
    return (f"CASE {b}.{q(PARTITION)} " + " ".join(f"WHEN {int(p)} THEN {int(r)}" for p, r in sorted(resets))
            + " ELSE 0 END")


def follows_sql(b: str, t: str, part: str, off: str, batch: str, ordering: Sequence[str], batch_id: int,
                resets: Sequence[tuple[int, int]]) -> tuple[str, str]:
    """(``same``, ``other``): row ``t`` (Kafka partition/offset/batch id in columns ``part``/``off``/``batch``) came
    before tombstone ``b`` from its partition at a lower offset, or from elsewhere (module doc)."""
    start = epoch_start_sql(resets, b)
    current = f"coalesce({t}.{q(batch)}, 0) >= {start}"
    same = f"{t}.{q(part)} = {b}.{q(PARTITION)} AND {t}.{q(off)} < {b}.{q(OFFSET)} AND {current}"
    other = (f"NOT ({t}.{q(part)} = {b}.{q(PARTITION)} AND {current}) AND coalesce({t}.{q(batch)}, 0) <> "
             f"{int(batch_id)} AND {before_next_sql(b, t, ordering)}")
    return f"({same})", f"({other})"


def before_next_sql(b: str, t: str, ordering: Sequence[str]) -> str:
    """Row ``t``'s source position is below that of every change after tombstone ``b`` in its partition."""
    return f"({b}.{AFTER} IS NULL OR {tuple_gt(f'{b}.{AFTER}', _fields(ordering), t, ordering, b_nullable=False)})"


def compaction_deletes_sql(spec: MergeSpec, changes: str) -> str:
    """Upsert: the delete each Kafka tombstone stands for, as a change row, when it follows something of its key:
    the newest change of k before it in its partition in this batch, or the table row (module doc). It takes the
    source position of the newer of the two (the table row's when it came from the partition at a higher offset than
    that change) with the greatest possible partition/offset (``COMPACTED_DELETE``): newer than every change at or
    before that source position (redeliveries included), older than any greater one (a change from another
    partition after the key moved still wins)."""
    k0 = q(spec.key[0])
    keys = ", ".join(f"b.{q(k)}" for k in spec.key)
    pos = ", ".join(f"'o{i}', {position_value('c', o)}" for i, o in enumerate(spec.ordering))
    tomb = tombstones_sql(spec.staging, spec.batch_id, spec.key, spec.ordering)
    in_batch = (f"SELECT {keys}, b.{q(PARTITION)}, b.{q(OFFSET)}, max_by(named_struct({pos}, 'off', c.{q(OFFSET)}), "
                f"c.{q(OFFSET)}) AS `__prev` FROM ({tomb}) b JOIN ({changes}) c ON {key_join('b', 'c', spec.key)} "
                f"AND c.{q(PARTITION)} = b.{q(PARTITION)} AND c.{q(OFFSET)} < b.{q(OFFSET)} "
                f"GROUP BY {keys}, b.{q(PARTITION)}, b.{q(OFFSET)}")
    same, other = follows_sql("b", "t", KAFKA_PARTITION, KAFKA_OFFSET, BATCH_ID, spec.ordering, spec.batch_id,
                              spec.resets)
    if spec.soft:  # a row soft-deleted already needs no delete
        other = f"({other} AND NOT coalesce(t.{q(DELETED)}, false))"
    prev = "i.`__prev`"
    table_first = (f"(t.{k0} IS NOT NULL AND {same} AND ({prev} IS NULL OR t.{q(KAFKA_OFFSET)} > {prev}.off)) OR "
                   f"(t.{k0} IS NOT NULL AND {other} AND ({prev} IS NULL OR "
                   f"{tuple_gt('t', spec.ordering, prev, _fields(spec.ordering))}))")
    ords = [f"CASE WHEN {table_first} THEN {position_value('t', o)} ELSE {prev}.o{n} END AS {q(o)}"
            for n, o in enumerate(spec.ordering)]
    row = [f"b.{q(c)}" if c in spec.key else f"NULL AS {q(c)}" for c in spec.columns]
    part, off = COMPACTED_DELETE
    return (f"SELECT {', '.join(row + ords)}, 'd' AS {q(OP)}, {part} AS {q(PARTITION)}, {off} AS {q(OFFSET)}, "
            f"CAST(NULL AS BIGINT) AS {q(SOURCE_TS_MS)}, CAST(NULL AS ARRAY<STRING>) AS {q(UNAVAILABLE)}"
            + "".join(f", NULL AS {q(c)}" for c in ((OLD_KEY, NEW_KEY, MOVED) if spec.pk_moves else ()))
            + f" FROM ({tomb}) b LEFT JOIN ({in_batch}) i ON {key_join('b', 'i', spec.key)} "
            f"AND i.{q(PARTITION)} = b.{q(PARTITION)} AND i.{q(OFFSET)} = b.{q(OFFSET)} "
            f"LEFT JOIN {spec.target} t ON {key_join('b', 't', spec.key)} "
            f"WHERE {prev} IS NOT NULL OR (t.{k0} IS NOT NULL AND ({same} OR {other}))")
