"""``cdc.iceberg.tables.table_property`` on a real Iceberg catalog: the properties a batch reads (write mode, tombstone GC
horizon, ordering epochs) come from the Iceberg table the session's catalog holds, as ``SHOW TBLPROPERTIES`` would
show them, without a Spark statement (each costs a small batch time, issue 16)."""

from __future__ import annotations

import pytest

from cdc.common.errors import ConfigError
from cdc.iceberg.tables import (
    EPOCHS_PROPERTY,
    GC_HORIZON_PROPERTY,
    WRITE_MODE_PROPERTY,
    gc_horizon,
    table_property,
    target_state,
)
from cdc.merge.modes.runner import check_mode

pytestmark = pytest.mark.integration


def sql_executions(spark) -> int:
    """Spark SQL executions this application has started so far (statements and DataFrame actions): the newest
    execution's id + 1, once Spark's listener has seen every event. Not ``executionsCount()``: the status store keeps
    only the newest ``spark.sql.ui.retainedExecutions`` (1,000), which a long test session passes."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    kept = store.executionsCount()
    return 0 if kept == 0 else store.executionsList(kept - 1, 1).head().executionId() + 1


def test_properties_are_read_as_show_tblproperties_shows_them_without_a_statement(spark):
    name = "lake.props.t"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.props")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg")
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{GC_HORIZON_PROPERTY}' = '[5, 0, 7]', "
              f"'{EPOCHS_PROPERTY}' = '[[1, [[0, 3]]]]', '{WRITE_MODE_PROPERTY}' = 'scd2')")
    shown = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}

    before = sql_executions(spark)
    assert table_property(spark, name, GC_HORIZON_PROPERTY) == shown[GC_HORIZON_PROPERTY]
    assert table_property(spark, name, "cdc.not-set") is None
    assert gc_horizon(spark, name) == (5, 0, 7)
    state = target_state(spark, name)
    assert (state.exists, state.epochs, state.write_mode) == (True, ((1, ((0, 3),)),), "scd2")
    assert [c.name for c in state.columns] == ["id"] and state.snapshot is None and state.total_records == 0
    check_mode(state, "scd2")
    with pytest.raises(ConfigError, match="created with write_mode scd2"):
        check_mode(state, "upsert")
    assert sql_executions(spark) == before

    # a change this session commits is what the next read returns
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{GC_HORIZON_PROPERTY}' = '[6, 0, 1]')")
    assert gc_horizon(spark, name) == (6, 0, 1)
    # another session's (another process's) change counts once the table is refreshed, as with SHOW TBLPROPERTIES
    spark.newSession().sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES ('{GC_HORIZON_PROPERTY}')")
    spark.catalog.refreshTable(name)
    assert gc_horizon(spark, name) is None
