"""Compacted topics in ``append`` / ``scd2`` mode: a Kafka tombstone stands for a delete compaction may have removed.

On a compacted topic (``tables[].compacted``, or the topic's ``cleanup.policy=compact``) the reader stages each
Kafka tombstone (null value) with its key columns. Its ``d`` event may be gone, so the tombstone of key k (partition
p, offset o) becomes a *compacted delete* of k (``compacted_deletes_sql``):

* position: the greatest source position among the changes of k it follows (``cdc.merge.compaction``: this batch's
  in partition p before offset o; stored ones, in the append table / the scd2 change log, from p at a lower offset, or
  from another partition, from before a cursor reset, unless the batch shows them newer); with nothing of k before it
  it is ignored (as in upsert mode).
  Kafka partition/offset: ``cdc.merge.sql.COMPACTED_DELETE`` (its real ones are unknown), so it sorts after every change
  at that position and is told apart from a real delete (``is_compacted``).
* ``__source_ts_ms`` (so scd2's ``__valid_to``): that change's ``source.ts_ms`` (the delete's own time was compacted
  away; a deterministic stand-in keeps crash + rerun and replays identical).
* row image: the key columns, every other column NULL.
* a real ``d`` of k at a newer-or-equal position (in the batch, or stored) makes it void: it is not added, and one
  added before the real delete arrived is removed (append: ``voided_sql``; scd2: ``events_sql`` leaves it out of the
  chain), so the result does not depend on which batch brought what.

Identity stays key + position + op (+ compacted or not), so redeliveries and replays of a tombstone never add it twice.
"""

from __future__ import annotations

from cdc.common.sql import key_join, q
from cdc.merge import compaction
from cdc.merge.compaction import COMPACTED_DELETE
from cdc.merge.modes.spec import ModeSpec
from cdc.positions.sql import position_value
from cdc.schema.columns import (
    BATCH_ID,
    KAFKA_OFFSET,
    KAFKA_PARTITION,
    KIND,
    OFFSET,
    OP,
    PARTITION,
    SOURCE_TS_MS,
    UNAVAILABLE,
)

STORED_BATCH = "__bid"  # a known change's batch id (``known_sql``)

KEYED = "('c', 'r', 'u', 'd')"


def is_compacted(t: str, partition: str = PARTITION) -> str:
    """Row ``t`` (empty: unqualified) is a compacted delete (its Kafka partition is the sentinel)."""
    return f"coalesce({t + '.' if t else ''}{q(partition)} = {COMPACTED_DELETE[0]}, false)"


_pos = position_value  # a NULL ordering epoch is epoch 0


