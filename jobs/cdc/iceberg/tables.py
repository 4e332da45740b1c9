"""Iceberg tables the job owns: names, schemas, creation and evolution.

Per pipeline (in ``metadata_namespace``): ``ledger`` and ``dead_letters``. Per target table
``<ns>.<table>``: ``staging__<ns>__<table>`` (raw CDC rows of each batch, partitioned by ``batch_id``) and, for hard
deletes, ``tombstones__<ns>__<table>``. Types are carried as Arrow types (``cdc.schema.columns.Column``) and
converted to Spark here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa

from cdc.common.errors import SchemaEvolutionError
from cdc.common.sql import lit, q
from cdc.config.table_layout import (
    REQUIRED_PROPERTIES,
    TableLayout,
    partition_changes,
    partitioning_of,
    property_changes,
    sort_order_text,
)
from cdc.positions.ordering import Epochs, epochs_json, epochs_of
from cdc.schema.columns import Column, target_meta, tombstone_columns
from cdc.schema.evolution import sql_type, table_changes
from cdc.schema.widening import ADD, Incompatible
from cdc.spark.py4j_classes import iceberg_class, java_class


def equal_filter(spark: Any, equal: Mapping[str, Any], within: Mapping[str, Sequence[Any]] | None = None) -> Any:
    """Iceberg's row filter (an ``Expression``) of the rows where every column of ``equal`` has its value and every
    column of ``within`` one of its values."""
    expressions = iceberg_class(spark, "expressions.Expressions")
    both = getattr(expressions, "and")
    row_filter = expressions.alwaysTrue()
    for column, value in equal.items():
        row_filter = both(row_filter, expressions.equal(column, value))
    for column, values in (within or {}).items():
        one_of = spark.sparkContext._gateway.new_array(java_class(spark, "java.lang.Object"), len(values))
        for i, v in enumerate(values):
            one_of[i] = v
        row_filter = both(row_filter, getattr(expressions, "in")(column, one_of))
    return row_filter


TABLE_PROPS = REQUIRED_PROPERTIES  # every table's defaults; targets add the user's layout (cdc.config.table_layout)
# The job's own properties of a target table:
WRITE_MODE_PROPERTY = "cdc.write-mode"  # the write mode it was created with (absent: upsert; cdc.merge.modes)
EPOCHS_PROPERTY = "cdc.ordering-epochs"  # the ordering_epoch history merged into it (JSON, cdc.positions.ordering)

GC_HORIZON_PROPERTY = "cdc.gc-horizon"  # on a tombstones table: JSON position list, see cdc.merge (scenario: GC)


def spark_type(t: pa.DataType) -> Any:
    """Arrow type → Spark type (timestamps without zone → TIMESTAMP_NTZ, with zone → TIMESTAMP)."""
    from pyspark.sql import types as T

    simple = {pa.int8(): T.ByteType(), pa.int16(): T.ShortType(), pa.int32(): T.IntegerType(),
              pa.int64(): T.LongType(), pa.float32(): T.FloatType(), pa.float64(): T.DoubleType(),
              pa.bool_(): T.BooleanType(), pa.string(): T.StringType(), pa.large_string(): T.StringType(),
              pa.binary(): T.BinaryType(), pa.large_binary(): T.BinaryType(), pa.date32(): T.DateType()}
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in t])
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), True)
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_schema(columns: Sequence[Column]) -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(c.name, spark_type(c.arrow_type), c.nullable) for c in columns])


def ddl(columns: Sequence[Column], not_null: Sequence[str] = ()) -> str:
    return ", ".join(f"{q(c.name)} {spark_type(c.arrow_type).simpleString()}"
                     + (" NOT NULL" if c.name in not_null else "") for c in columns)


def props_sql(extra: dict[str, str] | None = None) -> str:
    props = {**TABLE_PROPS, **(extra or {})}
    return ", ".join(f"{lit(k)}={lit(str(v))}" for k, v in props.items())


def exists(spark: Any, name: str) -> bool:
    return bool(spark.catalog.tableExists(name))


def existing_columns(spark: Any, name: str) -> list[Column]:
    """Columns of an existing table as Arrow-typed ``Column``s (empty when the table does not exist)."""
    return _columns(spark, name) if exists(spark, name) else []


def _columns(spark: Any, name: str) -> list[Column]:
    from pyspark.sql.pandas.types import to_arrow_type

    return [Column(f.name, to_arrow_type(f.dataType), f.nullable) for f in spark.table(name).schema.fields]


@dataclass(frozen=True)
class TargetState:
    """A target table as one look at the session's catalog finds it at the start of a phase (plan, merge): whether
    it exists, its columns, its current snapshot, the write mode it was created with and its ordering-epoch history.
    Read once and handed down; what must be seen fresh (a snapshot id a commit is validated from, a table other writers
    commit to) is read where it is needed, by ``snapshot_id`` / ``fresh_snapshot_id``."""

    name: str
    exists: bool
    columns: tuple[Column, ...] = ()
    snapshot: Snapshot | None = None
    write_mode: str | None = None  # WRITE_MODE_PROPERTY; None: upsert, or no table
    epochs: Epochs = ()
    key: tuple[str, ...] = ()  # its identifier fields: an upsert target's primary key (``ensure_target``)

    @property
    def total_records(self) -> int:
        """Rows in its data files (0 for an empty or missing table), by which the merge's filters are chosen."""
        return 0 if self.snapshot is None else self.snapshot.total_records


