"""spark-submit's --jars for a pipeline on a jdbc catalog: the PostgreSQL JDBC driver travels with the Iceberg jar."""

from __future__ import annotations

from cdc.config.load import parse_config
from cdc.spark import jars
from cdc_airflow.operators.spark_submit import job_jars


def cfg(catalog: dict, spark: dict | None = None):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": "json",
                         "catalog": catalog, "spark": spark or {}, "tables": [{"topic": "t", "target": "a.b"}]}, env={})


JDBC = {"type": "jdbc", "warehouse": "/wh", "uri": "jdbc:postgresql://db/iceberg"}


def test_the_driver_is_added_for_a_postgresql_jdbc_catalog_only() -> None:
    pg = cfg(JDBC)
    assert job_jars("/j/iceberg.jar", pg, driver="/usr/share/java/postgresql.jar") == \
        "/j/iceberg.jar,/usr/share/java/postgresql.jar"
    assert job_jars(None, pg, driver="/d/pg.jar", runtime="/w/runtime.jar") == "/w/runtime.jar,/d/pg.jar"
    assert job_jars("/j/iceberg.jar", cfg({"warehouse": "/wh"}), driver="/d/pg.jar") == "/j/iceberg.jar"
    assert job_jars(None, cfg({"warehouse": "/wh"}), driver="/d/pg.jar", runtime="/r.jar") is None
    # already there (CDC_ICEBERG_JAR lists it, or the YAML's packages bring it), or no driver file here
    assert job_jars("/j/iceberg.jar,/j/postgresql-42.7.4.jar", pg, driver="/d/pg.jar") == \
        "/j/iceberg.jar,/j/postgresql-42.7.4.jar"
    own = cfg(JDBC, {"spark.jars.packages": jars.POSTGRESQL_JDBC})
    assert job_jars("/j/iceberg.jar", own, driver="/d/pg.jar") == "/j/iceberg.jar"
    assert job_jars("/j/iceberg.jar", pg, driver=None) == "/j/iceberg.jar"


def test_a_mysql_bootstrap_brings_the_mariadb_driver(tmp_path, monkeypatch) -> None:
    jar = tmp_path / "mariadb-java-client.jar"
    jar.write_text("")
    monkeypatch.setenv(jars.MARIADB_JAR_ENV, str(jar))
    my = parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": "json",
                       "catalog": {"warehouse": "/wh"},
                       "tables": [{"topic": "t", "target": "a.b", "bootstrap": {
                           "jdbc_url": "jdbc:mysql://db:3306/shop", "user": "u", "password": "p",
                           "source_table": "shop.orders"}}]}, env={})
    assert job_jars("/j/iceberg.jar", my) == f"/j/iceberg.jar,{jar}"
    assert job_jars("/j/iceberg.jar,/j/mariadb-java-client-2.7.6.jar", my) == \
        "/j/iceberg.jar,/j/mariadb-java-client-2.7.6.jar"
