"""``write_mode: scd2`` (history) as SQL built by pure functions.

One target row per version of a key: the row columns, ``__valid_from`` / ``__valid_to`` (``source.ts_ms`` of the
changes that start / end the version; ``__valid_to`` NULL while current), ``__is_current``, then ``__op``, the
ordering columns, ``__source_ts_ms``, ``__kafka_partition`` and ``__kafka_offset`` of the change that started it.

How a batch is applied (each statement idempotent, so crash + rerun gives the same table):

1. ``log_merge_sql``: the batch's distinct changes (``cdc.merge.modes.append.batch_changes_sql``: key + source position +
   op + row image) are inserted into the table's change log, raw (TOAST placeholders still listed in
   ``__unavailable``). Two changes of a key at one position are two events, ordered by Kafka partition/offset.
2. ``touched_keys_sql``: the keys of the batch's changes; when the batch holds a truncate, also every key with a
   version open at its position: a key whose stored version is current, or one with a logged change after the
   truncate's position (that change ended the version, or the key has none open there: recomputing it is harmless).
   Keys whose changes all precede the truncate and whose history is closed are not affected, so not read.
3. ``versions_sql``: for those keys, the whole version chain from the log (their changes, plus every truncate as an
   event of each key) in the total order (``cdc.schema.columns.position_columns``): TOAST columns take the previous
   version's value (never a delete's); with ``track_columns`` an update changing none of them belongs to the
   current version (its values replace the version's, ``__valid_from`` and the starting change stay); every other
   c/r/u starts a version; a d or t ends the open one (``__valid_to`` = the next boundary's ``source.ts_ms``).
   Duplicates are gone (step 1) and late changes land at their position, so the chain is exact whatever the
   arrival order.
4. ``actions_sql`` compares those versions with the keys' stored rows (a version is identified by key + the
   position of its starting change) → insert / update / delete / same, and ``merge_sql`` applies them in one
   commit.
"""

from __future__ import annotations

from cdc.common.sql import key_join, lit, q
from cdc.merge.modes.append import carry_sql, change_columns, identity_sql, same_position
from cdc.merge.modes.compacted import live_events_sql, tombstones_sql
from cdc.merge.modes.spec import ModeSpec
from cdc.positions.sql import tuple_gt
from cdc.schema.columns import (
    BATCH_ID,
    INGESTED_AT,
    IS_CURRENT,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    KIND,
    OFFSET,
    OP,
    PARTITION,
    SOURCE_TS_MS,
    UNAVAILABLE,
    VALID_FROM,
    VALID_TO,
)

OPENS = "('c', 'r', 'u')"  # ops that start a version
KEYED = "('c', 'r', 'u', 'd')"  # ops of one key (a truncate has none)


def log_merge_sql(spec: ModeSpec, changes: str) -> str:
    """Insert the batch's changes the log does not hold yet (raw, with the batch id)."""
    cols = [*change_columns(spec), "batch_id"]
    vals = [f"s.{q(c)}" for c in change_columns(spec)] + [str(int(spec.batch_id))]
    return (f"MERGE INTO {spec.log} t USING ({changes}) s ON {identity_sql(spec, 't', 's', t_staged=True)} "
            f"WHEN NOT MATCHED THEN INSERT ({', '.join(q(c) for c in cols)}) VALUES ({', '.join(vals)})")


def touched_keys_sql(spec: ModeSpec, truncated: bool) -> str:
    """The keys whose version chains the batch can change (module doc, step 2)."""
    keys = ", ".join(q(k) for k in spec.key)
    batch = f"{spec.staging} WHERE batch_id = {int(spec.batch_id)} AND {q(KIND)} = 'change'"
    sql = f"SELECT DISTINCT {keys} FROM {batch} AND {q(OP)} IN {KEYED} AND {q(spec.key[0])} IS NOT NULL"
    if truncated:  # a truncate ends every version open at its position: still current, or ended by a later change
        pos = spec.staged_position
        after = (f"SELECT {', '.join('l.' + q(k) for k in spec.key)} FROM {spec.log} l LEFT SEMI JOIN "
                 f"(SELECT * FROM {batch} AND {q(OP)} = 't') x ON {tuple_gt('l', pos, 'x', pos)} "
                 f"WHERE l.{q(OP)} IN {KEYED} AND l.{q(spec.key[0])} IS NOT NULL")
        sql += f" UNION SELECT {keys} FROM {spec.target} WHERE {q(IS_CURRENT)} UNION {after}"
    if spec.compacted:  # a Kafka tombstone may close its key's version (cdc.merge.modes.compacted)
        sql += f" UNION SELECT {keys} FROM ({tombstones_sql(spec)})"
    return sql


