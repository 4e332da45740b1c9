"""The pipeline's own tables, ``ledger`` and ``dead_letters``: creation and upgrade from older versions."""

from __future__ import annotations

from typing import Any

from cdc.common.sql import lit, q
from cdc.config.model import PipelineConfig
from cdc.iceberg.tables import iceberg_table, props_sql
from cdc.ledger.model import DEAD_LETTER_COLUMNS, LEDGER_COLUMNS, MAX_AGE_MS, MAX_AGE_PROPERTY, ddl_of

LEDGER_DDL = ddl_of(LEDGER_COLUMNS)


DEAD_LETTERS_DDL = ddl_of(DEAD_LETTER_COLUMNS)


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


# The tables of one job (cdc.run.group) commit to the ledger at once: each commit's metadata swap may have to retry a few
# times behind the others' (they touch different partitions, so the retry always succeeds). A batch's rows are
# rewritten by an overwrite that must see from a file's bounds that all its rows are the batch's (cdc.ledger.write):
# the pipeline name's bounds are kept whole (by default strings are cut to 16 characters).
# Its snapshots older than a day are expired by the job itself (cdc.ledger.expiry): each commit rewrites a metadata
# file that lists them all.
LEDGER_SETTINGS = {"commit.retry.num-retries": "10", "write.metadata.metrics.column.pipeline": "full",
                   MAX_AGE_PROPERTY: str(MAX_AGE_MS)}
