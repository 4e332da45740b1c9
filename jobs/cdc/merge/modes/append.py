"""``write_mode: append`` (changelog) as SQL built by pure functions.

One target row per distinct change event: the row image (``after`` for c/r/u, ``before`` for d; a truncate is one
row with ``__op = 't'`` and no row values), ``__op``, the ordering columns, ``__source_ts_ms``, ``__kafka_partition``,
``__kafka_offset``, ``__batch_id``, ``__ingested_at``.

Identity (``identity_sql``): key + source position (ordering columns) + op + row image, so a redelivery or replay
(the same change again at another Kafka offset) is the same change, while two different changes of a key at one
position (Oracle: redo records sharing an SCN; MongoDB: the events of one transaction share their cluster time)
are two (in Kafka order); a keyless table's records by Kafka partition + offset. Within a batch, copies must be
identical (image and TOAST list); against a stored change, the columns the incoming change may hold differently are
not compared: its TOAST placeholders (the stored row has them filled) and, on a create, the TOAST columns (a
primary-key move may have filled them from the old key). Steps:

1. ``batch_changes_sql``: the batch's changes, one per identity (the first Kafka copy: lowest partition, offset).
2. ``fill_toast_sql`` (batches with TOAST placeholders): an unavailable column takes the value of the key's newest
   *older* change that had it (c/r/u, never a delete image), from the batch or the table; unknown stays NULL.
3. ``new_changes_sql``: those not in the table yet (the count of inserted rows), then ``merge_sql`` inserts them
   (``WHEN NOT MATCHED THEN INSERT``: a rerun after a crash, or a late writer, inserts nothing twice).
"""

from __future__ import annotations

from cdc.common.sql import key_join, lit, q
from cdc.merge.modes.compacted import compacted_deletes_sql, is_compacted
from cdc.merge.modes.spec import ModeSpec
from cdc.positions.sql import position_value
from cdc.schema.columns import (
    BATCH_ID,
    EPOCH,
    INGESTED_AT,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    KIND,
    OFFSET,
    OP,
    PARTITION,
    SOURCE_TS_MS,
    UNAVAILABLE,
)

CHANGE_OPS = ("c", "u", "d", "r", "t")


def change_columns(spec: ModeSpec) -> tuple[str, ...]:
    """Columns of a change row (staging names): row image, ordering, op, Kafka position, source time, TOAST list."""
    return (*spec.columns, *spec.ordering, OP, PARTITION, OFFSET, SOURCE_TS_MS, UNAVAILABLE)


def batch_changes_sql(spec: ModeSpec, stored: str = "target") -> str:
    """The batch's change events, truncates included, one per identity (keyless: every record is its own); on a
    compacted topic also the deletes its Kafka tombstones stand for (``cdc.merge.modes.compacted``; ``stored``: where the
    mode keeps earlier changes, ``target`` for append, ``log`` for scd2)."""
    sel = ", ".join(q(c) for c in change_columns(spec))
    ops = ", ".join(lit(o) for o in CHANGE_OPS)
    base = (f"SELECT {sel} FROM {spec.staging} WHERE batch_id = {int(spec.batch_id)} AND {q(KIND)} = 'change' "
            f"AND {q(OP)} IN ({ops})")
    if not spec.key:
        return base
    ident = ", ".join([*(q(c) for c in (*spec.key, *spec.ordering, OP)), *(comparable(spec, c, "") for c in
                                                                            image_columns(spec)), q(UNAVAILABLE)])
    if spec.compacted:
        base = f"{base} UNION ALL {compacted_deletes_sql(spec, base, stored)}"
        ident += f", {is_compacted('')}"
    return (f"SELECT {sel} FROM (SELECT *, row_number() OVER (PARTITION BY {ident} ORDER BY {q(PARTITION)}, "
            f"{q(OFFSET)}) AS `__rn` FROM ({base})) WHERE `__rn` = 1")


def identity_sql(spec: ModeSpec, t: str, s: str, t_staged: bool = False) -> str:
    """Change ``s`` (staging names) is the change ``t`` holds (target names, or staging names with ``t_staged``)."""
    part, off = (PARTITION, OFFSET) if t_staged else (KAFKA_PARTITION, KAFKA_OFFSET)
    if not spec.key:
        return f"{t}.{q(part)} = {s}.{q(PARTITION)} AND {t}.{q(off)} = {s}.{q(OFFSET)}"
    same = [*same_position(spec, t, s), f"{t}.{q(OP)} = {s}.{q(OP)}"]
    if spec.compacted:  # a compacted delete (cdc.merge.modes.compacted) is never the same change as a real one
        same.append(f"{is_compacted(t, part)} = {is_compacted(s, PARTITION)}")
    return " AND ".join([*same, *same_image(spec, t, s)])


def image_columns(spec: ModeSpec) -> tuple[str, ...]:
    """The row-image columns beyond the key: what tells two changes of a key at one position apart."""
    return tuple(c for c in spec.columns if c not in spec.key)


def comparable(spec: ModeSpec, col: str, t: str) -> str:
    """Column ``col`` of row ``t`` (empty: unqualified) in a form Spark can compare and group (maps as JSON)."""
    ref = f"{t + '.' if t else ''}{q(col)}"
    return f"to_json(named_struct('v', {ref}))" if col in spec.opaque_columns else ref


