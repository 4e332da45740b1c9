"""Primary-key changes with unchanged TOAST values, in one batch or across batches (issue 17, scenario 2).

PostgreSQL's ``UPDATE ... SET id = 2 WHERE id = 1`` with an unchanged TOASTed column arrives as d(1)@L (header
``__debezium.newkey``), a Kafka tombstone, and c(2, placeholder)@L (header ``__debezium.oldkey``). The reader stages
the headers' keys as ``__old_key`` / ``__new_key`` (``cdc.stage.headers``). The new key's placeholder columns take
the old key's value *as of just before L*, its **image**:

* ``image_sql``: for a key k and a source position L, per column, the newest change of k in the batch ordered before
  L that had the column (if newer than the table row), else the table's live row of k if that is ordered before L,
  else what an earlier delivery of the delete at L left (its tombstone's image; soft mode: the soft-deleted row).
* The image of a move's delete is computed before anything is merged and kept in staging as a row of kind ``image``
  (the delete's partition and offset, ``__moved``; ``remember_images``, written once, so a rerun after a crash that
  already deleted the old row uses the image computed first); ``cdc.merge.sql.changes_sql`` gives it to the delete, which
  stores it in its tombstone (``cdc.merge.sql.merge_tombstones_sql``).
* ``fill_moved_sql``: a create with ``__old_key`` takes each placeholder column from, in this order, the staged
  delete of the old key at L in the batch (its ``__moved``), the old key's tombstone at L (the delete was merged in
  an earlier batch; soft mode: the soft-deleted row at L, whose columns are the ones it had before the delete),
  else the old key's image (the delete is in a later batch: its partition lags). What none of them knows stays a
  placeholder and falls back to ``cdc.merge.sql.moved_toast_sql`` / the table (NULL).

All of it is read-only except ``remember_images`` (an append to the batch's staging partition); every write goes through the fenced MERGEs of ``cdc.merge``.
Tombstone GC (maintenance) drops a tombstone at L only when every partition of the topic has committed past L, so
the create at L has been merged by then (replays of it are not newer than the row it made).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from cdc.common.sql import key_join, lit, q
from cdc.iceberg.tables import evolve
from cdc.merge.sql import MergeSpec, _change_columns, _live, changes_sql
from cdc.positions.sql import tuple_eq, tuple_gt
from cdc.schema.columns import (
    DELETED,
    IMAGE,
    KIND,
    MOVED,
    NEW_KEY,
    OFFSET,
    OLD_KEY,
    OP,
    PARTITION,
    TOPIC,
    UNAVAILABLE,
    Column,
    moved_column,
)

__all__ = ["delete_images_sql", "fill_moved_sql", "image_sql", "prepare", "remember_images"]


def _has(col: str, t: str = "ch") -> str:
    return (f"{t}.{q(OP)} <> 'd' AND NOT array_contains(coalesce({t}.{q(UNAVAILABLE)}, array()), {lit(col)})")


def _eq_ordering(a: str, b: str, ordering: Sequence[str]) -> str:
    return tuple_eq(a, ordering, b, ordering)  # NULL epochs (tombstones from before the epoch column) are epoch 0


def image_sql(spec: MergeSpec, requests: str, changes: str, columns: Sequence[str]) -> str:
    """Per request (distinct key columns + ordering columns, named as in the table), ``<col>__img`` for each of
    ``columns``: ``named_struct('v', value)`` of the key's value just before that position, NULL when unknown."""
    keys, ords = [q(k) for k in spec.key], [q(o) for o in spec.ordering]
    pos = ", ".join(f"{lit(c)}, ch.{q(c)}" for c in spec.staged_position)
    prior = ", ".join(f"max_by(IF({_has(c)}, named_struct({pos}, 'v', ch.{q(c)}), NULL), "
                      f"IF({_has(c)}, named_struct({pos}), NULL)) AS {q(c + '__p')}" for c in columns)
    group = ", ".join(f"r.{x}" for x in keys + ords)
    priors = (f"SELECT {group}, {prior} FROM ({requests}) r LEFT JOIN ({changes}) ch "
              f"ON {key_join('r', 'ch', spec.key)} AND {tuple_gt('r', spec.ordering, 'ch', spec.ordering)} "
              f"GROUP BY {group}")
    before = f"{_live(spec)} AND {tuple_gt('p', spec.ordering, 't', spec.ordering)}"
    # an earlier delivery of the move's delete (a redelivery, at the same source position) already left the image:
    # in its tombstone, or (soft mode) as the soft-deleted row's columns
    if spec.soft:
        again, tomb = f"coalesce(t.{q(DELETED)}, false) AND {_eq_ordering('t', 'p', spec.ordering)}", ""
        kept = lambda c: f"t.{q(c)}"  # noqa: E731
    else:
        again = f"tb.{q(MOVED)} IS NOT NULL"
        tomb = (f" LEFT JOIN {spec.tombstones} tb ON {key_join('p', 'tb', spec.key)} "
                f"AND {_eq_ordering('tb', 'p', spec.ordering)}")
        kept = lambda c: f"tb.{q(MOVED)}.{q(c)}"  # noqa: E731
    imgs = []
    for c in columns:
        p = f"p.{q(c + '__p')}"
        fresh = f"{p} IS NOT NULL AND {tuple_gt(p, spec.staged_position, 't', spec.stored_position)}"
        imgs.append(f"CASE WHEN {fresh} THEN named_struct('v', {p}.v) WHEN {before} THEN named_struct('v', t.{q(c)}) "
                    f"WHEN {again} THEN named_struct('v', {kept(c)}) END AS {q(c + '__img')}")
    return (f"SELECT {', '.join('p.' + x for x in keys + ords)}, {', '.join(imgs)} FROM ({priors}) p "
            f"LEFT JOIN {spec.target} t ON {key_join('p', 't', spec.key)}{tomb}")