def target_state(spark: Any, name: str) -> TargetState:
    """``name`` as the session's catalog holds it now (no Spark job: a Spark catalog lookup and the Iceberg table
    through Py4J)."""
    if not exists(spark, name):
        return TargetState(name, False)
    table = iceberg_table(spark, name)
    props = table.properties()  # looked up, not iterated (see cdc.ledger.tables.meta_tables_current)
    return TargetState(name, True, tuple(_columns(spark, name)), snapshot_of(table),
                       props.get(WRITE_MODE_PROPERTY), epochs_of(json.loads(props.get(EPOCHS_PROPERTY) or "[]")) or (),
                       identifier_fields(table))


def identifier_fields(table: Any) -> tuple[str, ...]:
    """The identifier fields of an Iceberg ``Table`` (Java, through Py4J), in schema order."""
    schema = table.schema()
    ids = {int(i) for i in schema.identifierFieldIds()}
    return tuple(f.name() for f in schema.columns() if int(f.fieldId()) in ids)


def record_epochs(spark: Any, state: TargetState, epochs: Epochs | None) -> None:
    """Remember in the target where each ordering epoch starts, when that differs from what it holds."""
    if epochs and epochs != state.epochs:
        raw = json.dumps(epochs_json(epochs))
        spark.sql(f"ALTER TABLE {state.name} SET TBLPROPERTIES ('{EPOCHS_PROPERTY}' = '{raw}')")


@dataclass(frozen=True)
class Snapshot:
    """A table's current snapshot: its id and ``total-records`` (rows in its data files, deletes not subtracted:
    what a scan of the table reads)."""

    snapshot_id: int
    total_records: int


def iceberg_table(spark: Any, name: str) -> Any:
    """The Iceberg ``Table`` (Java, through Py4J) of ``name`` as the session's catalog holds it: no Spark job."""
    return java_class(spark, "org.apache.iceberg.spark.Spark3Util").loadIcebergTable(spark._jsparkSession, name)


def table_property(spark: Any, name: str, key: str) -> str | None:
    """Property ``key`` of the existing Iceberg table ``name`` (None: not set), as the session's catalog holds the
    table (the same as ``SHOW TBLPROPERTIES`` reads, a Spark statement: two or three per batch, issue 16)."""
    return iceberg_table(spark, name).properties().get(key)


def added_records(spark: Any, name: str) -> int | None:
    """Rows the table's current snapshot added (its summary's ``added-records``; None: no snapshot, or not said), as
    the session's catalog holds it: after this session's write, what that write committed."""
    snap = iceberg_table(spark, name).currentSnapshot()
    added = None if snap is None else snap.summary().get("added-records")
    return None if added is None else int(added)


def current_snapshot(spark: Any, name: str) -> Snapshot | None:
    """The current snapshot of an existing table (None: nothing committed yet), from the Iceberg table the session's
    catalog holds: no Spark job, unlike a query of ``<table>.snapshots`` (two per batch, issue 16). After this
    session commits to the table, that is the snapshot it committed."""
    return snapshot_of(iceberg_table(spark, name))


def snapshot_of(table: Any) -> Snapshot | None:
    """The current snapshot of an Iceberg ``Table`` (Java) as a ``Snapshot`` (None: nothing committed yet)."""
    snap = table.currentSnapshot()
    if snap is None:
        return None
    total = snap.summary().get("total-records")
    return Snapshot(int(snap.snapshotId()), int(total) if total is not None else 0)


def snapshot_id(spark: Any, name: str) -> int | None:
    """The id of the table's current snapshot (None: nothing committed yet), as ``current_snapshot`` reads it."""
    snap = current_snapshot(spark, name)
    return None if snap is None else snap.snapshot_id


def fresh_snapshot_id(spark: Any, name: str) -> int | None:
    """``snapshot_id`` as the table's catalog has it now. The session's catalog caches a table as it last loaded or
    wrote it (Iceberg's ``cache-enabled``); this drops that entry first, so other processes' commits count, and the
    session's later statements read the table as reloaded here."""
    spark.catalog.refreshTable(name)
    return snapshot_id(spark, name)


def ensure_staging(spark: Any, name: str, columns: Sequence[Column]) -> None:
    """Create the staging table, or add columns a newer source schema brought."""
    if not exists(spark, name):
        spark.sql(f"CREATE TABLE {name} ({ddl(columns)}) USING iceberg PARTITIONED BY (batch_id) "
                  f"TBLPROPERTIES ({props_sql({'write.spark.accept-any-schema': 'true'})})")
        return
    evolve(spark, name, columns)