def events_sql(spec: ModeSpec, touched: str) -> str:
    """The touched keys' changes from the log, and every truncate of the log as an event of each touched key."""
    cols = change_columns(spec)
    own = (f"SELECT {', '.join('l.' + q(c) for c in cols)} FROM {spec.log} l LEFT SEMI JOIN ({touched}) k "
           f"ON {key_join('l', 'k', spec.key)} WHERE l.{q(OP)} IN {KEYED}")
    if spec.compacted:  # compacted deletes a real delete at a newer-or-equal position makes void are left out
        own = live_events_sql(spec, own)
    trunc = [f"k.{q(c)}" if c in spec.key else f"x.{q(c)}" for c in cols]
    truncates = (f"SELECT {', '.join(trunc)} FROM ({touched}) k CROSS JOIN "
                 f"(SELECT * FROM {spec.log} WHERE {q(OP)} = 't') x")
    return f"{own} UNION ALL {truncates}"


def versions_sql(spec: ModeSpec, events: str) -> str:
    """The version rows (target column names, without ``__batch_id`` / ``__ingested_at``) of the events' keys."""
    keys = ", ".join(q(k) for k in spec.key)
    asc = ", ".join(q(c) for c in spec.staged_position)
    w = f"PARTITION BY {keys} ORDER BY {asc}"
    sql = events
    if spec.toast_columns:  # 1. TOAST: the previous version's value
        carried = ", ".join(f"last({carry_sql(c)}, true) OVER w AS {q(c + '__carry')}" for c in spec.toast_columns)
        inner = f"SELECT *, {carried} FROM ({sql}) WINDOW w AS ({w} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
        cols = [f"CASE WHEN array_contains(coalesce({q(UNAVAILABLE)}, array()), {lit(c)}) THEN {q(c + '__carry')}.v "
                f"ELSE {q(c)} END AS {q(c)}" if c in spec.toast_columns else q(c) for c in change_columns(spec)]
        sql = f"SELECT {', '.join(cols)} FROM ({inner})"
    if spec.track_columns:  # 2. an update that changes no tracked column continues the open version
        lags = ", ".join(f"lag({q(c)}) OVER w AS {q(c + '__prev')}" for c in spec.track_columns)
        same = " AND ".join(f"{q(c)} <=> {q(c + '__prev')}" for c in spec.track_columns)
        lagged = f"SELECT *, lag({q(OP)}) OVER w AS `__prev_op`, {lags} FROM ({sql}) WINDOW w AS ({w})"
        bounded = (f"SELECT *, NOT ({q(OP)} = 'u' AND coalesce(`__prev_op` IN {OPENS}, false) AND {same}) "
                   f"AS `__boundary` FROM ({lagged})")
        grouped = (f"SELECT *, sum(IF(`__boundary`, 1, 0)) OVER w AS `__grp` FROM ({bounded}) "
                   f"WINDOW w AS ({w} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
        values = [c for c in spec.columns if c not in spec.key]
        last = ", ".join(f"last({q(c)}) OVER g AS {q(c + '__last')}" for c in values)
        rest = [q(c) for c in change_columns(spec) if c not in values]
        renamed = ", ".join(f"{q(c + '__last')} AS {q(c)}" for c in values)
        sql = (f"SELECT {', '.join(rest)}, {renamed} FROM ("
               f"SELECT *, {last} FROM ({grouped}) WINDOW g AS (PARTITION BY {keys}, `__grp` ORDER BY {asc} "
               f"ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) WHERE `__boundary`")
    # 3. every remaining event is a boundary: c/r/u start a version, the next boundary ends it
    nxt = f"SELECT *, lead(named_struct('ts', {q(SOURCE_TS_MS)})) OVER w AS `__next` FROM ({sql}) WINDOW w AS ({w})"
    out = [q(c) for c in spec.columns] + [
        f"timestamp_millis({q(SOURCE_TS_MS)}) AS {q(VALID_FROM)}",
        f"timestamp_millis(`__next`.ts) AS {q(VALID_TO)}", f"`__next` IS NULL AS {q(IS_CURRENT)}"] + [
        q(c) for c in spec.ordering] + [
        q(OP), q(SOURCE_TS_MS), f"{q(PARTITION)} AS {q(KAFKA_PARTITION)}", f"{q(OFFSET)} AS {q(KAFKA_OFFSET)}"]
    return f"SELECT {', '.join(out)} FROM ({nxt}) WHERE {q(OP)} IN {OPENS}"


def version_identity(spec: ModeSpec, a: str, b: str) -> str:
    """Rows ``a`` and ``b`` (target names) are the same version: same key, same starting change."""
    same = same_position(spec, a, b)[len(spec.key):]
    return " AND ".join([key_join(a, b, spec.key), *same, f"{a}.{q(KAFKA_PARTITION)} = {b}.{q(KAFKA_PARTITION)}",
                         f"{a}.{q(KAFKA_OFFSET)} = {b}.{q(KAFKA_OFFSET)}"])


def version_columns(spec: ModeSpec) -> tuple[str, ...]:
    return (*spec.columns, VALID_FROM, VALID_TO, IS_CURRENT, *spec.ordering, OP, SOURCE_TS_MS, KAFKA_PARTITION,
            KAFKA_OFFSET)


def actions_sql(spec: ModeSpec, versions: str, touched: str) -> str:
    """The recomputed versions against the touched keys' stored rows: ``__action`` insert | update | same, and
    delete for stored rows that are no version any more."""
    cols = version_columns(spec)
    old = f"SELECT t.* FROM {spec.target} t LEFT SEMI JOIN ({touched}) k ON {key_join('t', 'k', spec.key)}"
    same = " AND ".join(f"n.{q(c)} <=> o.{q(c)}" for c in cols)
    k0 = q(spec.key[0])
    return (f"SELECT {', '.join('n.' + q(c) for c in cols)}, CASE WHEN o.{k0} IS NULL THEN 'insert' "
            f"WHEN {same} THEN 'same' ELSE 'update' END AS `__action` FROM ({versions}) n LEFT JOIN ({old}) o "
            f"ON {version_identity(spec, 'n', 'o')} UNION ALL "
            f"SELECT {', '.join('o.' + q(c) for c in cols)}, 'delete' AS `__action` FROM ({old}) o "
            f"LEFT ANTI JOIN ({versions}) n ON {version_identity(spec, 'n', 'o')}")


def merge_sql(spec: ModeSpec, actions: str) -> str:
    """Apply the actions in one commit.

    *Fencing*: a key that a newer batch wrote (a row with a greater ``__batch_id``, checked against the table as it
    is when the MERGE runs) is left alone. That batch's versions came from a change log holding this batch's changes
    too (they are logged before anything is computed), so they are at least as new; a run that lost its claim and
    merges late therefore cannot bring back an older history."""
    cols = version_columns(spec)
    meta = [(BATCH_ID, str(int(spec.batch_id))), (INGESTED_AT, "current_timestamp()")]
    update = [(c, f"s.{q(c)}") for c in cols if c not in spec.key] + meta
    insert = [(c, f"s.{q(c)}") for c in cols] + meta
    keys = ", ".join(q(k) for k in spec.key)
    newer = f"SELECT DISTINCT {keys} FROM {spec.target} WHERE {q(BATCH_ID)} > {int(spec.batch_id)}"
    src = (f"SELECT a.* FROM {actions} a LEFT ANTI JOIN ({newer}) n ON {key_join('a', 'n', spec.key)} "
           "WHERE a.`__action` <> 'same'")
    return (f"MERGE INTO {spec.target} t USING ({src}) s "
            f"ON {version_identity(spec, 't', 's')} "
            "WHEN MATCHED AND s.`__action` = 'delete' THEN DELETE "
            f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{q(c)} = {v}' for c, v in update)} "
            f"WHEN NOT MATCHED AND s.`__action` <> 'delete' THEN INSERT ({', '.join(q(c) for c, _ in insert)}) "
            f"VALUES ({', '.join(v for _, v in insert)})")