def _move_deletes(changes: str, ordering: Sequence[str], key: Sequence[str]) -> str:
    cols = ", ".join(q(c) for c in (*key, *ordering))
    return f"SELECT DISTINCT {cols} FROM ({changes}) WHERE {q(OP)} = 'd' AND {q(NEW_KEY)} IS NOT NULL"


def delete_images_sql(spec: MergeSpec, changes: str, columns: Sequence[str]) -> str:
    """The image of each PK move's delete in the batch: its staged partition and offset (``__p``, ``__o``) and
    ``__image``."""
    image = image_sql(spec, _move_deletes(changes, spec.ordering, spec.key), changes, columns)
    value = "named_struct(" + ", ".join(f"{lit(c)}, i.{q(c + '__img')}.v" for c in columns) + ")"
    return (f"SELECT d.{q(PARTITION)} AS `__p`, d.{q(OFFSET)} AS `__o`, {value} AS `__image` FROM ({changes}) d "
            f"JOIN ({image}) i "
            f"ON {key_join('d', 'i', spec.key)} AND {_eq_ordering('d', 'i', spec.ordering)} "
            f"WHERE d.{q(OP)} = 'd' AND d.{q(NEW_KEY)} IS NOT NULL")


def fill_moved_sql(spec: MergeSpec, changes: str) -> str:
    """Creates of a PK move (``__old_key``) take their placeholder columns from the old key (module doc)."""
    if not (spec.pk_moves and spec.toast_columns):
        return changes
    ords, cols = spec.ordering, spec.toast_columns
    old = {k: f"c.{q(OLD_KEY)}.{q(k)}" for k in spec.key}
    on_old = lambda t: " AND ".join(f"{t}.{q(k)} = {v}" for k, v in old.items())  # noqa: E731
    is_move = f"c.{q(OP)} = 'c' AND c.{q(OLD_KEY)} IS NOT NULL"
    group = ", ".join(q(c) for c in (*spec.key, *ords))
    batch_d = (f"SELECT {group}, first({q(MOVED)}, true) AS {q(MOVED)} FROM ({changes}) WHERE {q(OP)} = 'd' "
               f"AND {q(MOVED)} IS NOT NULL GROUP BY {group}")
    requests = (f"SELECT DISTINCT {', '.join(f'{v} AS {q(k)}' for k, v in old.items())}, "
                f"{', '.join('c.' + q(o) for o in ords)} FROM ({changes}) c WHERE {is_move} "
                f"AND size(coalesce(c.{q(UNAVAILABLE)}, array())) > 0")
    joins = (f" LEFT JOIN ({batch_d}) dm ON {is_move} AND {on_old('dm')} AND {_eq_ordering('dm', 'c', ords)}"
             f" LEFT JOIN ({image_sql(spec, requests, changes, cols)}) im ON {is_move} AND {on_old('im')} "
             f"AND {_eq_ordering('im', 'c', ords)}")
    if spec.soft:  # the soft-deleted row at the move's position still holds the old key's columns
        joins += (f" LEFT JOIN {spec.target} tb ON {is_move} AND {on_old('tb')} AND coalesce(tb.{q(DELETED)}, false) "
                  f"AND {_eq_ordering('tb', 'c', ords)}")
        earlier = lambda c: f"IF(tb.{q(spec.key[0])} IS NULL, NULL, named_struct('v', tb.{q(c)}))"  # noqa: E731
    else:
        joins += (f" LEFT JOIN {spec.tombstones} tb ON {is_move} AND {on_old('tb')} AND tb.{q(MOVED)} IS NOT NULL "
                  f"AND {_eq_ordering('tb', 'c', ords)}")
        earlier = lambda c: f"IF(tb.{q(MOVED)} IS NULL, NULL, named_struct('v', tb.{q(MOVED)}.{q(c)}))"  # noqa: E731
    found = {c: (f"coalesce(IF(dm.{q(MOVED)} IS NULL, NULL, named_struct('v', dm.{q(MOVED)}.{q(c)})), "
                 f"{earlier(c)}, im.{q(c + '__img')})") for c in cols}
    takes = {c: (f"{is_move} AND array_contains(coalesce(c.{q(UNAVAILABLE)}, array()), {lit(c)}) "
                 f"AND {found[c]} IS NOT NULL") for c in cols}
    filled = [f"CASE WHEN {takes[c]} THEN {found[c]}.v ELSE c.{q(c)} END AS {q(c)}" for c in cols]
    drop = " OR ".join(f"(x = {lit(c)} AND {takes[c]})" for c in cols)
    unavailable = f"filter(c.{q(UNAVAILABLE)}, x -> NOT ({drop})) AS {q(UNAVAILABLE)}"
    keep = [f"c.{q(c)}" for c in _change_columns(spec) if c not in cols and c != UNAVAILABLE]
    return f"SELECT {', '.join(keep + filled)}, {unavailable} FROM ({changes}) c{joins}"


