"""``cdc.py4j_classes`` in the session ``cdc.session`` builds: the Java classes the job uses on every table are reached
without Py4J name lookups that miss (each miss asks every jar on the classpath; see the module). Observed from
Python: a lookup that misses comes back as a ``JavaPackage``; and from the JVM: the default view's imports."""

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
    from cdc.snapshot_summary import commit_properties
    from cdc.tables import current_snapshot, ensure_meta_tables, meta_tables_current

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


def test_pyspark_s_hot_classes_are_imported_by_name(spark):
    """PySpark imports their packages with ``*``: a simple name is tried in each package until one has it."""
    from py4j.java_gateway import JavaObject
    from py4j.protocol import GATEWAY_SERVER_OBJECT_ID

    from cdc.py4j_classes import PYSPARK_CLASSES

    server = JavaObject(GATEWAY_SERVER_OBJECT_ID, spark.sparkContext._gateway._gateway_client)
    singles = server.getGateway().getDefaultJVMView().getSingleImportsMap()
    assert {name.rsplit(".", 1)[1]: str(singles.get(name.rsplit(".", 1)[1])) for name in PYSPARK_CLASSES} == {
        name.rsplit(".", 1)[1]: name for name in PYSPARK_CLASSES}
    from pyspark.sql import functions as F

    assert spark.range(3).select((F.col("id") + F.lit(1)).alias("x")).agg(F.expr("sum(x)")).first()[0] == 6
