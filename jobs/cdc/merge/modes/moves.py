"""Primary-key changes with unchanged TOAST values in ``append`` / ``scd2`` mode (upsert mode: ``cdc.merge.pk_moves``).

PostgreSQL's ``UPDATE ... SET id = 2 WHERE id = 1`` with an unchanged TOASTed column arrives as d(1)@L and
c(2, placeholder)@L; the create names its old key in Debezium's ``__debezium.oldkey`` header (staged as ``__old_key``,
``cdc.stage.headers``), or, without headers, is recognised by the delete of another key at the same position in the
batch. Both modes keep every change, so the old key's value is simply its newest change ordered before L that had
the column: in the batch, or stored (the append table, whose rows are already filled; the scd2 change log, raw).

``moved_sql`` fills those columns (and removes them from ``__unavailable``) before anything else sees the batch:
append then inserts the create as it is; scd2 keeps it filled in its change log, so the new key's later changes
(and a later move of the new key) carry it like any other value. What the old key never had stays a placeholder,
resolved from the new key's own history (``cdc.merge.modes.append.fill_toast_sql``, ``cdc.merge.modes.scd2.versions_sql``).
"""

from __future__ import annotations

from cdc.common.sql import key_join, lit, q
from cdc.merge.modes.append import change_columns
from cdc.merge.modes.compacted import position_gt
from cdc.merge.modes.spec import ModeSpec
from cdc.schema.columns import KAFKA_OFFSET, KAFKA_PARTITION, KIND, OFFSET, OLD_KEY, OP, PARTITION, UNAVAILABLE


def _has(col: str, t: str) -> str:
    return f"{t}.{q(OP)} IN ('c', 'r', 'u') AND NOT array_contains(coalesce({t}.{q(UNAVAILABLE)}, array()), {lit(col)})"


def moved_sql(spec: ModeSpec, changes: str, stored: str, headers: bool) -> str:
    """``changes`` (change rows of the batch) with the placeholder columns of PK-move creates taken from the old
    key (module doc); ``stored``: ``target`` (append) or ``log`` (scd2); ``headers``: staging has ``__old_key``."""
    cols = spec.toast_columns
    if not cols or not spec.key:
        return changes
    keys = spec.key
    other = " OR ".join(f"c.{q(k)} <> d.`__old`.{q(k)}" for k in keys)
    same_at = " AND ".join(f"d.{q(o)} <=> c.{q(o)}" for o in spec.ordering)
    deletes = (f"SELECT {', '.join(q(o) for o in spec.ordering)}, first(struct({', '.join(q(k) for k in keys)})) "
               f"AS `__old` FROM ({changes}) WHERE {q(OP)} = 'd' GROUP BY {', '.join(q(o) for o in spec.ordering)}")
    source = f"({changes}) c LEFT JOIN ({deletes}) d ON c.{q(OP)} = 'c' AND {same_at} AND ({other})"
    old = "d.`__old`"
    if headers:
        h = (f"SELECT {q(PARTITION)} AS `__hp`, {q(OFFSET)} AS `__ho`, first({q(OLD_KEY)}) AS `__hk` "
             f"FROM {spec.staging} "
             f"WHERE batch_id = {int(spec.batch_id)} AND {q(KIND)} = 'change' AND {q(OLD_KEY)} IS NOT NULL "
             f"GROUP BY {q(PARTITION)}, {q(OFFSET)}")
        source += f" LEFT JOIN ({h}) h ON c.{q(PARTITION)} = h.`__hp` AND c.{q(OFFSET)} = h.`__ho`"
        old = f"coalesce(h.`__hk`, {old})"
    tagged = (f"SELECT c.*, IF(c.{q(OP)} = 'c' AND size(coalesce(c.{q(UNAVAILABLE)}, array())) > 0, {old}, NULL) "
              f"AS `__from` FROM {source}")
    requests = (f"SELECT DISTINCT {', '.join(f'`__from`.{q(k)} AS {q(k)}' for k in keys)}, "
                f"{', '.join(q(o) for o in spec.ordering)} FROM ({tagged}) WHERE `__from` IS NOT NULL")
    table, part, off = (spec.log, PARTITION, OFFSET) if stored == "log" else (spec.target, KAFKA_PARTITION,
                                                                                KAFKA_OFFSET)
    fields = (*keys, *spec.ordering, OP, *cols)
    unavailable = f"t.{q(UNAVAILABLE)}" if stored == "log" else f"CAST(NULL AS ARRAY<STRING>) AS {q(UNAVAILABLE)}"
    history = (f"SELECT {', '.join(q(c) for c in fields)}, {q(PARTITION)}, {q(OFFSET)}, {q(UNAVAILABLE)} FROM "
               f"({changes}) UNION ALL SELECT {', '.join('t.' + q(c) for c in fields)}, t.{q(part)} AS {q(PARTITION)}, "
               f"t.{q(off)} AS {q(OFFSET)}, {unavailable} FROM {table} t LEFT SEMI JOIN ({requests}) k "
               f"ON {key_join('t', 'k', keys)}")
    pos = ", ".join(f"{lit(c)}, x.{q(c)}" for c in spec.staged_position)
    imgs = ", ".join(f"max_by(IF({_has(c, 'x')}, named_struct('v', x.{q(c)}), NULL), "
                     f"IF({_has(c, 'x')}, named_struct({pos}), NULL)) AS {q(c + '__img')}" for c in cols)
    group = ", ".join(f"r.{q(c)}" for c in (*keys, *spec.ordering))
    images = (f"SELECT {group}, {imgs} FROM ({requests}) r JOIN ({history}) x ON {key_join('r', 'x', keys)} "
              f"AND {position_gt(spec, 'r', 'x')} GROUP BY {group}")
    on_img = " AND ".join([f"i.{q(k)} = c.`__from`.{q(k)}" for k in keys]
                          + [f"i.{q(o)} <=> c.{q(o)}" for o in spec.ordering])
    takes = {c: (f"array_contains(coalesce(c.{q(UNAVAILABLE)}, array()), {lit(c)}) "
                 f"AND i.{q(c + '__img')} IS NOT NULL") for c in cols}
    out = []
    for c in change_columns(spec)[:-1]:  # all but __unavailable
        out.append(f"CASE WHEN {takes[c]} THEN i.{q(c + '__img')}.v ELSE c.{q(c)} END AS {q(c)}" if c in takes
                   else f"c.{q(c)}")
    drop = " OR ".join(f"(x = {lit(c)} AND {takes[c]})" for c in cols)
    out.append(f"filter(c.{q(UNAVAILABLE)}, x -> NOT ({drop})) AS {q(UNAVAILABLE)}")
    return (f"SELECT {', '.join(out)} FROM ({tagged}) c LEFT JOIN ({images}) i ON c.`__from` IS NOT NULL "
            f"AND {on_img}")
