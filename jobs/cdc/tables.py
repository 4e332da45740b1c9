"""Iceberg tables the job owns: names, schemas, creation and evolution.

Per pipeline (in ``metadata_namespace``): ``ledger`` and ``dead_letters``. Per target table
``<ns>.<table>``: ``staging__<ns>__<table>`` (raw CDC rows of each batch, partitioned by ``batch_id``) and, for hard
deletes, ``tombstones__<ns>__<table>``. Types are carried as Arrow types (``cdc.decode.model.Column``) and
converted to Spark here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from cdc.config import PipelineConfig, TableConfig
from cdc.decode.model import Column
from cdc.layout import staging_columns, target_meta, tombstone_columns
from cdc.ledger_history import MAX_AGE_MS, MAX_AGE_PROPERTY
from cdc.ledger_model import (DEAD_LETTER_COLUMNS, LEDGER_COLUMNS, changes_identifier, ddl_of,
                              dead_letters_identifier, ledger_identifier, staging_identifier, tombstones_identifier)
from cdc.py4j_classes import java_class
from cdc.sql import lit, q
from cdc.table_layout import (REQUIRED_PROPERTIES, TableLayout, partition_changes, partitioning_of,
                               property_changes, sort_order_text)

__all__ = ["TableNames", "names", "staging_columns", "target_meta", "spark_type", "spark_schema", "arrow_schema",
           "ensure_meta_tables", "ensure_staging", "ensure_target", "apply_layout", "ensure_tombstones", "evolve",
           "existing_columns", "gc_horizon"]

TABLE_PROPS = REQUIRED_PROPERTIES  # every table's defaults; targets add the user's layout (cdc.table_layout)

LEDGER_DDL = ddl_of(LEDGER_COLUMNS)
DEAD_LETTERS_DDL = ddl_of(DEAD_LETTER_COLUMNS)
GC_HORIZON_PROPERTY = "cdc.gc-horizon"  # on a tombstones table: JSON position list, see cdc.merge (scenario: GC)


@dataclass(frozen=True)
class TableNames:
    target: str
    staging: str
    tombstones: str
    ledger: str
    dead_letters: str
    changes: str = ""  # write_mode scd2: the change log the versions are computed from (cdc.modes)


def names(cfg: PipelineConfig, table: TableConfig) -> TableNames:
    cat, meta = cfg.catalog.name, cfg.metadata_namespace
    return TableNames(
        target=f"{cat}.{table.target}",
        staging=f"{cat}.{staging_identifier(meta, table.target)}",
        tombstones=f"{cat}.{tombstones_identifier(meta, table.target)}",
        ledger=f"{cat}.{ledger_identifier(meta)}",
        dead_letters=f"{cat}.{dead_letters_identifier(meta)}",
        changes=f"{cat}.{changes_identifier(meta, table.target)}",
    )


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


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([pa.field(c.name, c.arrow_type, c.nullable) for c in columns])


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
    if not exists(spark, name):
        return []
    from pyspark.sql.pandas.types import to_arrow_type

    return [Column(f.name, to_arrow_type(f.dataType), f.nullable) for f in spark.table(name).schema.fields]


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
    snap = iceberg_table(spark, name).currentSnapshot()
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


def ensure_meta_tables(spark: Any, cfg: PipelineConfig) -> None:
    """Create the ledger and dead-letter tables, or bring a ledger of an older version up to this one."""
    n = f"{cfg.catalog.name}.{cfg.metadata_namespace}"
    if meta_tables_current(spark, n):  # every run after the first: no statement (each costs a small batch time)
        return
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {n}")
    # Copy-on-write + serializable isolation: two runs claiming the same batch conflict at commit time.
    cow = {f"write.{op}.mode": "copy-on-write" for op in ("delete", "update", "merge")}
    iso = {f"write.{op}.isolation-level": "serializable" for op in ("delete", "update", "merge")}
    spark.sql(f"CREATE TABLE IF NOT EXISTS {n}.ledger ({LEDGER_DDL}) USING iceberg PARTITIONED BY (table_name) "
              f"TBLPROPERTIES ({props_sql({**cow, **iso, **LEDGER_SETTINGS})})")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {n}.dead_letters ({DEAD_LETTERS_DDL}) USING iceberg "
              f"TBLPROPERTIES ({props_sql()})")
    have = {f.name for f in spark.table(f"{n}.ledger").schema.fields}
    for name, sql_type in LEDGER_COLUMNS:  # a ledger created by an older version gains the newer columns
        if name not in have:
            spark.sql(f"ALTER TABLE {n}.ledger ADD COLUMN {q(name)} {sql_type}")
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {n}.ledger").collect()}
    missing = {k: v for k, v in LEDGER_SETTINGS.items() if k not in props}
    if missing:  # a ledger created by an older version
        pairs = ", ".join(f"{lit(k)}={lit(v)}" for k, v in missing.items())
        spark.sql(f"ALTER TABLE {n}.ledger SET TBLPROPERTIES ({pairs})")


def meta_tables_current(spark: Any, namespace: str) -> bool:
    """Do ``<namespace>.ledger``, with every column and setting ``ensure_meta_tables`` gives it, and
    ``<namespace>.dead_letters`` exist? Read from the Iceberg tables the session's catalog loads (Py4J, no Spark
    statement); any error reads as no: ``ensure_meta_tables`` then runs its statements, which report it. A catalog
    whose first initialisation failed is initialised again by them (Spark keeps no failed catalog): a run that lost
    the race to upgrade a JDBC catalog's schema goes on (``test_jdbc_catalog``)."""
    try:
        ledger = iceberg_table(spark, f"{namespace}.ledger")
        iceberg_table(spark, f"{namespace}.dead_letters")
        schema, props = ledger.schema(), ledger.properties()  # looked up, not iterated: the end of a Java iterator
        # is an exception, which PySpark's handler inspects with a dozen round trips
        return (all(schema.findField(name) is not None for name, _ in LEDGER_COLUMNS)
                and all(k in props for k in LEDGER_SETTINGS))
    except Exception:  # noqa: BLE001 - missing (NoSuchTableException) or unreadable: the statements decide
        return False


