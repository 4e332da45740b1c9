"""The jdbc catalog, as pure functions: config parsing, the Spark catalog and jar settings, and the SQLAlchemy URL
pyiceberg's SQL catalog needs for the same database. The real PostgreSQL counterpart:
tests/integration/iceberg/test_jdbc_catalog.py."""

from __future__ import annotations

import json

import pytest

from cdc.common.errors import ConfigError
from cdc.config.load import parse_config
from cdc.iceberg.sql_catalog import pyiceberg_properties, redact_url, sqlalchemy_url
from cdc.spark import jars
from cdc.spark.session import catalog_conf, session_conf

URI = "jdbc:postgresql://db.internal:5433/iceberg"


def cfg(catalog: dict, env: dict | None = None, src: str = "<memory>"):
    return parse_config({"pipeline": "p", "kafka": {"bootstrap.servers": "b:9092"}, "format": "json",
                         "catalog": catalog, "tables": [{"topic": "t", "target": "a.b"}]}, src, env or {})


def jdbc(**over) -> dict:
    return {"name": "lake", "type": "jdbc", "warehouse": "s3://lake/wh", "uri": URI,
            "properties": {"jdbc.user": "cdc", "jdbc.password": "${PG_PW}"}, **over}


def test_jdbc_catalog_config_uri_and_env_password() -> None:
    c = cfg(jdbc(), {"PG_PW": "s3cr3t-pw"}).catalog
    assert (c.type, c.uri, c.warehouse) == ("jdbc", URI, "s3://lake/wh")
    assert c.properties == {"jdbc.user": "cdc", "jdbc.password": "s3cr3t-pw", "uri": URI}
    assert "s3cr3t-pw" not in json.dumps(cfg(jdbc(), {"PG_PW": "s3cr3t-pw"}).redacted())
    assert "s3cr3t-pw" not in repr(cfg(jdbc(), {"PG_PW": "s3cr3t-pw"}))  # tracebacks, assertion messages, logs
    assert "'jdbc.password': '***'" in repr(c) and "'jdbc.user': 'cdc'" in repr(c)
    # the uri may also sit in properties (as for rest catalogs); the same value twice is fine
    same = cfg(jdbc(uri=None, properties={"uri": URI}), {}).catalog
    assert same.uri == URI and cfg(jdbc(properties={"uri": URI}), {}).catalog.uri == URI


@pytest.mark.parametrize("catalog,key", [
    (jdbc(uri=None), "catalog.uri"),
    (jdbc(uri="postgresql://db/iceberg"), "catalog.uri"),  # a SQLAlchemy URL where Java needs JDBC
    (jdbc(properties={"uri": "jdbc:postgresql://other/x"}), "catalog.uri"),
    (jdbc(warehouse=None), "catalog.warehouse"),
    (jdbc(properties={"jdbc.password": "${PG_PW}"}), "catalog.properties.jdbc.password"),  # variable not set
])
def test_jdbc_catalog_config_errors_name_the_key(catalog, key) -> None:
    env = {} if key.endswith("password") else {"PG_PW": "pw"}
    with pytest.raises(ConfigError, match=f"key '{key}'"):
        cfg({k: v for k, v in catalog.items() if v is not None}, env)


def test_relative_jdbc_warehouse_is_relative_to_the_yaml(tmp_path) -> None:
    c = cfg(jdbc(warehouse="wh"), {"PG_PW": "x"}, src=str(tmp_path / "p.yaml")).catalog
    assert c.warehouse == str(tmp_path / "wh")


def test_spark_catalog_settings_for_jdbc() -> None:
    conf = catalog_conf(cfg(jdbc(), {"PG_PW": "pw"}))
    assert conf == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "spark.sql.catalog.lake.warehouse": "s3://lake/wh",
        "spark.sql.catalog.lake.uri": URI,
        "spark.sql.catalog.lake.jdbc.user": "cdc",
        "spark.sql.catalog.lake.jdbc.password": "pw",
        "spark.sql.catalog.lake.jdbc.schema-version": "V1",  # the schema pyiceberg's SQL catalog also creates
        "spark.sql.catalog.lake.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",  # an s3:// warehouse (JdbcCatalog
    }                                                                             # would use Hadoop's s3a otherwise)
    own = catalog_conf(cfg(jdbc(properties={"jdbc.schema-version": "V0"})))
    assert own["spark.sql.catalog.lake.jdbc.schema-version"] == "V0"
    assert "spark.sql.catalog.lake.jdbc.schema-version" not in catalog_conf(cfg({"warehouse": "/w"}))


