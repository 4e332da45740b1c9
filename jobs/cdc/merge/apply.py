"""Apply one staged batch to its target table (runs the statements built in ``cdc.merge``).

Every statement is idempotent for a given staged batch, so ``apply_batch`` may run again after a crash at any point
and leaves the table exactly as one uninterrupted run would.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Sequence

from cdc.common.faults import checkpoint
from cdc.common.sql import q
from cdc.config.model import BatchConfig
from cdc.config.names import TableNames
from cdc.config.table_layout import TableLayout
from cdc.iceberg.row_writer import in_driver
from cdc.iceberg.tables import (
    TargetState,
    current_snapshot,
    ensure_target,
    ensure_tombstones,
    fresh_snapshot_id,
    gc_horizon,
    iceberg_table,
    record_epochs,
    snapshot_id,
    target_state,
)
from cdc.ledger.read import reset_batches
from cdc.merge import target_write
from cdc.merge.bloom import bloom_filtered
from cdc.merge.modes.runner import apply_append, apply_scd2, check_mode
from cdc.merge.modes.spec import ModeSpec
from cdc.merge.pk_moves import fill_moved_sql
from cdc.merge.pk_moves import prepare as prepare_moves
from cdc.merge.sql import (
    MergeSpec,
    changes_sql,
    classify_sql,
    merge_target_sql,
    merge_tombstones_sql,
    moved_toast_sql,
    newest_sql,
    truncate_sql,
)
from cdc.merge.tombstone_write import GONE, located_columns, simple_key, write_tombstones
from cdc.positions.ordering import Epochs
from cdc.positions.sql import tuple_cmp_literal
from cdc.schema.columns import DELETED, Column, align
from cdc.stage.stats import BatchStats

log = logging.getLogger("cdc.apply")
# A batch of at most this many events classified in one task (``MergeSpec.one_task``: into a small target) has its
# classification held in the driver (``cdc.iceberg.row_writer.in_driver``: the collects of its actions and of the rows to
# write run no Spark job) instead of a local checkpoint. Measured warm on this project's 2-core machine: at 1,000
# events the batch's JVM CPU -10 to -15 %; at 20,000 events +10 % (Spark's interpreted evaluation of a local
# relation, row by row, costs more than the two jobs there). Not for large targets: a MERGE into one reads the batch's
# keys through a bloom filter (cdc.merge.bloom), which Spark builds from a checkpoint but not from a local relation.
IN_DRIVER_MAX_EVENTS = 5_000


@dataclass(frozen=True)
class ApplyResult:
    inserted: int
    updated: int
    deleted: int
    skipped: int
    truncated: int
    snapshot_id: int | None
    barrier: tuple[int, ...] | None  # this batch's own newest truncate position


def apply_batch(spark: Any, names: TableNames, batch_id: int, row_columns: Sequence[Column], key: Sequence[str],
                ordering: Sequence[str], delete_mode: str, previous_barrier: tuple[int, ...] | None,
                stats: BatchStats, compacted: bool = False,
                epochs: Epochs | None = None,
                layout: TableLayout | None = None, write_mode: str = "upsert",
                track_columns: Sequence[str] = (), filters: BatchConfig = BatchConfig(),
                snapshot_deletes: bool = True) -> ApplyResult:
    """``snapshot_deletes`` (upsert): a batch in which a snapshot ended deletes the rows older than the snapshot's
    reads, like a truncate just before them (``snapshot_barrier``; ``tables[].snapshot_deletes``). ``filters``: when to cut the target to the batch's keys (``key_filter_max_changes``,
    ``key_filter_min_target_rows``, ``cdc.merge.sql.near``) and when the MERGE puts a bloom filter of the batch's keys on
    the target's scan (``bloom_filter_min_target_rows``, ``cdc.merge.bloom``); both measure the target by its current
    snapshot's ``total-records``. A batch the driver read commits its changes to the target and tombstones as row
    deltas instead of MERGEs where the result is the same (``row_deltas``; ``cdc.merge.target_write``,
    ``cdc.merge.tombstone_write``), and a batch of at most ``driver_read_max_records`` events into a target and tombstones
    of at most ``one_task_max_target_rows`` rows each is classified in one Spark task (``cdc.merge.sql.relation``)."""
    target = target_state(spark, names.target)  # the target as the merge starts: read once, handed down
    check_mode(target, write_mode)
    resets = reset_batches(spark, names.ledger, names.target.split(".", 1)[1], batch_id) if compacted else ()
    if write_mode != "upsert":  # append (changelog) / scd2 (history): cdc.merge.modes
        return apply_mode(spark, names, batch_id, row_columns, key, ordering, write_mode, track_columns, stats, epochs,
                          target, layout, compacted, resets)
    soft = delete_mode == "soft"
    key_cols = [c for c in row_columns if c.name in key]
    ensure_target(spark, target, row_columns, key, ordering, soft, layout)
    if not soft:
        ensure_tombstones(spark, names.tombstones, key_cols, ordering)
    rows = target.total_records
    own = stats.truncate
    if snapshot_deletes and stats.snapshot_end is not None:
        end = snapshot_barrier(stats.snapshot_end)
        log.info("table %s: a snapshot ended in batch %d: rows older than its reads (position %s) that it did not "
                 "read are deleted", names.target, batch_id, list(stats.snapshot_end))
        own = end if own is None or end > own else own
    previous_barrier = align(previous_barrier, len(ordering))
    barrier = max(b for b in (previous_barrier, own) if b) if (previous_barrier or own) else None
    spec = MergeSpec(
        target=names.target, staging=names.staging, tombstones=None if soft else names.tombstones,
        batch_id=batch_id, key=tuple(key), columns=tuple(c.name for c in row_columns), ordering=tuple(ordering),
        delete_mode=delete_mode, toast_columns=stats.toast_columns, barrier=barrier,
        gc_horizon=None if soft else align(gc_horizon(spark, names.tombstones), len(ordering)), compacted=compacted,
        resets=resets,
        key_filter=(0 < stats.events_read <= filters.key_filter_max_changes
                    and filters.key_filter_min_target_rows <= rows),
    )
    truncated = 0
    if own is not None:
        older = tuple_cmp_literal("t", spec.ordering, own, "<")
        live = f" AND NOT coalesce(t.{q(DELETED)}, false)" if soft else ""
        truncated = spark.sql(f"SELECT count(*) FROM {names.target} t WHERE {older}{live}").first()[0]
        for stmt in truncate_sql(spec, own, target_rows=truncated > 0):
            spark.sql(stmt)
        checkpoint("after_truncate")

    spec = prepare_moves(spark, spec, row_columns, stats.moves)  # PK moves: headers, images (cdc.merge.pk_moves)
    few = stats.events_read <= filters.driver_read_max_records
    spec = replace(spec, locate_tombstones=few and filters.row_deltas and not soft and not spec.pk_moves
                   and simple_key(key_cols))
    facts = None  # a batch the driver read (its rows fit in it) may write the target by a row delta (cdc.merge.target_write)
    if filters.row_deltas and stats.driver_bytes is not None and few:
        facts = target_write.target_facts(spark, iceberg_table(spark, names.target))
        why = target_write.ineligible(spec, facts)
        spec = replace(spec, locate_target=why is None)
        if why:
            log.debug("table %s: no row delta for the target (%s)", names.target, why)
    spec = replace(spec, one_task=few and not spec.key_filter and one_task_fits(spark, names, soft, rows, filters))
    changes = moved_toast_sql(spec, fill_moved_sql(spec, changes_sql(spec)))
    # The tables as classification reads them (the session's catalog caches a table; a later snapshot means a
    # tombstone may have been committed since, which the MERGE must then re-check: late_tombstones)
    classified_from = None if soft else snapshot_id(spark, names.tombstones)
    target_from = snapshot_id(spark, names.target)
    classified = spark.sql(classify_sql(spec, newest_sql(spec, changes)))
    bloom = 0 < filters.bloom_filter_min_target_rows <= rows  # a MERGE's target scan filtered by the batch's keys
    small = spec.one_task and stats.events_read <= IN_DRIVER_MAX_EVENTS and not bloom
    held = in_driver(spark, classified) if small else None
    classified = held if held is not None else classified.localCheckpoint()  # computed once, read several times
    located = (*(located_columns(spec) if spec.locate_tombstones else ()),
               *(target_write.located_columns(spec) if spec.locate_target else ()))
    actions, changed = read_actions(classified, few, tuple(dict.fromkeys(located)))
    checkpoint("after_classify")  # a writer that stalls here and merges late is fenced by the MERGE conditions
    view = f"cdc_classified_{uuid.uuid4().hex[:12]}"
    classified.createOrReplaceTempView(view)
    try:
        if any(actions.get(a) for a in ("insert", "update", "delete", "tombstone")):
            late = not soft and fresh_snapshot_id(spark, names.tombstones) != classified_from
            if not (spec.locate_target and not late and facts is not None
                    and target_write.write_target(spark, spec, facts, view, changed, target_from)):
                with bloom_filtered(spark, bloom):
                    spark.sql(merge_target_sql(spec, view, late_tombstones=late))
            checkpoint("after_merge")
            gone = [r for r in changed if r["__action"] in GONE]
            if not soft and (actions.get("delete") or actions.get("tombstone")) and not (
                    spec.locate_tombstones and not late and write_tombstones(spark, spec, gone, classified_from)):
                spark.sql(merge_tombstones_sql(spec, view))  # a large batch, or tombstones written since classified
    finally:
        spark.catalog.dropTempView(view)
    record_epochs(spark, target, epochs)
    return ApplyResult(
        inserted=actions.get("insert", 0), updated=actions.get("update", 0),
        deleted=actions.get("delete", 0) + truncated, skipped=actions.get("skip", 0), truncated=truncated,
        snapshot_id=snapshot_id(spark, names.target), barrier=own,
    )


def snapshot_barrier(end: Sequence[int]) -> tuple[int, ...]:
    """The truncate position a completed snapshot acts as (pure): just before its reads' position ``end``. All reads
    of an initial or blocking snapshot share one position (PostgreSQL ``(S - 1, S)``, MySQL's binlog coordinates at
    its start, SQL Server's and Oracle's snapshot LSN/SCN), so every row it read stays (not older), every row older
    than it that it did not read goes, and every change streamed after it is newer. Integer positions: "before
    ``(…, x)``" is "at or before ``(…, x - 1)``", the truncate's rule (rows below it go, changes at or below it are
    dropped)."""
    return (*end[:-1], end[-1] - 1)


def one_task_fits(spark: Any, names: TableNames, soft: bool, target_rows: int, filters: BatchConfig) -> bool:
    """Whether the target (``target_rows``) and its tombstones are small enough for a classification in one Spark
    task (``batch.one_task_max_target_rows``, ``cdc.merge.sql.relation``): each is read by that one task."""
    most = filters.one_task_max_target_rows
    return 0 < most and target_rows <= most and (soft or target_size(spark, names.tombstones) <= most)


def read_actions(classified: Any, few: bool, located: Sequence[str] = ()) -> tuple[dict[str, int],
                                                                                   list[dict[str, Any]]]:
    """Rows per ``__action`` of the classified batch, and the ``located`` columns (and ``__action``) of its rows other
    than ``skip`` (``cdc.merge.tombstone_write``, ``cdc.merge.target_write``; only for ``few``). ``few`` (a batch the driver could
    read): both come from one collect of those columns, one Spark job instead of an aggregation's two (a shuffle)
    plus a collect of the changes."""
    if few:
        rows = classified.select("`__action`", *(q(c) for c in located)).collect()
        changed = [r.asDict() for r in rows if r[0] != "skip"] if located else []
        return dict(Counter(r[0] for r in rows)), changed
    assert not located, "changes are collected only from a batch the driver could read"
    return {r["__action"]: int(r["count"]) for r in classified.groupBy("__action").count().collect()}, []


def apply_mode(spark: Any, names: TableNames, batch_id: int, row_columns: Sequence[Column], key: Sequence[str],
               ordering: Sequence[str], write_mode: str, track_columns: Sequence[str], stats: BatchStats,
               epochs: Epochs | None, target: TargetState, layout: TableLayout | None = None,
               compacted: bool = False, resets: tuple[tuple[int, int], ...] = ()) -> ApplyResult:
    spec = ModeSpec(target=names.target, staging=names.staging, batch_id=batch_id, key=tuple(key),
                    columns=tuple(c.name for c in row_columns), ordering=tuple(ordering),
                    toast_columns=stats.toast_columns, log=names.changes, track_columns=tuple(track_columns),
                    compacted=compacted and bool(key), resets=resets)
    point = lambda p: checkpoint(p)  # noqa: E731 - looked up per call (tests replace cdc.merge.apply.checkpoint)
    if write_mode == "append":
        counts = apply_append(spark, spec, row_columns, point, layout)
    else:
        counts = apply_scd2(spark, spec, row_columns, stats.truncate is not None, point, layout)
    record_epochs(spark, target, epochs)
    return ApplyResult(inserted=counts.get("insert", 0), updated=counts.get("update", 0),
                       deleted=counts.get("delete", 0), skipped=0, truncated=0,
                       snapshot_id=snapshot_id(spark, names.target), barrier=stats.truncate)


def target_size(spark: Any, table: str) -> int:
    """Rows in a table's data files (0 for an empty table), by which the merge's filters are chosen."""
    snap = current_snapshot(spark, table)
    return 0 if snap is None else snap.total_records
