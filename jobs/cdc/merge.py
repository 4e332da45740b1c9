"""The merge contract, as SQL built by pure functions (tested by exact text and by table contents).

One staged batch is merged in four statements, each idempotent, so a crash anywhere followed by a rerun of the same
batch gives the same table as an uninterrupted run:

1. ``truncate_sql`` (only when the batch holds a truncate): rows ordered before the truncate are removed (hard) or
   soft-deleted. Events ordered at or before the newest truncate are dropped from every later step, and the truncate
   position is kept in the ledger as a *barrier* for later batches.
2. ``newest_sql``: per key, the newest change of the batch (by source position, then Kafka partition/offset). Unchanged
   TOAST columns (Debezium's unavailable-value placeholder) take the latest available value of an earlier event of the
   same key in the batch (``<col>__carry``), else (step 3) the table's value.
3. ``classify_sql``: compares that change with the table row and the tombstone of the key and names an action:
   ``skip`` (not newer than what the table holds: duplicates, replays, late out-of-order events), ``insert``,
   ``update``, ``delete`` (a live row goes) or ``tombstone`` (a delete for a key with no live row: remembered only).
4. ``merge_target_sql`` applies the actions; ``merge_tombstones_sql`` (hard deletes) remembers each delete's position,
   so an older insert/update that arrives later cannot resurrect the row. In soft mode the row itself, with
   ``__deleted = true``, is the tombstone.

"Newer" is ``newer_sql``: a strictly greater source position. Within a batch, ties go to the later Kafka offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

# Target-table metadata columns (besides the ordering columns and __deleted in soft mode).
META_COLUMNS = ("__op", "__source_ts_ms", "__kafka_partition", "__kafka_offset", "__batch_id", "__ingested_at")
DELETED = "__deleted"
_MIN = "-9223372036854775808"


def q(name: str) -> str:
    """Quote an identifier for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def lit(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class MergeSpec:
    target: str  # catalog.namespace.table
    staging: str
    tombstones: str | None  # None in soft mode
    batch_id: int
    key: tuple[str, ...]
    columns: tuple[str, ...]  # row-image columns in table order (includes the key)
    ordering: tuple[str, ...]  # ordering columns, e.g. ("__lsn",)
    delete_mode: str = "hard"
    toast_columns: tuple[str, ...] = ()  # columns that were unavailable in some event of this batch
    barrier: tuple[int, ...] | None = None  # newest truncate position known (this batch or earlier)

    @property
    def soft(self) -> bool:
        return self.delete_mode == "soft"


def tuple_gt(a: str, b: str, cols: Sequence[str], b_nullable: bool = True) -> str:
    """``(a.c1, a.c2, ...) > (b.c1, b.c2, ...)`` lexicographically; a NULL on the b side counts as -infinity."""

    def bcol(c: str) -> str:
        return f"coalesce({b}.{q(c)}, {_MIN})" if b_nullable else f"{b}.{q(c)}"

    terms = []
    for i, c in enumerate(cols):
        eq = [f"{a}.{q(p)} = {bcol(p)}" for p in cols[:i]]
        terms.append("(" + " AND ".join(eq + [f"{a}.{q(c)} > {bcol(c)}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def tuple_eq(a: str, b: str, cols: Sequence[str]) -> str:
    return "(" + " AND ".join(f"{a}.{q(c)} = {b}.{q(c)}" for c in cols) + ")"


def tuple_cmp_literal(a: str, cols: Sequence[str], values: Sequence[int], op: str) -> str:
    """``(a.c1, ...) <op> (v1, ...)`` for op in ``>`` / ``<`` (lexicographic)."""
    terms = []
    for i, c in enumerate(cols):
        eq = [f"{a}.{q(p)} = {int(v)}" for p, v in zip(cols[:i], values[:i])]
        terms.append("(" + " AND ".join(eq + [f"{a}.{q(c)} {op} {int(values[i])}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def newer_sql(s: str, t: str, ordering: Sequence[str]) -> str:
    """Event ``s`` is strictly newer (by source position) than the state ``t`` holds for the key.

    Equal positions are *not* newer: an event at or before what the table holds is a duplicate, a replay or a late
    arrival and is ignored. (Within one batch, ties between events of a key go to the later Kafka offset.)
    """
    return tuple_gt(s, t, ordering)


def _key_join(a: str, b: str, key: Sequence[str]) -> str:
    return " AND ".join(f"{a}.{q(k)} = {b}.{q(k)}" for k in key)


def changes_sql(spec: MergeSpec) -> str:
    """The batch's change events that can still matter (after the truncate barrier)."""
    where = [f"batch_id = {int(spec.batch_id)}", "__kind = 'change'", "__op IN ('c', 'u', 'd', 'r')"]
    if spec.barrier is not None:
        where.append(tuple_cmp_literal("c", spec.ordering, spec.barrier, ">"))
    return f"SELECT * FROM {spec.staging} c WHERE " + " AND ".join(where)


def newest_sql(spec: MergeSpec, changes: str) -> str:
    """One row per key: the newest change, with TOAST values carried from earlier events of the batch."""
    key = ", ".join(q(k) for k in spec.key)
    asc = ", ".join([q(c) for c in spec.ordering] + ["`__partition`", "`__offset`"])
    desc = ", ".join(f"{q(c)} DESC" for c in spec.ordering) + ", `__partition` DESC, `__offset` DESC"
    cols = []
    for c in spec.columns:
        if c in spec.toast_columns:
            cols.append(f"last(IF(array_contains(`__unavailable`, {lit(c)}), NULL, named_struct('v', {q(c)})), true) "
                        f"OVER w_carry AS {q(c + '__carry')}")
        else:
            cols.append(q(c))
    meta = [q(c) for c in spec.ordering] + ["`__op`", "`__partition`", "`__offset`", "`__source_ts_ms`"]
    return (
        f"SELECT * FROM (SELECT {', '.join(cols + meta)}, row_number() OVER w_newest AS `__rn` FROM ({changes}) "
        f"WINDOW w_carry AS (PARTITION BY {key} ORDER BY {asc} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), "
        f"w_newest AS (PARTITION BY {key} ORDER BY {desc})) WHERE `__rn` = 1"
    )


def classify_sql(spec: MergeSpec, newest: str) -> str:
    """Join the newest changes with the table (and tombstones) and decide each key's action."""
    k0 = q(spec.key[0])
    live = f"t.{k0} IS NOT NULL" + (f" AND NOT coalesce(t.{q(DELETED)}, false)" if spec.soft else "")
    skip = [f"WHEN t.{k0} IS NOT NULL AND NOT {newer_sql('s', 't', spec.ordering)} THEN 'skip'"]
    joins = f"LEFT JOIN {spec.target} t ON {_key_join('s', 't', spec.key)}"
    if spec.tombstones and not spec.soft:
        skip.append(f"WHEN d.{k0} IS NOT NULL AND NOT {newer_sql('s', 'd', spec.ordering)} THEN 'skip'")
        joins += f" LEFT JOIN {spec.tombstones} d ON {_key_join('s', 'd', spec.key)}"
    values = []
    for c in spec.columns:
        if c in spec.toast_columns:
            carry = q(c + "__carry")
            values.append(f"CASE WHEN s.{carry} IS NULL THEN t.{q(c)} ELSE s.{carry}.v END AS {q(c)}")
        else:
            values.append(f"s.{q(c)}")
    action = (
        "CASE " + " ".join(skip) + f" WHEN s.`__op` = 'd' AND {live} THEN 'delete'"
        " WHEN s.`__op` = 'd' THEN 'tombstone'"
        f" WHEN {live} THEN 'update' ELSE 'insert' END AS `__action`"
    )
    meta = [f"s.{q(c)}" for c in spec.ordering] + ["s.`__op`", "s.`__partition`", "s.`__offset`",
                                                   "s.`__source_ts_ms`"]
    return f"SELECT {', '.join(values + meta)}, {action} FROM ({newest}) s {joins}"


def _meta_assignments(spec: MergeSpec) -> list[tuple[str, str]]:
    return [(c, f"s.{q(c)}") for c in spec.ordering] + [
        ("__op", "s.`__op`"),
        ("__source_ts_ms", "s.`__source_ts_ms`"),
        ("__kafka_partition", "s.`__partition`"),
        ("__kafka_offset", "s.`__offset`"),
        ("__batch_id", str(int(spec.batch_id))),
        ("__ingested_at", "current_timestamp()"),
    ]


def merge_target_sql(spec: MergeSpec, classified: str) -> str:
    """MERGE the classified changes (``skip`` rows are filtered out) into the target table."""
    meta = _meta_assignments(spec)
    row = [(c, f"s.{q(c)}") for c in spec.columns if c not in spec.key]
    on = _key_join("t", "s", spec.key)

    def sets(pairs: list[tuple[str, str]]) -> str:
        return ", ".join(f"t.{q(c)} = {v}" for c, v in pairs)

    def insert(deleted: str | None) -> str:
        pairs = [(c, f"s.{q(c)}") for c in spec.columns] + meta + ([(DELETED, deleted)] if deleted else [])
        return f"INSERT ({', '.join(q(c) for c, _ in pairs)}) VALUES ({', '.join(v for _, v in pairs)})"

    src = f"(SELECT * FROM {classified} WHERE `__action` <> 'skip')"
    if spec.soft:
        clauses = [
            f"WHEN MATCHED AND s.`__action` IN ('delete', 'tombstone') THEN UPDATE SET "
            f"{sets(meta + [(DELETED, 'true')])}",
            f"WHEN MATCHED AND s.`__action` IN ('update', 'insert') THEN UPDATE SET "
            f"{sets(row + meta + [(DELETED, 'false')])}",
            f"WHEN NOT MATCHED AND s.`__action` = 'insert' THEN {insert('false')}",
            f"WHEN NOT MATCHED AND s.`__action` = 'tombstone' THEN {insert('true')}",
        ]
    else:
        clauses = [
            "WHEN MATCHED AND s.`__action` = 'delete' THEN DELETE",
            f"WHEN MATCHED AND s.`__action` = 'update' THEN UPDATE SET {sets(row + meta)}",
            f"WHEN NOT MATCHED AND s.`__action` = 'insert' THEN {insert(None)}",
        ]
    return f"MERGE INTO {spec.target} t USING {src} s ON {on} " + " ".join(clauses)


def merge_tombstones_sql(spec: MergeSpec, classified: str) -> str:
    """Remember hard deletes (key + position) so late older events cannot resurrect the row."""
    assert spec.tombstones, "tombstones are only kept for hard deletes"
    pairs = [(c, f"s.{q(c)}") for c in spec.ordering] + [
        ("__kafka_partition", "s.`__partition`"), ("__kafka_offset", "s.`__offset`"),
        ("__deleted_at", "current_timestamp()")]
    all_pairs = [(k, f"s.{q(k)}") for k in spec.key] + pairs
    src = f"(SELECT * FROM {classified} WHERE `__action` IN ('delete', 'tombstone'))"
    return (
        f"MERGE INTO {spec.tombstones} t USING {src} s ON {_key_join('t', 's', spec.key)} "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{q(c)} = {v}' for c, v in pairs)} "
        f"WHEN NOT MATCHED THEN INSERT ({', '.join(q(c) for c, _ in all_pairs)}) "
        f"VALUES ({', '.join(v for _, v in all_pairs)})"
    )


def truncate_sql(spec: MergeSpec, position: Sequence[int]) -> list[str]:
    """Statements applying a truncate at ``position`` to the target (and dropping older tombstones)."""
    older = tuple_cmp_literal("t", spec.ordering, position, "<")
    if spec.soft:
        sets = ", ".join([f"{q(DELETED)} = true", "`__op` = 't'", f"`__batch_id` = {int(spec.batch_id)}"])
        return [f"UPDATE {spec.target} t SET {sets} WHERE {older} AND NOT coalesce({q(DELETED)}, false)"]
    stmts = [f"DELETE FROM {spec.target} t WHERE {older}"]
    if spec.tombstones:
        stmts.append(f"DELETE FROM {spec.tombstones} t WHERE {older}")
    return stmts
