"""Spark/Py4J error text → our error classes and one-line messages (cdc.run.outcome.unwrap_task_error)."""

from __future__ import annotations

from cdc.common import errors
from cdc.run.outcome import unwrap_task_error

PY4J = """An error occurred while calling o56.sql.
: org.apache.iceberg.exceptions.RuntimeIOException: Create namespace failed: meta_1
\tat org.apache.iceberg.hadoop.HadoopCatalog.createNamespace(HadoopCatalog.java:297)
\tat py4j.ClientServerConnection.run(ClientServerConnection.java:106)
Caused by: org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: /data/wh
\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:672)
\t... 44 more
"""


def test_task_error_recovers_our_class_and_message():
    text = ("Job aborted ... Traceback ...\nRuntimeError: [cdc:BadRecordError] table a.b: topic t partition 0 offset 7: "
            "value is not valid JSON\n\tat org.apache.spark...\n")
    err = unwrap_task_error(Exception(text), "ctx")
    assert type(err) is errors.BadRecordError
    assert str(err) == "table a.b: topic t partition 0 offset 7: value is not valid JSON"
    assert err.exit_code == 2


def test_unknown_or_non_class_names_fall_back_to_cdc_error():
    for name in ("NoSuchError", "annotations", "Path"):
        err = unwrap_task_error(Exception(f"[cdc:{name}] boom"), "ctx")
        assert type(err) is errors.CdcError and str(err) == "boom"


def test_storage_failure_is_a_catalog_error_with_the_innermost_cause():
    err = unwrap_task_error(Exception(PY4J), "catalog lake")
    assert type(err) is errors.CatalogError and err.exit_code == 2
    msg = str(err)
    assert "\n" not in msg
    assert "ParentNotDirectoryException: Parent path is not a directory: /data/wh" in msg
    assert "An error occurred while calling" not in msg


def test_commit_conflict_is_retryable():
    text = ("An error occurred while calling o9.sql.\n: org.apache.iceberg.exceptions.ValidationException: Found "
            "conflicting files that can contain records matching true: [s3://x/data.parquet]\n\tat org.apache...")
    err = unwrap_task_error(Exception(text), "table a.b: merge failed")
    assert type(err) is errors.ConcurrentRunError and err.exit_code == 75
    assert "ValidationException: Found conflicting files" in str(err)


def test_other_spark_errors_are_exit_1_not_catalog_errors():
    """Every Spark error text mentions Iceberg classes in its stack; that alone must not make it terminal."""
    text = ("An error occurred while calling o77.sql.\n: java.lang.OutOfMemoryError: Java heap space\n"
            "\tat org.apache.iceberg.spark.source.SparkWrite.commit(SparkWrite.java:1)\n")
    err = unwrap_task_error(Exception(text), "table a.b: merge failed")
    assert type(err) is errors.CdcError and err.exit_code == 1
    assert str(err) == "table a.b: merge failed: OutOfMemoryError: Java heap space"
