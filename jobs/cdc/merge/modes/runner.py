"""Run the ``append`` / ``scd2`` statements for one staged batch (``cdc.merge.apply.apply_batch`` dispatches here).

Every statement is idempotent for a given staged batch, so a rerun after a crash anywhere gives the same table.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any, Callable, Sequence

import pyarrow as pa

from cdc.common.errors import ConfigError
from cdc.common.sql import q
from cdc.iceberg.tables import WRITE_MODE_PROPERTY, TargetState, apply_layout, ddl, evolve, exists, props_sql
from cdc.merge.modes import append, compacted, moves, scd2
from cdc.merge.modes.spec import ModeSpec
from cdc.schema.columns import (
    IS_CURRENT,
    OFFSET,
    OLD_KEY,
    OP,
    PARTITION,
    SOURCE_TS_MS,
    UNAVAILABLE,
    VALID_FROM,
    VALID_TO,
    Column,
    target_meta,
)

Checkpoint = Callable[[str], None]


def keyless_warning(target: str, topic: str) -> str:
    return (f"table {target}: topic {topic} has no message key and no primary_key is configured: ingested in "
            "append mode (one row per change, identified by partition/offset). Set primary_key (and write_mode) "
            "for this table to mirror it instead")


def effective_mode(write_mode: str | None, key: Sequence[str], target: str, source: str = "the pipeline YAML") -> str:
    """The write mode of a batch: the configured one; a keyless table is append (refused for upsert/scd2)."""
    mode = write_mode or ("upsert" if key else "append")
    if not key and mode != "append":
        raise ConfigError(f"{source}: table {target}: write_mode {mode} needs a primary key, but the topic has no "
                          "message key and no primary_key is configured; set primary_key for this table, or "
                          "write_mode: append")
    return mode


def check_mode(target: TargetState, mode: str) -> None:
    """A table keeps the write mode it was created with (its layout differs per mode)."""
    if not target.exists:
        return
    have = target.write_mode or "upsert"
    if have != mode:
        raise ConfigError(f"table {target.name}: it was created with write_mode {have}, the pipeline now says {mode}; "
                          f"set write_mode: {have} again, or give this topic a new target table (the old one "
                          "is kept as it is)")


def ensure_table(spark: Any, name: str, columns: Sequence[Column], mode: str | None, layout: Any = None) -> None:
    """Create a mode's table (all columns nullable, no identifier fields: keys repeat), or evolve it; a target
    gets the configured ``partition_by`` / ``sort_by`` / ``properties`` (``cdc.iceberg.tables.apply_layout``)."""

    if not exists(spark, name):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
        extra = {WRITE_MODE_PROPERTY: mode} if mode else {}
        spark.sql(f"CREATE TABLE {name} ({ddl(columns)}) USING iceberg TBLPROPERTIES ({props_sql(extra)})")
    else:
        evolve(spark, name, columns)
    if layout is not None:
        apply_layout(spark, name, layout)


def with_opaque(spec: ModeSpec, row: Sequence[Column]) -> ModeSpec:
    """``spec`` knowing which row columns hold maps (Spark neither compares nor groups them: ``opaque_columns``)."""
    def has_map(t: pa.DataType) -> bool:
        if pa.types.is_map(t):
            return True
        if pa.types.is_struct(t):
            return any(has_map(t.field(i).type) for i in range(t.num_fields))
        return (pa.types.is_list(t) or pa.types.is_large_list(t)) and has_map(t.value_type)

    return replace(spec, opaque_columns=tuple(c.name for c in row if has_map(c.arrow_type)))


def nullable(row: Sequence[Column]) -> list[Column]:
    return [Column(c.name, c.arrow_type, True, c.logical) for c in row]


def log_columns(row: Sequence[Column], ordering: Sequence[str]) -> list[Column]:
    """The scd2 change log: the staged change rows of every batch (raw) with their batch id."""
    return [*nullable(row), *(Column(c, pa.int64()) for c in ordering), Column(OP, pa.string()),
            Column(PARTITION, pa.int32()), Column(OFFSET, pa.int64()), Column(SOURCE_TS_MS, pa.int64()),
            Column(UNAVAILABLE, pa.list_(pa.string())), Column("batch_id", pa.int64())]


def scd2_columns(row: Sequence[Column], ordering: Sequence[str]) -> list[Column]:
    ts = pa.timestamp("us", tz="UTC")
    return [*nullable(row), Column(VALID_FROM, ts), Column(VALID_TO, ts), Column(IS_CURRENT, pa.bool_()),
            *target_meta(ordering, soft=False)]


def has_headers(spark: Any, spec: ModeSpec) -> bool:
    """Staging has the PK-move header columns (``cdc.stage.headers``; not when staged by an older version)."""
    return OLD_KEY in {f.name for f in spark.table(spec.staging).schema.fields}


def resolve_moves(spark: Any, spec: ModeSpec, changes: str, stored: str) -> str | None:
    """The batch's changes with PK-move creates' placeholders from the old key (``cdc.merge.modes.moves``), as a temp
    view, again until nothing more resolves (a chain of moves in one batch: 1 → 2 → 5); None without TOAST."""
    if not spec.toast_columns:
        return None
    headers = has_headers(spark, spec)
    pending = f"SELECT sum(size(coalesce({UNAVAILABLE}, array()))) FROM {{}} WHERE {q(OP)} = 'c'"  # creates only
    view = _view(spark, spark.sql(changes).localCheckpoint())
    left = spark.sql(pending.format(view)).first()[0] or 0
    while left:
        nxt = _view(spark, spark.sql(moves.moved_sql(spec, f"SELECT * FROM {view}", stored, headers)).localCheckpoint())
        spark.catalog.dropTempView(view)
        view, before = nxt, left
        left = spark.sql(pending.format(view)).first()[0] or 0
        if left == before:
            break
    return view


def _view(spark: Any, df: Any) -> str:
    name = f"cdc_mode_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(name)
    return name


def apply_append(spark: Any, spec: ModeSpec, row: Sequence[Column], checkpoint: Checkpoint,
                 layout: Any = None) -> dict[str, int]:
    ensure_table(spark, spec.target, [*nullable(row), *target_meta(spec.ordering, soft=False)], "append", layout)
    spec = with_opaque(spec, row)
    moved = resolve_moves(spark, spec, append.batch_changes_sql(spec), "target")
    changes = append.fill_toast_sql(spec, f"SELECT * FROM {moved}" if moved else append.batch_changes_sql(spec))
    new = append.new_changes_sql(spec, changes)
    if spec.compacted:  # compacted deletes a real delete of this batch makes void go (cdc.merge.modes.compacted)
        new = (f"SELECT *, 'insert' AS `__action` FROM ({new}) UNION ALL "
               f"SELECT *, 'void' AS `__action` FROM ({compacted.voided_sql(spec, changes)})")
    df = spark.sql(new).localCheckpoint()
    counts = ({r["__action"]: int(r["count"]) for r in df.groupBy("__action").count().collect()} if spec.compacted
              else {"insert": df.count()})
    checkpoint("after_classify")
    view = _view(spark, df)
    try:
        if any(counts.values()):
            spark.sql(append.merge_sql(spec, f"SELECT * FROM {view}", voided=spec.compacted))
            checkpoint("after_merge")
    finally:
        for v in (view, moved):
            if v:
                spark.catalog.dropTempView(v)
    return {"insert": counts.get("insert", 0), "delete": counts.get("void", 0)}


def apply_scd2(spark: Any, spec: ModeSpec, row: Sequence[Column], truncated: bool,
               checkpoint: Checkpoint, layout: Any = None) -> dict[str, int]:
    missing = [c for c in spec.track_columns if c not in spec.columns]
    if missing:
        raise ConfigError(f"table {spec.target}: track_columns {missing} are not columns of the table "
                          f"(columns: {', '.join(spec.columns)}); fix track_columns in the pipeline YAML")
    ensure_table(spark, spec.target, scd2_columns(row, spec.ordering), "scd2", layout)
    ensure_table(spark, spec.log, log_columns(row, spec.ordering), None)
    spec = with_opaque(spec, row)
    moved = resolve_moves(spark, spec, append.batch_changes_sql(spec, stored="log"), "log")
    try:
        batch = f"SELECT * FROM {moved}" if moved else append.batch_changes_sql(spec, stored="log")
        spark.sql(scd2.log_merge_sql(spec, batch))
    finally:
        if moved:
            spark.catalog.dropTempView(moved)
    checkpoint("after_log")
    toast = spark.sql(f"SELECT array_distinct(flatten(collect_list({UNAVAILABLE}))) AS u FROM {spec.log} "
                      f"WHERE {UNAVAILABLE} IS NOT NULL").first()["u"] or []
    spec = replace(spec, toast_columns=tuple(sorted(c for c in toast if c in spec.columns)))
    touched = _view(spark, spark.sql(scd2.touched_keys_sql(spec, truncated)).localCheckpoint())
    actions = versions = None
    try:  # the chains once (the actions join them twice)
        versions = _view(spark, spark.sql(scd2.versions_sql(spec, scd2.events_sql(spec, touched))).localCheckpoint())
        df = spark.sql(scd2.actions_sql(spec, f"SELECT * FROM {versions}", touched)
                       ).where("`__action` <> 'same'").localCheckpoint()
        counts = {r["__action"]: int(r["count"]) for r in df.groupBy("__action").count().collect()}
        checkpoint("after_classify")
        actions = _view(spark, df)
        if counts:
            spark.sql(scd2.merge_sql(spec, actions))
            checkpoint("after_merge")
    finally:
        for v in (touched, versions, actions):
            if v:
                spark.catalog.dropTempView(v)
    return counts