def position_gt(spec: ModeSpec, a: str, b: str) -> str:
    """Source position (ordering columns only) of ``a`` is strictly greater than ``b``'s."""
    terms = []
    for i, c in enumerate(spec.ordering):
        eq = [f"{_pos(a, x)} = {_pos(b, x)}" for x in spec.ordering[:i]]
        terms.append("(" + " AND ".join(eq + [f"{_pos(a, c)} > {_pos(b, c)}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def tombstones_sql(spec: ModeSpec) -> str:
    k0 = q(spec.key[0])
    return (f"SELECT {', '.join(q(k) for k in spec.key)}, {q(PARTITION)}, {q(OFFSET)} FROM {spec.staging} "
            f"WHERE batch_id = {int(spec.batch_id)} AND {q(KIND)} = 'tombstone' AND {k0} IS NOT NULL")


def known_sql(spec: ModeSpec, changes: str, stored: str, keys: str) -> str:
    """Keyed changes of ``keys`` (key, ordering, op, Kafka partition/offset, source ts, batch id as ``__bid``;
    staging names): the batch's ``changes`` and those stored in the append table (``stored='target'``) or the scd2
    change log (``'log'``)."""
    own = [*spec.key, *spec.ordering, OP, PARTITION, OFFSET, SOURCE_TS_MS]
    batch = (f"SELECT {', '.join(q(c) for c in own)}, {int(spec.batch_id)} AS {q(STORED_BATCH)} FROM ({changes}) "
             f"WHERE {q(OP)} IN {KEYED}")
    if stored == "log":
        table, part, off, bid = spec.log, PARTITION, OFFSET, "batch_id"
    else:
        table, part, off, bid = spec.target, KAFKA_PARTITION, KAFKA_OFFSET, BATCH_ID
    cols = [f"t.{q(c)}" for c in (*spec.key, *spec.ordering, OP)] + [
        f"t.{q(part)} AS {q(PARTITION)}", f"t.{q(off)} AS {q(OFFSET)}", f"t.{q(SOURCE_TS_MS)}",
        f"t.{q(bid)} AS {q(STORED_BATCH)}"]
    kept = (f"SELECT {', '.join(cols)} FROM {table} t LEFT SEMI JOIN ({keys}) k ON {key_join('t', 'k', spec.key)} "
            f"WHERE t.{q(OP)} IN {KEYED}")
    return f"{batch} UNION ALL {kept}"


def compacted_deletes_sql(spec: ModeSpec, changes: str, stored: str) -> str:
    """The batch's compacted deletes as change rows (``cdc.merge.modes.append.change_columns``), one per key and position
    (module doc)."""
    keys = [q(k) for k in spec.key]
    tomb = compaction.tombstones_sql(spec.staging, spec.batch_id, spec.key, spec.ordering)
    known = known_sql(spec, changes, stored, f"SELECT DISTINCT {', '.join(keys)} FROM ({tomb})")
    ords = ", ".join(f"'o{i}', {_pos('c', o)}" for i, o in enumerate(spec.ordering))
    same, other = compaction.follows_sql("b", "c", PARTITION, OFFSET, STORED_BATCH, spec.ordering,
                                         spec.batch_id, spec.resets)
    prior = (f"SELECT {', '.join('b.' + k for k in keys)}, max(named_struct({ords}, 'ts', c.{q(SOURCE_TS_MS)})) "
             f"AS `__prev` FROM ({tomb}) b JOIN ({known}) c ON {key_join('b', 'c', spec.key)} "
             f"AND ({same} OR {other}) AND NOT {is_compacted('c')} "
             f"GROUP BY {', '.join('b.' + k for k in keys)}, b.{q(PARTITION)}, b.{q(OFFSET)}")
    placed = (f"SELECT DISTINCT {', '.join(keys)}, "
              + ", ".join(f"`__prev`.o{i} AS {q(o)}" for i, o in enumerate(spec.ordering))
              + f", `__prev`.ts AS {q(SOURCE_TS_MS)} FROM ({prior})")
    real = f"SELECT * FROM ({known}) x WHERE x.{q(OP)} = 'd' AND NOT {is_compacted('x')}"
    part, off = COMPACTED_DELETE
    row = [f"p.{q(c)}" if c in spec.key else f"NULL AS {q(c)}" for c in spec.columns]
    return (f"SELECT {', '.join(row)}, {', '.join('p.' + q(o) for o in spec.ordering)}, 'd' AS {q(OP)}, "
            f"{part} AS {q(PARTITION)}, {off} AS {q(OFFSET)}, p.{q(SOURCE_TS_MS)}, "
            f"CAST(NULL AS ARRAY<STRING>) AS {q(UNAVAILABLE)} FROM ({placed}) p "
            f"LEFT ANTI JOIN ({real}) r ON {key_join('p', 'r', spec.key)} AND NOT {position_gt(spec, 'p', 'r')}")


def voided_sql(spec: ModeSpec, changes: str) -> str:
    """Append: stored compacted deletes that a real delete of the batch at a newer-or-equal position makes void, as
    change rows (staging names) to remove."""
    real = f"SELECT * FROM ({changes}) x WHERE x.{q(OP)} = 'd' AND NOT {is_compacted('x')}"
    cols = [f"t.{q(c)}" for c in (*spec.columns, *spec.ordering, OP)] + [
        f"t.{q(KAFKA_PARTITION)} AS {q(PARTITION)}", f"t.{q(KAFKA_OFFSET)} AS {q(OFFSET)}", f"t.{q(SOURCE_TS_MS)}",
        f"CAST(NULL AS ARRAY<STRING>) AS {q(UNAVAILABLE)}"]
    return (f"SELECT {', '.join(cols)} FROM {spec.target} t LEFT SEMI JOIN ({real}) r "
            f"ON {key_join('t', 'r', spec.key)} AND NOT {position_gt(spec, 't', 'r')} "
            f"WHERE t.{q(OP)} = 'd' AND {is_compacted('t', KAFKA_PARTITION)}")


def live_events_sql(spec: ModeSpec, events: str) -> str:
    """scd2: the events without compacted deletes that a real delete of the key at a newer-or-equal position makes
    void."""
    real = f"SELECT * FROM ({events}) x WHERE x.{q(OP)} = 'd' AND NOT {is_compacted('x')}"
    return (f"SELECT e.* FROM ({events}) e LEFT ANTI JOIN ({real}) r ON {is_compacted('e')} AND e.{q(OP)} = 'd' "
            f"AND {key_join('e', 'r', spec.key)} AND NOT {position_gt(spec, 'e', 'r')}")