def prepare(spark: Any, spec: MergeSpec, row_columns: Sequence[Column],
            moves: tuple[int, int] | None = None) -> MergeSpec:
    """The merge spec for a staged batch: with ``pk_moves`` when it has PK-move headers (then ``__moved`` is added
    to staging and tombstones as needed and the moves' deletes get their images); unchanged otherwise. ``moves``:
    the header counts ``cdc.stage.stats.batch_stats`` found (counted here when not given)."""

    if moves is None:
        if OLD_KEY not in {f.name for f in spark.table(spec.staging).schema.fields}:
            return spec  # staged by a version without header columns
        row = spark.sql(f"SELECT count_if({q(OLD_KEY)} IS NOT NULL) AS o, "
                        f"count_if({q(NEW_KEY)} IS NOT NULL AND {q(OP)} = 'd') AS d FROM {spec.staging} "
                        f"WHERE batch_id = {int(spec.batch_id)} AND {q(KIND)} = 'change'").first()
        moves = (row["o"], row["d"])
    if not (moves[0] or moves[1]):
        return spec
    moved = moved_column(row_columns, spec.key)
    evolve(spark, spec.staging, [moved])
    if spec.tombstones:
        evolve(spark, spec.tombstones, [moved])
    spec = replace(spec, pk_moves=True)
    if moves[1]:
        remember_images(spark, spec, [c.name for c in row_columns if c.name not in spec.key])
    return spec


def remember_images(spark: Any, spec: MergeSpec, columns: Sequence[str]) -> None:
    """Keep the images of the batch's PK-move deletes as staging rows of kind ``image`` (the delete's partition and
    offset, ``__moved``), once: a rerun (the old rows may be gone by then) uses the images of the first run."""
    from pyspark.sql import functions as F


    batch = f"{spec.staging} WHERE batch_id = {int(spec.batch_id)}"
    if spark.sql(f"SELECT count(*) FROM {batch} AND {q(KIND)} = {lit(IMAGE)}").first()[0]:
        return
    topic = spark.sql(f"SELECT first({q(TOPIC)}) FROM {batch}").first()[0]
    images = spark.sql(delete_images_sql(spec, changes_sql(spec), columns))
    have = {"batch_id": F.lit(int(spec.batch_id)).cast("bigint"), TOPIC: F.lit(topic),
            PARTITION: F.col("__p"), OFFSET: F.col("__o"), KIND: F.lit(IMAGE), MOVED: F.col("__image")}
    fields = spark.table(spec.staging).schema.fields
    images.select(*[have.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in fields]
                  ).writeTo(spec.staging).append()