def test_jdbc_catalog_jars_local_driver_file_or_maven() -> None:
    local = cfg(jdbc(warehouse="/wh"), {"PG_PW": "pw"})
    runtime, driver = "/venv/iceberg-spark-runtime.jar", "/usr/share/java/postgresql.jar"
    assert jars.for_config(local) == (jars.ICEBERG_SPARK_RUNTIME, jars.POSTGRESQL_JDBC)
    files = {jars.POSTGRESQL_JDBC: driver}
    cached = {jars.ICEBERG_SPARK_RUNTIME: runtime}
    conf = session_conf(local, "local[2]", jar_files={**cached, **files})
    assert conf["spark.jars"] == f"{runtime},{driver}" and "spark.jars.packages" not in conf
    # without a local driver file (or on a cluster) Spark resolves both from Maven
    assert session_conf(local, "local[2]", jar_files=cached)["spark.jars.packages"] == \
        f"{jars.ICEBERG_SPARK_RUNTIME},{jars.POSTGRESQL_JDBC}"
    cluster = session_conf(local, "spark://h:7077", jar_files={**cached, **files})
    assert cluster["spark.jars.packages"] == f"{jars.ICEBERG_SPARK_RUNTIME},{jars.POSTGRESQL_JDBC}"
    assert "spark.jars" not in cluster
    # CDC_JARS=files: local files where there are some, Maven for the rest
    forced = session_conf(local, "local[2]", jar_files=cached, jar_mode="files")
    assert (forced["spark.jars"], forced["spark.jars.packages"]) == (runtime, jars.POSTGRESQL_JDBC)
    # a hadoop catalog never gets the driver, even when it is installed
    assert session_conf(cfg({"warehouse": "/w"}), "local[2]", jar_files={**cached, **files})["spark.jars"] \
        == runtime


def test_postgresql_jar_file_from_env_or_debian(tmp_path) -> None:
    jar = tmp_path / "pg.jar"
    jar.write_bytes(b"PK")
    assert jars.postgresql_jar({jars.POSTGRESQL_JAR_ENV: str(jar)}) == str(jar)
    assert jars.local_files({jars.POSTGRESQL_JAR_ENV: str(jar)})[jars.POSTGRESQL_JDBC] == str(jar)
    assert jars.postgresql_jar({jars.POSTGRESQL_JAR_ENV: str(tmp_path / "missing.jar")}) is None


@pytest.mark.parametrize("url,props,expected", [
    (URI, {"jdbc.user": "cdc", "jdbc.password": "pw"}, "postgresql+psycopg://cdc:pw@db.internal:5433/iceberg"),
    ("jdbc:postgresql://db/iceberg", {"jdbc.user": "cdc"}, "postgresql+psycopg://cdc@db:5432/iceberg"),
    ("jdbc:postgresql://db/ice?user=u&password=p%40ss&ssl=true&prepareThreshold=0", {},
     "postgresql+psycopg://u:p%40ss@db:5432/ice?sslmode=require"),  # JDBC-only parameters dropped
    ("jdbc:postgresql://db:1/x?sslmode=verify-full&ApplicationName=cdc", {"jdbc.user": "a"},
     "postgresql+psycopg://a@db:1/x?sslmode=verify-full&application_name=cdc"),
    ("jdbc:postgresql://a:1,b/x?targetServerType=primary", {"jdbc.user": "u"},
     "postgresql+psycopg://u@/x?target_session_attrs=read-write&host=a%3A1&host=b%3A5432"),
    ("jdbc:postgresql://[::1]/x", {"jdbc.user": "u"}, "postgresql+psycopg://u@[::1]:5432/x"),
    ("jdbc:sqlite:/tmp/catalog.db", {}, "sqlite:////tmp/catalog.db"),
])
def test_sqlalchemy_url_of_a_jdbc_url(url, props, expected) -> None:
    assert sqlalchemy_url(url, props) == expected