def same_image(spec: ModeSpec, t: str, s: str) -> list[str]:
    """Change ``s`` has the row image of ``t`` in every column it carries (module doc: not its TOAST placeholders,
    nor a create's TOAST columns)."""
    out = []
    for c in image_columns(spec):
        skip = f"array_contains(coalesce({s}.{q(UNAVAILABLE)}, array()), {lit(c)})"
        if c in spec.toast_columns:
            skip = f"{s}.{q(OP)} = 'c' OR {skip}"
        out.append(f"({skip} OR {comparable(spec, c, t)} <=> {comparable(spec, c, s)})")
    return out


def same_position(spec: ModeSpec, a: str, b: str) -> list[str]:
    """Key and ordering columns equal (NULL-safe; a NULL ordering epoch is epoch 0, as ``cdc.schema.columns.align``)."""
    out = [f"{a}.{q(c)} <=> {b}.{q(c)}" for c in spec.key]
    for c in spec.ordering:
        out.append(f"{position_value(a, c)} = {position_value(b, c)}" if c == EPOCH
                   else f"{a}.{q(c)} <=> {b}.{q(c)}")
    return out


def carry_sql(col: str) -> str:
    """``named_struct('v', col)`` of a change that *has* the column's value (not a delete or truncate, not
    unavailable), else NULL: what ``last(..., true)`` carries forward."""
    return (f"IF({q(OP)} IN ('d', 't') OR array_contains(coalesce({q(UNAVAILABLE)}, array()), {lit(col)}), NULL, "
            f"named_struct('v', {q(col)}))")


def fill_toast_sql(spec: ModeSpec, changes: str) -> str:
    """Unavailable columns from the key's newest older change that had them (batch or table); else NULL."""
    if not spec.toast_columns or not spec.key:
        return changes
    cols = change_columns(spec)
    keys = ", ".join(q(k) for k in spec.key)
    asc = ", ".join(q(c) for c in spec.staged_position)
    stored = [f"t.{q(c)}" for c in (*spec.columns, *spec.ordering, OP)] + [
        f"t.{q(KAFKA_PARTITION)} AS {q(PARTITION)}", f"t.{q(KAFKA_OFFSET)} AS {q(OFFSET)}", f"t.{q(SOURCE_TS_MS)}",
        f"CAST(NULL AS ARRAY<STRING>) AS {q(UNAVAILABLE)}"]
    touched = f"SELECT DISTINCT {keys} FROM ({changes}) WHERE {q(spec.key[0])} IS NOT NULL"
    both = (f"SELECT {', '.join(q(c) for c in cols)}, false AS `__stored` FROM ({changes}) UNION ALL "
            f"SELECT {', '.join(stored)}, true AS `__stored` FROM {spec.target} t LEFT SEMI JOIN ({touched}) k "
            f"ON {key_join('t', 'k', spec.key)}")
    carried = ", ".join(f"last({carry_sql(c)}, true) OVER w AS {q(c + '__carry')}" for c in spec.toast_columns)
    inner = (f"SELECT *, {carried} FROM ({both}) WINDOW w AS (PARTITION BY {keys} ORDER BY {asc} "
             "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)")
    out = []
    for c in cols:
        if c in spec.toast_columns:
            out.append(f"CASE WHEN array_contains(coalesce({q(UNAVAILABLE)}, array()), {lit(c)}) "
                       f"THEN {q(c + '__carry')}.v ELSE {q(c)} END AS {q(c)}")
        else:
            out.append(q(c))
    return f"SELECT {', '.join(out)} FROM ({inner}) WHERE NOT `__stored`"


def new_changes_sql(spec: ModeSpec, changes: str) -> str:
    """The changes the table does not hold yet."""
    return f"SELECT s.* FROM ({changes}) s LEFT ANTI JOIN {spec.target} t ON {identity_sql(spec, 't', 's')}"


def insert_values(spec: ModeSpec) -> list[tuple[str, str]]:
    """(target column, value from change ``s``) of an inserted row."""
    return ([(c, f"s.{q(c)}") for c in (*spec.columns, *spec.ordering)] + [
        (OP, f"s.{q(OP)}"), (SOURCE_TS_MS, f"s.{q(SOURCE_TS_MS)}"), (KAFKA_PARTITION, f"s.{q(PARTITION)}"),
        (KAFKA_OFFSET, f"s.{q(OFFSET)}"), (BATCH_ID, str(int(spec.batch_id))), (INGESTED_AT, "current_timestamp()")])


def merge_sql(spec: ModeSpec, changes: str, voided: bool = False) -> str:
    """Insert each change the table does not hold (idempotent; nothing is ever updated). With ``voided`` the
    source rows carry ``__action``: ``insert``, or ``void`` for a compacted delete a real delete made void
    (``cdc.merge.modes.compacted.voided_sql``), which is removed."""
    pairs = insert_values(spec)
    insert = (f"INSERT ({', '.join(q(c) for c, _ in pairs)}) VALUES ({', '.join(v for _, v in pairs)})")
    if voided:
        return (f"MERGE INTO {spec.target} t USING ({changes}) s ON {identity_sql(spec, 't', 's')} "
                f"WHEN MATCHED AND s.`__action` = 'void' THEN DELETE "
                f"WHEN NOT MATCHED AND s.`__action` = 'insert' THEN {insert}")
    return f"MERGE INTO {spec.target} t USING ({changes}) s ON {identity_sql(spec, 't', 's')} WHEN NOT MATCHED THEN {insert}"