def ensure_target(spark: Any, state: TargetState, row: Sequence[Column], key: Sequence[str], ordering: Sequence[str],
                  soft: bool, layout: TableLayout | None = None) -> None:
    """Create the target table on the first batch (key columns NOT NULL + identifier fields, the configured
    partitioning, sort order and properties), else evolve it and bring its layout up to date (``apply_layout``)."""
    name, cols = state.name, [*row, *target_meta(ordering, soft)]
    if not state.exists:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
        parts = ", ".join(t.sql() for t in layout.partition_by or ()) if layout else ""
        spark.sql(f"CREATE TABLE {name} ({ddl(cols, not_null=key)}) USING iceberg"
                  + (f" PARTITIONED BY ({parts})" if parts else "")
                  + f" TBLPROPERTIES ({props_sql(layout.properties if layout else None)})")
        spark.sql(f"ALTER TABLE {name} SET IDENTIFIER FIELDS {', '.join(q(k) for k in key)}")
    else:
        evolve(spark, name, cols, state.columns)
    if layout is not None:
        apply_layout(spark, name, layout)


def apply_layout(spark: Any, name: str, layout: TableLayout) -> list[str]:
    """Bring an existing target to ``layout``: partition evolution, write order, then the configured properties (the
    write order statement sets ``write.distribution-mode``, so a configured one is set after it). Issues only what
    differs and returns it (nothing when the layout is in place); what the YAML does not name is left alone, so a
    table without layout keys costs no query."""
    stmts: list[str] = []
    if layout.partition_by is not None:
        rows = [(r[0] or "", r[1] or "") for r in spark.sql(f"DESCRIBE TABLE {name}").collect()]
        drop, add = partition_changes(partitioning_of(rows), layout.partition_by)
        stmts += [f"ALTER TABLE {name} DROP PARTITION FIELD {d}" for d in drop]  # drop first: days → hours conflicts
        stmts += [f"ALTER TABLE {name} ADD PARTITION FIELD {t.sql()}" for t in add]
    if layout.sort_by is None and not layout.properties:
        return _run(spark, stmts)
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    if layout.sort_by is not None and sort_order_text(layout.sort_by) != props.get("sort-order", ""):
        stmts.append(f"ALTER TABLE {name} WRITE ORDERED BY {', '.join(s.sql() for s in layout.sort_by)}"
                     if layout.sort_by else f"ALTER TABLE {name} WRITE UNORDERED")
        props.pop("write.distribution-mode", None)  # the statement above sets it
    changed = property_changes(props, layout.properties)
    if changed:
        pairs = ", ".join(f"{lit(k)}={lit(v)}" for k, v in changed.items())
        stmts.append(f"ALTER TABLE {name} SET TBLPROPERTIES ({pairs})")
    return _run(spark, stmts)


def _run(spark: Any, stmts: list[str]) -> list[str]:
    for stmt in stmts:
        spark.sql(stmt)
    return stmts


def ensure_tombstones(spark: Any, name: str, key_cols: Sequence[Column], ordering: Sequence[str]) -> None:
    cols = tombstone_columns(key_cols, ordering)
    if not exists(spark, name):
        spark.sql(f"CREATE TABLE {name} ({ddl(cols)}) USING iceberg TBLPROPERTIES ({props_sql()})")
    else:
        evolve(spark, name, cols)


def evolve(spark: Any, name: str, wanted: Sequence[Column], have: Sequence[Column] | None = None) -> None:
    """Add missing (nested) columns and apply safe widenings (``cdc.schema.evolution``); never drops, narrows or
    reorders. ``have``: the table's columns when the caller has just read them (else they are read here).

    An incompatible type raises ``SchemaEvolutionError`` (the batch plan checks the target first, so this only
    fires for a table that drifted, e.g. a staging table of an abandoned batch).
    """

    try:
        changes = table_changes(existing_columns(spark, name) if have is None else have, wanted)
    except Incompatible as exc:
        raise SchemaEvolutionError(f"table {name}: column {exc.column!r} is {sql_type(exc.old)} and cannot take "
                                   f"{sql_type(exc.new)}; "
                                   "migrate the table by hand") from None
    for ch in changes:
        path = ".".join(q(p) for p in ch.path)
        new_type = spark_type(ch.new).simpleString()
        if ch.kind == ADD:
            spark.sql(f"ALTER TABLE {name} ADD COLUMN {path} {new_type}")
        else:
            spark.sql(f"ALTER TABLE {name} ALTER COLUMN {path} TYPE {new_type}")


def gc_horizon(spark: Any, tombstones: str) -> tuple[int, ...] | None:
    """The highest position whose tombstones maintenance has dropped (None: never garbage-collected)."""
    if not exists(spark, tombstones):
        return None
    raw = table_property(spark, tombstones, GC_HORIZON_PROPERTY)
    return tuple(int(v) for v in json.loads(raw)) if raw else None


