"""``cdc.ledger.tables.ensure_meta_tables`` on a real Iceberg catalog: it creates the metadata tables, brings a ledger of an
older version up to this one, and skips its statements (``meta_tables_current``) only when nothing is missing."""

from __future__ import annotations

import pytest

from cdc.config.load import parse_config
from cdc.ledger.model import LEDGER_COLUMNS
from cdc.ledger.tables import LEDGER_SETTINGS, ensure_meta_tables, meta_tables_current

pytestmark = pytest.mark.integration


def config(namespace: str, warehouse) -> object:
    return parse_config({
        "pipeline": "meta", "kafka": {"bootstrap.servers": "127.0.0.1:1"}, "format": "json",
        "metadata_namespace": namespace,
        "catalog": {"name": "lake", "type": "hadoop", "warehouse": str(warehouse)},
        "tables": [{"topic": "x", "target": "a.b"}],
    })


def test_a_new_namespace_gets_both_tables_and_is_then_current(spark, warehouse):
    cfg = config("meta_new", warehouse)
    assert not meta_tables_current(spark, "lake.meta_new")
    ensure_meta_tables(spark, cfg)
    assert meta_tables_current(spark, "lake.meta_new")
    ensure_meta_tables(spark, cfg)  # the fast path: nothing changes
    assert [f.name for f in spark.table("lake.meta_new.ledger").schema.fields] == [n for n, _ in LEDGER_COLUMNS]


def test_a_ledger_of_an_older_version_is_not_current_until_it_is_upgraded(spark, warehouse):
    """An older ledger (no ``max_position``/``server_ids`` columns, no retry setting) and a missing dead-letter table:
    the fast path must not skip the upgrade."""
    cfg = config("meta_old", warehouse)
    old = ", ".join(f"`{n}` {t}" for n, t in LEDGER_COLUMNS if n not in ("max_position", "server_ids"))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.meta_old")
    spark.sql(f"CREATE TABLE lake.meta_old.ledger ({old}) USING iceberg PARTITIONED BY (table_name)")
    spark.sql("INSERT INTO lake.meta_old.ledger SELECT 'meta', 'a.b', 1, 'incremental', 'x', 0, 0, 5, 'committed', "
              + ", ".join(["NULL"] * (len(LEDGER_COLUMNS) - 11)))
    assert not meta_tables_current(spark, "lake.meta_old")
    ensure_meta_tables(spark, cfg)
    assert meta_tables_current(spark, "lake.meta_old")
    have = {f.name for f in spark.table("lake.meta_old.ledger").schema.fields}
    assert {"max_position", "server_ids"} <= have
    props = {r["key"]: r["value"] for r in spark.sql("SHOW TBLPROPERTIES lake.meta_old.ledger").collect()}
    assert all(props.get(k) == v for k, v in LEDGER_SETTINGS.items())
    assert spark.sql("SELECT count(*) FROM lake.meta_old.ledger").first()[0] == 1  # its rows are kept
    spark.sql("ALTER TABLE lake.meta_old.ledger UNSET TBLPROPERTIES ('commit.retry.num-retries')")
    assert not meta_tables_current(spark, "lake.meta_old")  # a missing setting alone is enough
    spark.sql("DROP TABLE lake.meta_old.dead_letters")
    ensure_meta_tables(spark, cfg)
    assert meta_tables_current(spark, "lake.meta_old")
