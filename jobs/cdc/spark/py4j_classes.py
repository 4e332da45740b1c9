"""Java classes from Python without Py4J's name lookups.

Py4J resolves ``spark._jvm.org.apache.iceberg.spark.Spark3Util`` one name at a time, each a round trip to the JVM
that asks its class loader for a class of that name: ``org``, ``org.apache``, ``org.apache.iceberg`` and
``org.apache.iceberg.spark`` are not classes, and a class loader remembers no misses, so each of those asks every jar
on the classpath again (a simple name like ``org`` is first tried in each package PySpark imports with ``*``). PySpark
itself looks up ``functions`` this way for every ``F.col``/``F.lit``/``F.expr``, and ``PythonSQLUtils`` for every
DataFrame it builds from Python. Measured in a local session on this project's 2-core machine: a lookup of
``Spark3Util`` took 2.5-3.5 ms and ``F.col`` 1.8-3.0 ms; with ``functions`` bound as a Python attribute
(``bind_pyspark_classes``) ``F.col`` takes 0.4 ms, and ``java_class`` makes no round trip at all. A small batch
made about 130 such lookups; in a job of 20 tables at once the Py4J thread's misses were 7 % of the JVM's samples
(JFR), and without them the job took about 10 % less time and CPU (``bench/ingest_bench.py`` target 3, interleaved
runs: 50.3-51.7 s / 88-91 CPU s -> 45.6-46.5 s / 80-81 CPU s).
"""

from __future__ import annotations

from typing import Any

# Classes PySpark looks up by simple name in the tables' hot paths: bound on the JVM view, none is looked up
PYSPARK_CLASSES = (
    "org.apache.spark.sql.functions",  # every pyspark.sql.functions call
    "org.apache.spark.sql.api.python.PythonSQLUtils",  # DataFrames built from Python (createDataFrame, Arrow)
    "org.apache.spark.api.python.PythonUtils",  # Python lists and maps handed to the JVM
    "org.apache.spark.sql.SparkSession",
)


def bind_pyspark_classes(spark: Any) -> None:
    """Bind ``PYSPARK_CLASSES`` on the session's JVM view by their simple names, as the classes PySpark's ``*``
    imports resolve them to: ``spark._jvm.functions`` is then a Python attribute instead of a round trip whose
    first try, the bare name, misses (Py4J's ``TypeUtil.getClass`` tries it before any import). The attributes
    shadow the view's lookups of these names: a later ``java_import`` of another class by one of them has no
    effect."""
    for name in PYSPARK_CLASSES:
        setattr(spark._jvm, name.rsplit(".", 1)[1], java_class(spark, name))


def java_class(spark: Any, name: str) -> Any:
    """The Java class ``name`` (fully qualified) through Py4J, without a round trip: its static methods are called
    as ``java_class(spark, "java.util.HashMap")()`` or ``.staticMethod(...)``."""
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark._jvm._gateway_client)  # the view's own gateway, whatever SparkContext holds now


def iceberg_class(spark: Any, name: str) -> Any:
    """``org.apache.iceberg.<name>`` by ``java_class`` (no lookup), e.g. ``iceberg_class(spark, "FileFormat")``;
    a nested class by its binary name (``"types.Types$ListType"``). Iceberg's Java API (``cdc.iceberg.row_commit``,
    ``cdc.iceberg.row_writer``, ``cdc.merge.target_write``) writes three to five files per table and batch from the driver: walked
    as ``spark._jvm.org.apache.iceberg.data.X``, each a few misses of the class loader, they were about 20 lookups
    per file, under the ledger's lock for the ledger's rows."""
    return java_class(spark, f"org.apache.iceberg.{name}")
