"""Java classes from Python without Py4J's name lookups.

Py4J resolves ``spark._jvm.org.apache.iceberg.spark.Spark3Util`` one name at a time, each a round trip to the JVM
that asks its class loader for a class of that name: ``org``, ``org.apache``, ``org.apache.iceberg`` and
``org.apache.iceberg.spark`` are not classes, and a class loader remembers no misses, so each of those asks every jar
on the classpath again (a simple name like ``org`` is first tried in each package PySpark imports with ``*``). PySpark
itself looks up ``functions`` this way for every ``F.col``/``F.lit``/``F.expr``, and ``PythonSQLUtils`` for every
DataFrame it builds from Python. Measured in a local session on this project's 2-core machine: a lookup of
``Spark3Util`` took 2.5-3.5 ms, ``F.col`` 1.9-3.0 ms and ``F.expr`` 2.7-4.0 ms; with the classes below imported by
name, ``F.col`` took 0.5 ms and ``F.expr`` 1.0 ms, and ``java_class`` takes no round trip at all. A small batch makes
a few dozen such calls; a job of 20 tables at once spent about 5 % of its JVM samples (JFR) in these misses.
"""

from __future__ import annotations

from typing import Any

# Classes PySpark looks up by simple name in the tables' hot paths: imported by name, each is one lookup that hits
PYSPARK_CLASSES = (
    "org.apache.spark.sql.functions",  # every pyspark.sql.functions call
    "org.apache.spark.sql.api.python.PythonSQLUtils",  # DataFrames built from Python (createDataFrame, Arrow)
    "org.apache.spark.api.python.PythonUtils",  # Python lists and maps handed to the JVM
    "org.apache.spark.sql.SparkSession",
)


def import_pyspark_classes(spark: Any) -> None:
    """Let Py4J find ``PYSPARK_CLASSES`` by their simple names without asking the class loader for other ones first
    (the same classes PySpark's ``*`` imports resolve to, so nothing else changes)."""
    from py4j.java_gateway import java_import

    for name in PYSPARK_CLASSES:
        java_import(spark._jvm, name)


def java_class(spark: Any, name: str) -> Any:
    """The Java class ``name`` (fully qualified) through Py4J, without a round trip: its static methods are called
    as ``java_class(spark, "java.util.HashMap")()`` or ``.staticMethod(...)``."""
    from py4j.java_gateway import JavaClass

    return JavaClass(name, spark.sparkContext._gateway._gateway_client)