# The tables of one job (cdc.group) commit to the ledger at once: each commit's metadata swap may have to retry a few
# times behind the others' (they touch different partitions, so the retry always succeeds). A batch's rows are
# rewritten by an overwrite that must see from a file's bounds that all its rows are the batch's (cdc.ledger_write):
# the pipeline name's bounds are kept whole (by default strings are cut to 16 characters).
# Its snapshots older than a day are expired by the job itself (cdc.ledger_history): each commit rewrites a metadata
# file that lists them all.
LEDGER_SETTINGS = {"commit.retry.num-retries": "10", "write.metadata.metrics.column.pipeline": "full",
                   MAX_AGE_PROPERTY: str(MAX_AGE_MS)}


def ensure_staging(spark: Any, name: str, columns: Sequence[Column]) -> None:
    """Create the staging table, or add columns a newer source schema brought."""
    if not exists(spark, name):
        spark.sql(f"CREATE TABLE {name} ({ddl(columns)}) USING iceberg PARTITIONED BY (batch_id) "
                  f"TBLPROPERTIES ({props_sql({'write.spark.accept-any-schema': 'true'})})")
        return
    evolve(spark, name, columns)


def ensure_target(spark: Any, name: str, row: Sequence[Column], key: Sequence[str], ordering: Sequence[str],
                  soft: bool, layout: TableLayout | None = None) -> None:
    """Create the target table on the first batch (key columns NOT NULL + identifier fields, the configured
    partitioning, sort order and properties), else evolve it and bring its layout up to date (``apply_layout``)."""
    cols = [*row, *target_meta(ordering, soft)]
    if not exists(spark, name):
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
        parts = ", ".join(t.sql() for t in layout.partition_by or ()) if layout else ""
        spark.sql(f"CREATE TABLE {name} ({ddl(cols, not_null=key)}) USING iceberg"
                  + (f" PARTITIONED BY ({parts})" if parts else "")
                  + f" TBLPROPERTIES ({props_sql(layout.properties if layout else None)})")
        spark.sql(f"ALTER TABLE {name} SET IDENTIFIER FIELDS {', '.join(q(k) for k in key)}")
    else:
        evolve(spark, name, cols)
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


def evolve(spark: Any, name: str, wanted: Sequence[Column]) -> None:
    """Add missing (nested) columns and apply safe widenings (``cdc.evolution``); never drops, narrows or reorders.

    An incompatible type raises ``SchemaEvolutionError`` (the batch plan checks the target first, so this only
    fires for a table that drifted, e.g. a staging table of an abandoned batch).
    """
    from cdc.errors import SchemaEvolutionError
    from cdc.evolution import ADD, Incompatible, sql_type, table_changes

    try:
        changes = table_changes(existing_columns(spark, name), wanted)
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
    import json

    if not exists(spark, tombstones):
        return None
    raw = table_property(spark, tombstones, GC_HORIZON_PROPERTY)
    return tuple(int(v) for v in json.loads(raw)) if raw else None


EPOCHS_PROPERTY = "cdc.ordering-epochs"  # on a target table: the ordering_epoch history merged into it (JSON)


def target_epochs(spark: Any, target: str) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """The ``tables[].ordering_epoch`` history merged into the target: (epoch, ((partition, first offset), ...))."""
    import json

    from cdc.stage import epochs_of

    if not exists(spark, target):
        return ()
    return epochs_of(json.loads(table_property(spark, target, EPOCHS_PROPERTY) or "[]")) or ()