def test_sqlalchemy_url_quotes_credentials_and_refuses_other_databases() -> None:
    from sqlalchemy.engine import make_url

    parsed = make_url(sqlalchemy_url(URI, {"jdbc.user": "cdc@corp", "jdbc.password": "p@ss:w/rd?#"}))
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == (
        "cdc@corp", "p@ss:w/rd?#", "db.internal", 5433, "iceberg")
    with pytest.raises(ValueError, match=r"jdbc:postgresql://") as err:
        sqlalchemy_url("jdbc:mysql://db/x?password=hunter2")
    assert "hunter2" not in str(err.value)
    assert redact_url("postgresql+psycopg://u:hunter2@h/d") == "postgresql+psycopg://u:***@h/d"


def test_pyiceberg_properties_open_the_same_catalog_read_only() -> None:
    c = cfg(jdbc(properties={"jdbc.user": "cdc", "jdbc.password": "pw", "s3.endpoint": "http://minio:9000"})).catalog
    assert pyiceberg_properties(c) == {
        "type": "sql", "uri": "postgresql+psycopg://cdc:pw@db.internal:5433/iceberg", "warehouse": "s3://lake/wh",
        "init_catalog_tables": "false", "s3.endpoint": "http://minio:9000",
        "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}  # pyarrow's S3 file system (cdc.config.storage)


def test_jdbc_catalog_failures_are_named_retryable_or_terminal() -> None:
    from cdc.common.errors import CatalogError, CatalogUnavailable
    from cdc.iceberg.failures import classify

    refused = ("py4j.protocol.Py4JJavaError: An error occurred while calling o40.sql.\n"
               ": org.apache.iceberg.jdbc.UncheckedSQLException: Failed to connect: "
               "jdbc:postgresql://db:5432/iceberg?user=u&password=hunter2\n"
               "\tat org.apache.iceberg.jdbc.JdbcClientPool.newClient(JdbcClientPool.java:90)\n"
               "Caused by: org.postgresql.util.PSQLException: Connection to db:5432 refused. Check that the hostname "
               "and port are correct and that the postmaster is accepting TCP/IP connections.\n"
               "Caused by: java.net.ConnectException: Connection refused\n")
    err = classify(refused, "catalog lake")
    assert isinstance(err, CatalogUnavailable) and err.exit_code == 75
    assert str(err).startswith("catalog lake: the jdbc catalog's database is unreachable: PSQLException: Connection "
                               "to db:5432 refused") and "hunter2" not in str(err)
    auth = refused.replace("Connection to db:5432 refused. Check", 'FATAL: password authentication failed for user "u"')
    assert isinstance(classify(auth, "table a.b: merge failed"), CatalogError)
    no_db = ": org.apache.iceberg.jdbc.UncheckedSQLException: x\nCaused by: org.postgresql.util.PSQLException: " \
            'FATAL: database "iceberg" does not exist\n'
    assert classify(no_db, "c").exit_code == 2
    # not a jdbc catalog's error: left to the other rules
    assert classify("java.net.ConnectException: Connection refused (S3)", "c") is None
    assert classify("org.apache.iceberg.jdbc.JdbcCatalog NoSuchTableException: Table does not exist: a.b", "c") is None


def test_catalog_schema_race_on_a_fresh_database_is_retryable() -> None:
    from cdc.iceberg.failures import classify

    race = (": org.apache.iceberg.jdbc.UncheckedSQLException: Cannot check and eventually update SQL schema\n"
            "Caused by: org.postgresql.util.PSQLException: ERROR: column \"iceberg_type\" of relation "
            "\"iceberg_tables\" already exists\n")
    err = classify(race, "catalog lake")
    assert err.exit_code == 75 and "another run created or upgraded the jdbc catalog's own tables" in str(err)
    assert 'column "iceberg_type" of relation "iceberg_tables" already exists' in str(err)
    # "already exists" elsewhere (a table, a namespace) is not this race
    assert classify("org.apache.iceberg.jdbc.JdbcCatalog AlreadyExistsException: Table already exists: a.b", "c") \
        is None
