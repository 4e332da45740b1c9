"""``cdc.spark.py4j_classes`` in the session ``cdc.spark.session`` builds: the Java classes the job uses on every table are reached
without Py4J name lookups that miss (each miss asks every jar on the classpath; see the module). Observed from
Python: a lookup that misses comes back as a ``JavaPackage``; one that is not made sends no command."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def misses(monkeypatch):
    """Every Py4J name lookup that found no class (Python's ``JavaPackage`` for it), by name."""
    import py4j.java_gateway as g

    found: list[str] = []
    for cls in (g.JVMView, g.JavaPackage):
        real = cls.__getattr__

        def lookup(self, name, real=real):
            got = real(self, name)
            if isinstance(got, g.JavaPackage):
                found.append(name)
            return got

        monkeypatch.setattr(cls, "__getattr__", lookup)
    return found


def test_the_job_s_own_java_calls_look_up_no_package_names(spark, misses):
    from cdc.iceberg.snapshot_summary import commit_properties
    from cdc.iceberg.tables import current_snapshot
    from cdc.ledger.tables import ensure_meta_tables, meta_tables_current

    spark.sql("CREATE TABLE lake.py4j.t (id bigint) USING iceberg")
    ensure_meta_tables(spark, SimpleNamespace(catalog=SimpleNamespace(name="lake"), metadata_namespace="py4j_meta"))
    misses.clear()  # the first run's lookups of tables that did not exist yet (each error is inspected by name)
    assert meta_tables_current(spark, "lake.py4j_meta")
    with commit_properties(spark, {"cdc.test": "1"}):
        spark.sql("INSERT INTO lake.py4j.t VALUES (1)")
    snap = current_snapshot(spark, "lake.py4j.t")
    assert snap is not None and snap.total_records == 1
    assert spark.sql("SELECT summary['cdc.test'] FROM lake.py4j.t.snapshots").first()[0] == "1"
    assert misses == []


def test_pyspark_s_hot_classes_are_bound_by_their_simple_names(spark, monkeypatch):
    """PySpark looks them up by simple name for every ``F.col``, each a round trip whose first try (the bare name)
    misses; bound on the JVM view they are Python attributes: no round trip, and the same classes."""
    from py4j.java_gateway import GatewayClient, JavaClass
    from pyspark.sql import functions as F

    from cdc.spark.py4j_classes import PYSPARK_CLASSES

    sent = []
    real = GatewayClient.send_command
    monkeypatch.setattr(GatewayClient, "send_command", lambda self, command, *a, **k: sent.append(command) or real(
        self, command, *a, **k))
    bound = {name.rsplit(".", 1)[1]: getattr(spark._jvm, name.rsplit(".", 1)[1]) for name in PYSPARK_CLASSES}
    assert sent == []
    F.col("id"), F.lit(1), F.expr("id + 1")  # PySpark's own lookups (sc._jvm.functions) are attribute hits too
    assert sent and not [c for c in sent if c.startswith("r\nu\n")]  # calls, no name lookups
    assert {n: (type(c), c._fqn) for n, c in bound.items()} == {
        name.rsplit(".", 1)[1]: (JavaClass, name) for name in PYSPARK_CLASSES}
    assert spark.range(3).select((F.col("id") + F.lit(1)).alias("x")).agg(F.expr("sum(x)")).first()[0] == 6


def test_iceberg_s_api_writes_from_the_driver_look_up_no_package_names(spark, misses):
    """The ledger's rows, a small batch's tombstones and target rows are files written and committed through
    Iceberg's Java API (``cdc.iceberg.row_commit``, ``cdc.iceberg.row_writer``, ``cdc.merge.target_write``), three to five per table and
    batch, the ledger's under its lock: each class they use is reached without a lookup (walked from
    ``spark._jvm.org``, they were about 20 misses per file)."""
    from cdc.iceberg.row_commit import overwrite_rows, replace_rows
    from cdc.iceberg.row_writer import write_frame
    from cdc.iceberg.tables import iceberg_table
    from cdc.merge.target_write import target_facts
    from tests.integration.iceberg.test_row_commit_spark import AT, located, snapshot, table, tombstone_like

    name, tombs = table(spark), tombstone_like(spark)
    spark.sql(f"INSERT INTO {name} VALUES ('a', 1, 0, 'old', NULL)")
    spark.sql(f"INSERT INTO {tombs} VALUES (1, 'old', NULL)")
    where, since, t_since = located(spark, tombs), snapshot(spark, name), snapshot(spark, tombs)
    misses.clear()
    overwrite_rows(spark, name, [{"k": "a", "b": 1, "p": 7, "s": "new", "at": AT}], {"k": "a", "b": 1}, since)
    replace_rows(spark, tombs, [{"k": 1, "s": "new", "at": AT}], [where[1]], t_since)
    target = iceberg_table(spark, tombs)
    assert target_facts(spark, target).fields[0][0] == "k"
    data_file = write_frame(spark, target, spark.sql("SELECT 5 AS k, 'framed' AS s, CAST(NULL AS TIMESTAMP) AS at"))
    assert data_file is not None and data_file.recordCount() == 1
    assert misses == []
    spark.catalog.refreshTable(name)
    spark.catalog.refreshTable(tombs)
    assert [tuple(r) for r in spark.sql(f"SELECT k, b, p, s FROM {name}").collect()] == [("a", 1, 7, "new")]
    assert [tuple(r) for r in spark.sql(f"SELECT k, s FROM {tombs}").collect()] == [(1, "new")]
