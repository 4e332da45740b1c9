"""spark-submit's jars for a pipeline (``job_jars``): chosen as the job chooses them for a session of its own (files
for a local master when every jar has one, else Maven coordinates; nothing when the YAML brings its own), and checked
before spark-submit starts (``CdcSparkSubmitOperator.choose_jars``)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from cdc.config.load import parse_config
from cdc.spark import jars
from cdc_airflow.operators.spark_submit import CdcJobError, CdcSparkSubmitOperator, job_jars


def cfg(catalog: dict, spark: dict | None = None):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": "json",
                         "catalog": catalog, "spark": spark or {}, "tables": [{"topic": "t", "target": "a.b"}]}, env={})


JDBC = {"type": "jdbc", "warehouse": "/wh", "uri": "jdbc:postgresql://db/iceberg"}
RUNTIME, DRIVER = "/ivy/jars/iceberg-runtime.jar", "/usr/share/java/postgresql.jar"


def test_local_files_for_a_local_master_coordinates_otherwise() -> None:
    pg = jars.for_config(cfg(JDBC))
    files = {jars.ICEBERG_SPARK_RUNTIME: RUNTIME, jars.POSTGRESQL_JDBC: DRIVER}
    assert job_jars(pg, "local[2]", {}, files=files) == {"spark.jars": f"{RUNTIME},{DRIVER}"}
    # a file missing here: what has a file travels as --jars, the rest as --packages (resolved by spark-submit)
    assert job_jars(pg, "local[2]", {}, files={jars.POSTGRESQL_JDBC: DRIVER}) == \
        {"spark.jars.packages": f"{jars.ICEBERG_SPARK_RUNTIME},{jars.POSTGRESQL_JDBC}"}
    assert job_jars(pg, "spark://h:7077", {}, files=files) == \
        {"spark.jars.packages": f"{jars.ICEBERG_SPARK_RUNTIME},{jars.POSTGRESQL_JDBC}"}
    # CDC_ICEBERG_JAR: the runtime as a file of yours
    assert job_jars(jars.for_config(cfg({"warehouse": "/wh"})), "local[*]", {}, "/opt/iceberg.jar") == \
        {"spark.jars": "/opt/iceberg.jar"}
    # the YAML's own jars win: the operator adds none (they reach spark-submit as --conf)
    assert job_jars(pg, "local[2]", {"spark.jars.packages": jars.POSTGRESQL_JDBC}, files=files) == {}


def test_a_mysql_bootstrap_brings_the_mariadb_driver(tmp_path, monkeypatch) -> None:
    my = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": "json",
                       "catalog": {"warehouse": "/wh"},
                       "tables": [{"topic": "t", "target": "a.b", "bootstrap": {
                           "jdbc_url": "jdbc:mysql://db:3306/shop", "user": "u", "password": "p",
                           "source_table": "shop.orders"}}]}, env={})
    files = {jars.ICEBERG_SPARK_RUNTIME: RUNTIME, jars.MARIADB_JDBC: "/m/mariadb.jar"}
    assert job_jars(jars.for_config(my), "local[2]", {}, files=files) == {"spark.jars": f"{RUNTIME},/m/mariadb.jar"}


def operator(**kw) -> CdcSparkSubmitOperator:
    return CdcSparkSubmitOperator(task_id="t", application="jobs/ingest.py", **kw)


def test_the_operator_checks_the_jars_before_spark_submit(tmp_path, monkeypatch) -> None:
    """A missing driver file fails the task (a person must act); a repository out of reach is retried."""
    monkeypatch.setenv("HOME", str(tmp_path))  # empty caches
    op = operator(jars="/nope/postgresql.jar")
    with pytest.raises(AirflowFailException, match="jar file /nope/postgresql.jar"):
        op.choose_jars("local[*]", None)

    def down(url, timeout):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(jars, "_head", down)
    op = operator(cdc_jars=(jars.ICEBERG_SPARK_RUNTIME,))
    with pytest.raises(CdcJobError, match="retryable error: jar org.apache.iceberg:iceberg-spark-runtime"):
        op.choose_jars("spark://h:7077", None)
    assert op.packages == jars.ICEBERG_SPARK_RUNTIME and not op.jars
    found = tmp_path / "iceberg.jar"
    found.write_bytes(b"PK")
    op = operator(cdc_jars=(jars.ICEBERG_SPARK_RUNTIME,))
    op.choose_jars("local[*]", str(found))  # CDC_ICEBERG_JAR: a file, nothing to resolve
    assert (op.jars, op.packages) == (str(found), None)
